//! `Handle::call`: the cross-thread call. Its future is `Send`, runs a `!Send` future on the
//! target core, answers any thread and executor, is lazy, propagates panics, and answers
//! with an error (never hangs) when the core is dead or the runtime stopped.

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use futures::executor::block_on;
use ziob_runtime::testing::panic_in_core_loop;
use ziob_runtime::{Error, Runtime};

fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("hang: {what}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
    }
}

fn assert_send<T: Send>(_: &T) {}

#[test]
fn answers_plain_threads_with_the_target_cores_output() {
    bounded("calls from plain threads", || {
        let rt = Runtime::builder().cores(3).build().unwrap();
        let h = rt.handle();
        let threads: Vec<_> = (0..6)
            .map(|t| {
                let h = h.clone();
                std::thread::spawn(move || {
                    for i in 0..200usize {
                        let core = (t + i) % 3;
                        let call = h.call(core, move || async move {
                            // A !Send future: it lives on the core only.
                            let local = Rc::new(i);
                            ziob_runtime::yield_now().await;
                            (ziob_runtime::core_id(), *local)
                        });
                        assert_send(&call);
                        assert_eq!(block_on(call).unwrap(), (core, i));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    });
}

#[test]
fn works_from_a_core_to_itself_and_to_others() {
    bounded("calls from a core", || {
        let rt = Runtime::builder().cores(2).build().unwrap();
        let h = rt.handle();
        let got = rt
            .run_on(0, move || async move {
                let a = h
                    .call(0, || async { ziob_runtime::core_id() })
                    .await
                    .unwrap();
                let b = h
                    .call(1, || async { ziob_runtime::core_id() })
                    .await
                    .unwrap();
                (a, b)
            })
            .unwrap();
        assert_eq!(got, (0, 1));
    });
}

#[test]
fn a_core_out_of_range_is_an_error() {
    let rt = Runtime::builder().cores(1).build().unwrap();
    let err = block_on(rt.handle().call(5, || async {})).unwrap_err();
    assert!(matches!(err, Error::CoreGone(5)), "{err}");
}

#[test]
fn nothing_is_sent_until_first_polled() {
    bounded("lazy call", || {
        let rt = Runtime::builder().cores(1).build().unwrap();
        let h = rt.handle();
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let call = h.call(0, move || async move { r.store(true, Ordering::SeqCst) });
        drop(call);
        // The core handles its mailbox in order: had the first call been sent, it ran
        // before this one answers.
        block_on(h.call(0, || async {})).unwrap();
        assert!(!ran.load(Ordering::SeqCst), "a never-polled call ran");
    });
}

#[test]
fn a_panic_continues_in_the_caller() {
    let rt = Runtime::builder().cores(1).build().unwrap();
    let h = rt.handle();
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        block_on(h.call(0, || async { panic!("boom in the call") }))
    }));
    let msg = res.unwrap_err();
    assert_eq!(msg.downcast_ref::<&str>(), Some(&"boom in the call"));
    // The core goes on.
    assert_eq!(block_on(h.call(0, || async { 7 })).unwrap(), 7);
}

/// Counts live remote futures: +1 when made, -1 when dropped.
struct Live(Arc<AtomicUsize>);
impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Polls `fut` `polls` times with a no-op waker (sleeping a little between polls), then
/// drops it.
fn poll_then_drop<F: std::future::Future>(fut: F, polls: u32) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    for _ in 0..polls {
        if let std::task::Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return Some(v);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    None
}

#[test]
fn a_dropped_call_drops_its_future_on_the_core_and_leaks_nothing() {
    for seed in 0..20u64 {
        bounded("dropped calls", move || {
            let rt = Runtime::builder().cores(2).build().unwrap();
            let h = rt.handle();
            let live = Arc::new(AtomicUsize::new(0));
            let mut x = seed;
            for i in 0..50u64 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let polls = (x >> 33) as u32 % 4;
                let l = live.clone();
                let call = h.call((i % 2) as usize, move || {
                    l.fetch_add(1, Ordering::SeqCst);
                    let guard = Live(l);
                    async move {
                        // Never finishes on its own: only dropping ends it.
                        let _guard = guard;
                        futures::future::pending::<()>().await
                    }
                });
                assert!(poll_then_drop(call, polls).is_none());
            }
            // Every remote future was dropped (or never made): none is left waiting.
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while live.load(Ordering::SeqCst) != 0 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "seed {seed}: {} remote futures outlived their dropped calls",
                    live.load(Ordering::SeqCst)
                );
                // Round trips make both cores drain their mailboxes and run their tasks.
                block_on(h.call(0, || async {})).unwrap();
                block_on(h.call(1, || async {})).unwrap();
                std::thread::sleep(Duration::from_millis(1));
            }
        });
    }
}

