//! Everything a core runs on behalf of callers (spawn_on closures, jobs, pollers, wakers of
//! other executors) may panic: the core logs it and keeps serving; a later call works.

use std::future::Future;
use std::sync::mpsc;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
use std::time::Duration;

use ziob_runtime::Runtime;

fn bounded(f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => t.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("hung: the core died"),
    }
}

fn still_serves(rt: &Runtime, core: usize) {
    let v = rt
        .run_on(core, || async {
            ziob_runtime::sleep(Duration::from_millis(1)).await.unwrap();
            7
        })
        .expect("the core is gone");
    assert_eq!(v, 7);
}

#[test]
fn a_panicking_spawn_on_closure_does_not_kill_the_core() {
    bounded(|| {
        let rt = Runtime::builder().cores(2).build().unwrap();
        for round in 0..3 {
            rt.handle()
                .spawn_on(1, || -> std::future::Ready<()> { panic!("closure panics") })
                .unwrap();
            still_serves(&rt, 1);
            // The same from a core.
            rt.block_on(|| async {
                ziob_runtime::spawn_on(1, || -> std::future::Ready<()> { panic!("from a core") })
                    .unwrap();
            })
            .unwrap();
            still_serves(&rt, 1);
            let _ = round;
        }
    });
}

#[test]
fn a_panicking_poller_does_not_kill_the_core() {
    bounded(|| {
        let rt = Runtime::builder().cores(1).build().unwrap();
        rt.block_on(|| async {
            let guard = ziob_runtime::register_poller(|| panic!("poller panics"));
            std::mem::forget(guard);
        })
        .unwrap();
        still_serves(&rt, 0);
    });
}

fn panicking_waker() -> Waker {
    fn clone(p: *const ()) -> RawWaker {
        RawWaker::new(p, &VTABLE)
    }
    fn wake(_: *const ()) {
        panic!("foreign waker panics");
    }
    fn drop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake, drop);
    // SAFETY: the vtable functions ignore the data pointer.
    unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) }
}

#[test]
fn a_panicking_foreign_waker_does_not_kill_the_core() {
    bounded(|| {
        let rt = Runtime::builder().cores(1).build().unwrap();
        rt.block_on(|| async {
            let waker = panicking_waker();
            let mut cx = Context::from_waker(&waker);
            let mut s = Box::pin(ziob_runtime::sleep(Duration::from_millis(1)));
            assert!(matches!(s.as_mut().poll(&mut cx), Poll::Pending));
            // The completion wakes the foreign waker on the core's loop.
            std::mem::forget(s);
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        still_serves(&rt, 0);
    });
}
