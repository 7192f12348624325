//! Fault injection seams for tests of the runtime's error paths. Not part of the API.

/// Makes the next `io_uring_enter` of the current core fail with `errno` instead of entering
/// the kernel (EAGAIN/EBUSY: transient, the core retries; anything else: fatal, the core
/// stops with [`Error::CoreDead`](crate::Error::CoreDead)). Panics off-core.
pub fn inject_enter_error(errno: i32) {
    crate::core::current("inject_enter_error")
        .injected_enter_error
        .set(Some(errno));
}
