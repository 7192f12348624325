//! A hard `io_uring_enter` error stops the core: tasks waiting on it get an error instead of
//! hanging, and every later call to it fails with `CoreDead`. Transient errors are counted
//! and retried. (Errors are injected through the test-only seam.)

use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::mpsc;
use std::time::Duration;

use ziob_runtime::testing::{inject_enter_error, panic_in_core_loop};
use ziob_runtime::{core_stats, DmaBuf, Error, File, Runtime};

fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("hung: a caller of a dead core was never answered")
}

fn pipe() -> (File, OwnedFd) {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors are fresh and owned by us from here on.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    (File::from_fd(r), w)
}

fn assert_dead_because(e: &Error, core: usize, why: &str) {
    match e {
        Error::CoreDead { core: c, reason } => {
            assert_eq!(*c, core);
            assert!(reason.contains(why), "{reason}");
        }
        other => panic!("expected CoreDead, got {other}"),
    }
}

fn assert_dead(e: &Error, core: usize) {
    assert_dead_because(e, core, "io_uring_enter");
}

#[test]
fn a_fatal_enter_error_fails_waiting_callers_and_later_calls() {
    for errno in [libc::EBADR, libc::EFAULT, libc::ENXIO] {
        bounded(move || {
            let rt = Runtime::builder().cores(2).build().unwrap();
            let (reader, _writer) = pipe();
            let h = rt.handle();
            // Core 0 waits, through call_on, for a read on core 1 that never completes.
            let (tx, rx) = mpsc::channel();
            rt.handle()
                .spawn_on(0, move || async move {
                    let r = ziob_runtime::call_on(1, move || async move {
                        let (res, _) = reader.read_at(DmaBuf::with_capacity(64), 0).await;
                        res.map(|_| ())
                    })
                    .await;
                    let _ = tx.send(r.map(|_| ()));
                })
                .unwrap();
            std::thread::sleep(Duration::from_millis(50));
            // A task on core 1 makes its next io_uring_enter fail.
            h.spawn_on(1, move || async move { inject_enter_error(errno) })
                .unwrap();
            let got = rx
                .recv_timeout(Duration::from_secs(20))
                .expect("the caller waiting on the dead core hangs");
            assert_dead(&got.unwrap_err(), 1);
            // Every later call fails at once.
            assert_dead(&rt.run_on(1, || async {}).unwrap_err(), 1);
            assert_dead(&h.spawn_on(1, || async {}).unwrap_err(), 1);
            let from_core = rt
                .run_on(0, || async { ziob_runtime::spawn_on(1, || async {}) })
                .unwrap();
            assert_dead(&from_core.unwrap_err(), 1);
            // The other core is fine.
            assert_eq!(rt.run_on(0, || async { 5 }).unwrap(), 5);
            drop(rt);
        });
    }
}

#[test]
fn transient_enter_errors_are_counted_and_retried() {
    bounded(|| {
        let rt = Runtime::builder().cores(1).build().unwrap();
        let stats = rt
            .block_on(|| async {
                for errno in [libc::EAGAIN, libc::EBUSY, libc::EAGAIN] {
                    inject_enter_error(errno);
                    ziob_runtime::sleep(Duration::from_millis(1)).await.unwrap();
                    ziob_runtime::nop().await.unwrap();
                }
                core_stats()
            })
            .unwrap();
        assert_eq!(stats.enter_errors, 3);
        assert_eq!(rt.block_on(|| async { 1 }).unwrap(), 1);
    });
}

#[test]
fn a_panic_in_a_call_on_closure_reaches_the_caller_as_a_panic() {
    bounded(|| {
        let rt = Runtime::builder().cores(2).build().unwrap();
        let caught = rt
            .block_on(|| async {
                use futures::FutureExt;
                std::panic::AssertUnwindSafe(ziob_runtime::call_on(1, || async {
                    panic!("remote boom")
                }))
                .catch_unwind()
                .await
                .is_err()
            })
            .unwrap();
        assert!(caught, "the panic did not reach the caller");
        assert_eq!(rt.run_on(1, || async { 3 }).unwrap(), 3);
    });
}

#[test]
fn a_panic_in_the_core_loop_marks_the_core_dead() {
    bounded(|| {
        let rt = Runtime::builder().cores(2).build().unwrap();
        let (reader, _writer) = pipe();
        let (tx, rx) = mpsc::channel();
        rt.handle()
            .spawn_on(0, move || async move {
                let r = ziob_runtime::call_on(1, move || async move {
                    let (res, _) = reader.read_at(DmaBuf::with_capacity(64), 0).await;
                    res.map(|_| ())
                })
                .await;
                let _ = tx.send(r.map(|_| ()));
            })
            .unwrap();
        std::thread::sleep(Duration::from_millis(50));
        rt.handle()
            .spawn_on(1, || async { panic_in_core_loop() })
            .unwrap();
        let got = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the caller waiting on the dead core hangs");
        let why = "panic in the core loop";
        assert_dead_because(&got.unwrap_err(), 1, why);
        assert_dead_because(&rt.run_on(1, || async {}).unwrap_err(), 1, why);
        assert_dead_because(&rt.handle().spawn_on(1, || async {}).unwrap_err(), 1, why);
        assert_eq!(rt.run_on(0, || async { 5 }).unwrap(), 5);
    });
}