#[test]
fn stopping_the_runtime_answers_calls_in_flight_and_later() {
    bounded("calls across a runtime stop", || {
        let rt = Runtime::builder().cores(2).build().unwrap();
        let h = rt.handle();
        let (started_tx, started_rx) = mpsc::channel();
        let waiters: Vec<_> = (0..4)
            .map(|i| {
                let h = h.clone();
                let started = started_tx.clone();
                std::thread::spawn(move || {
                    block_on(h.call(i % 2, move || async move {
                        let _ = started.send(());
                        futures::future::pending::<()>().await
                    }))
                })
            })
            .collect();
        for _ in 0..4 {
            started_rx.recv().unwrap();
        }
        drop(rt);
        for w in waiters {
            let err = w.join().unwrap().unwrap_err();
            assert!(matches!(err, Error::CoreGone(_)), "{err}");
        }
        let err = block_on(h.call(1, || async {})).unwrap_err();
        assert!(matches!(err, Error::CoreGone(1)), "{err}");
    });
}

#[test]
fn a_dead_core_answers_with_core_dead() {
    bounded("calls to a dead core", || {
        let rt = Runtime::builder().cores(2).build().unwrap();
        let h = rt.handle();
        let (started_tx, started_rx) = mpsc::channel();
        let h2 = h.clone();
        let waiter = std::thread::spawn(move || {
            block_on(h2.call(1, move || async move {
                let _ = started_tx.send(());
                futures::future::pending::<()>().await
            }))
        });
        started_rx.recv().unwrap();
        block_on(h.call(1, || async { panic_in_core_loop() })).unwrap();
        let err = waiter.join().unwrap().unwrap_err();
        assert!(matches!(err, Error::CoreDead { core: 1, .. }), "{err}");
        let err = block_on(h.call(1, || async {})).unwrap_err();
        assert!(matches!(err, Error::CoreDead { core: 1, .. }), "{err}");
        assert_eq!(block_on(h.call(0, || async { 3 })).unwrap(), 3);
    });
}

#[test]
fn local_core_names_this_runtimes_core_and_nothing_else() {
    bounded("local_core", || {
        let a = Runtime::builder().cores(2).build().unwrap();
        let b = Runtime::builder().cores(2).build().unwrap();
        let (ha, hb) = (a.handle(), b.handle());
        assert_eq!(ha.local_core(), None, "a plain thread is no core");
        for core in 0..2 {
            let (ha2, hb2) = (ha.clone(), hb.clone());
            let seen =
                block_on(ha.call(
                    core,
                    move || async move { (ha2.local_core(), hb2.local_core()) },
                ))
                .unwrap();
            assert_eq!(seen, (Some(core), None), "core {core} of runtime a");
            // Core `core` of runtime b has the same index but is not runtime a's.
            let ha3 = ha.clone();
            let seen = block_on(hb.call(core, move || async move { ha3.local_core() })).unwrap();
            assert_eq!(
                seen, None,
                "core {core} of runtime b seen from runtime a's handle"
            );
        }
    });
}
