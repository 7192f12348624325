//! Fault injection seams for tests of the runtime's error paths, and a helper for tests
//! that need a fresh process. Not part of the API.

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

/// Runs the test `name` (its full path, e.g. `tests::my_test`) of the current test binary
/// again, alone, in a child process with `env` set and none of the caller's `MIMALLOC_*`
/// variables (the child's allocator settings are the binary's own, plus `env`). For tests
/// that need a fresh process: a fresh heap, an option read at start. Panics unless the
/// child ran it and it passed; returns the child's stdout (`--nocapture`: the test's
/// prints are in it).
pub fn rerun_test_in_child(name: &str, env: &[(&str, &str)]) -> String {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1"]);
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("MIMALLOC_") {
            cmd.env_remove(var);
        }
    }
    let out = cmd
        .envs(env.iter().copied())
        .output()
        .expect("the child test process");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the child failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("1 passed"), "{stdout}");
    stdout
}
