//! Fault injection seams for tests of the runtime's error paths. Not part of the API.

/// Makes the next `io_uring_enter` of the current core fail with `errno` instead of entering
/// the kernel (EAGAIN/EBUSY: transient, the core retries; anything else: fatal, the core
/// stops with [`Error::CoreDead`](crate::Error::CoreDead)). Panics off-core.
pub fn inject_enter_error(errno: i32) {
    crate::core::current("inject_enter_error")
        .injected_enter_error
        .set(Some(errno));
}

/// Makes the current core's loop panic at its next turn, outside any task (as a bug in the
/// loop would): the core must stop as dead ([`Error::CoreDead`](crate::Error::CoreDead)).
/// Panics off-core.
pub fn panic_in_core_loop() {
    let core = crate::core::current("panic_in_core_loop");
    core.injected_loop_panic.set(true);
    // Wake the loop in case it is about to sleep.
    core.remote.kick();
}
