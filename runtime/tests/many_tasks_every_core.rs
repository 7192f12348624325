//! ≥100k tasks on every core complete, and cross-core calls return the right answers.

use std::cell::Cell;
use std::rc::Rc;

use ziob_runtime::{call_on, core_id, nop, spawn, yield_now, Runtime};

const TASKS_PER_CORE: usize = 100_000;

#[test]
fn hundred_thousand_tasks_per_core_complete() {
    let rt = Runtime::builder().cores(2).build().unwrap();
    let counts = rt
        .run_on_all(|core| async move {
            assert_eq!(core_id(), core);
            let done = Rc::new(Cell::new(0usize));
            let mut handles = Vec::with_capacity(TASKS_PER_CORE);
            for i in 0..TASKS_PER_CORE {
                let done = done.clone();
                handles.push(spawn(async move {
                    yield_now().await;
                    if i % 10 == 0 {
                        nop().await.unwrap();
                    }
                    done.set(done.get() + 1);
                    i
                }));
            }
            let mut sum = 0usize;
            for h in handles {
                sum += h.await;
            }
            assert_eq!(sum, TASKS_PER_CORE * (TASKS_PER_CORE - 1) / 2);
            done.get()
        })
        .unwrap();
    assert_eq!(counts, vec![TASKS_PER_CORE; 2]);
}

#[test]
fn cross_core_calls_return_the_right_answers() {
    let rt = Runtime::builder().cores(2).build().unwrap();
    let sums = rt
        .run_on_all(|me| async move {
            let other = 1 - me;
            let mut sum = 0u64;
            for i in 0..2_000u64 {
                let (ran_on, v) = call_on(other, move || async move { (core_id(), i * 3 + 1) })
                    .await
                    .unwrap();
                assert_eq!(ran_on, other);
                sum += v;
            }
            // A call to ourselves runs inline.
            let (ran_on, _) = call_on(me, || async { (core_id(), ()) }).await.unwrap();
            assert_eq!(ran_on, me);
            sum
        })
        .unwrap();
    let want: u64 = (0..2_000u64).map(|i| i * 3 + 1).sum();
    assert_eq!(sums, vec![want, want]);
}

#[test]
fn concurrent_cross_core_calls_from_many_tasks() {
    let rt = Runtime::builder().cores(2).build().unwrap();
    let total = rt
        .run_on(0, || async {
            let mut tasks = Vec::new();
            for t in 0..200u64 {
                tasks.push(spawn(async move {
                    let mut s = 0;
                    for i in 0..20u64 {
                        s += call_on(1, move || async move { t * 1000 + i })
                            .await
                            .unwrap();
                    }
                    s
                }));
            }
            let mut s = 0;
            for t in tasks {
                s += t.await;
            }
            s
        })
        .unwrap();
    let want: u64 = (0..200u64)
        .map(|t| (0..20u64).map(|i| t * 1000 + i).sum::<u64>())
        .sum();
    assert_eq!(total, want);
}

#[test]
fn run_on_unknown_core_is_an_error() {
    let rt = Runtime::builder().cores(1).build().unwrap();
    let err = rt.run_on(5, || async {}).unwrap_err();
    assert_eq!(err.to_string(), "core 5 is not running");
}

#[test]
fn sleep_wakes_an_idle_core() {
    let rt = Runtime::builder().cores(1).build().unwrap();
    let elapsed = rt
        .block_on(|| async {
            let t = std::time::Instant::now();
            ziob_runtime::sleep(std::time::Duration::from_millis(20))
                .await
                .unwrap();
            t.elapsed()
        })
        .unwrap();
    assert!(
        elapsed >= std::time::Duration::from_millis(20),
        "{elapsed:?}"
    );
}

#[test]
fn a_panicking_task_does_not_take_the_core_down() {
    let rt = Runtime::builder().cores(1).build().unwrap();
    let survived = rt
        .block_on(|| async {
            spawn(async { panic!("boom in a detached task") }).detach();
            for _ in 0..10 {
                yield_now().await;
            }
            ziob_runtime::core_stats().task_panics
        })
        .unwrap();
    assert_eq!(survived, 1);
    // run_on re-raises a panic of its own future on the calling thread.
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(|| async { panic!("boom in run_on") })
    }));
    assert!(caught.is_err());
    assert_eq!(
        rt.block_on(|| async { 7 }).unwrap(),
        7,
        "the core is still alive"
    );
}

#[test]
fn a_task_that_never_waits_cannot_starve_the_core() {
    // Two tasks loop on work that completes at once; with consume_budget both make progress
    // and a cross-core call into the busy core is answered.
    let rt = Runtime::builder().cores(2).build().unwrap();
    let (a, b) = rt
        .run_on(0, || async {
            let stop = Rc::new(Cell::new(false));
            let counts: Vec<_> = (0..2)
                .map(|_| {
                    let stop = stop.clone();
                    spawn(async move {
                        let mut n = 0u64;
                        while !stop.get() {
                            ziob_runtime::consume_budget().await;
                            n += 1;
                        }
                        n
                    })
                })
                .collect();
            let answer = call_on(1, || async { call_on(0, || async { 42 }).await.unwrap() })
                .await
                .unwrap();
            assert_eq!(answer, 42);
            stop.set(true);
            let mut it = counts.into_iter();
            (it.next().unwrap().await, it.next().unwrap().await)
        })
        .unwrap();
    assert!(a > 0 && b > 0, "{a} {b}");
}

#[test]
fn a_poller_removed_while_pollers_run_stops_running() {
    let rt = Runtime::builder().cores(1).build().unwrap();
    let calls = rt
        .block_on(|| async {
            let calls = Rc::new(Cell::new(0u32));
            let guard: Rc<std::cell::RefCell<Option<ziob_runtime::PollerGuard>>> =
                Rc::new(std::cell::RefCell::new(None));
            let (c, g) = (calls.clone(), guard.clone());
            // The poller drops its own guard on its third call, from inside the poll loop.
            let pg = ziob_runtime::register_poller(move || {
                c.set(c.get() + 1);
                if c.get() == 3 {
                    g.borrow_mut().take();
                }
                0
            });
            *guard.borrow_mut() = Some(pg);
            for _ in 0..20 {
                ziob_runtime::sleep(std::time::Duration::from_millis(1))
                    .await
                    .unwrap();
            }
            calls.get()
        })
        .unwrap();
    assert_eq!(calls, 3);
}
