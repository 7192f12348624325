//! Background tasks (`spawn_background`) give way to ordinary tasks on their core and are
//! never starved by them. Counted in polls, not timed: a background task that is always
//! ready (it yields in a loop) runs in turns where no ordinary task is ready, in every turn
//! in which ordinary tasks used the whole task budget, after 7 turns passed over, and (with
//! a share set) while it had less than its share of the core's task time (that rule is
//! unit-tested with chosen times in `src/background.rs`; the one test here that times polls
//! only errs on the side a preemption cannot break). Every test runs under a watchdog, so a
//! lost wake-up fails instead of hanging.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use futures::channel::oneshot;
use ziob_runtime::{
    core_stats, nop, on_core, sleep, spawn, spawn_background, yield_now, Builder, Runtime,
};

/// Ops or yields of the ordinary task in each test.
const STEPS: u64 = 2_000;

/// Builds a runtime from `builder` on a thread of its own, runs `f` there and returns its
/// result, under [`common::with_watchdog`] (60 s).
fn bounded<T: Send + 'static>(
    builder: Builder,
    f: impl FnOnce(&Runtime) -> T + Send + 'static,
) -> T {
    common::with_watchdog(Duration::from_secs(60), move || {
        let rt = builder.build().unwrap();
        let out = f(&rt);
        drop(rt);
        out
    })
}

/// Spawns a task on the current core that counts its polls and yields until `stop` is set,
/// in the background or as an ordinary task.
fn spinner(background: bool, polls: Rc<Cell<u64>>, stop: Rc<Cell<bool>>) {
    busy_spinner(background, polls, stop, Duration::ZERO);
}

/// Spins (never yields) for `d`.
fn busy_for(d: Duration) {
    let t = std::time::Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// [`spinner`] whose every poll also busy-waits `busy` before it yields.
fn busy_spinner(background: bool, polls: Rc<Cell<u64>>, stop: Rc<Cell<bool>>, busy: Duration) {
    let work = async move {
        while !stop.get() {
            polls.set(polls.get() + 1);
            busy_for(busy);
            yield_now().await;
        }
    };
    if background {
        spawn_background(work).detach();
    } else {
        spawn(work).detach();
    }
}

/// Polls the spinner got while one ordinary task awaited `STEPS` nops in a row, on a core
/// that gives background tasks `share` percent of its task time.
fn spinner_polls_during_nops(background: bool, share: u8) -> u64 {
    spinner_polls_during(background, share, STEPS, Duration::ZERO)
}

/// Polls a spinner busy `busy` per poll got while one ordinary task awaited `nops` nops in
/// a row, on a core that gives background tasks `share` percent of its task time.
fn spinner_polls_during(background: bool, share: u8, nops: u64, busy: Duration) -> u64 {
    spinner_polls_during_steps(background, share, busy, nops, || async {
        nop().await.unwrap();
    })
}

/// Polls a spinner busy `busy` per poll got while one ordinary task ran `steps` times
/// `step()`, on a core that gives background tasks `share` percent of its task time.
fn spinner_polls_during_steps<F, Fut>(
    background: bool,
    share: u8,
    busy: Duration,
    steps: u64,
    step: F,
) -> u64
where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    bounded(
        Runtime::builder().cores(1).background_share_percent(share),
        move |rt| {
            rt.block_on(move || async move {
                let polls = Rc::new(Cell::new(0));
                let stop = Rc::new(Cell::new(false));
                busy_spinner(background, polls.clone(), stop.clone(), busy);
                yield_now().await;
                let before = polls.get();
                for _ in 0..steps {
                    step().await;
                }
                let during = polls.get() - before;
                stop.set(true);
                during
            })
            .unwrap()
        },
    )
}

#[test]
fn a_ready_background_task_does_not_run_between_an_ordinary_tasks_ops() {
    // A nop completes in the syscall that submits it (its completion is posted before the
    // enter returns, whatever the ring's task-run flags; not so with SQPOLL, which the
    // runtime does not use), so the ordinary task is ready again by the time the turn would
    // run a background task: the background task waits, and runs only on every 8th turn
    // (one nop each). As an ordinary task the same spinner runs at
    // least once between two nops.
    // With no share for background tasks.
    let background = spinner_polls_during_nops(true, 0);
    let ordinary = spinner_polls_during_nops(false, 0);
    assert!(
        ordinary >= STEPS,
        "ordinary spinner ran {ordinary} times during {STEPS} nops"
    );
    assert!(
        background <= STEPS / 8 + 2,
        "background spinner ran {background} times during {STEPS} nops (ordinary: {ordinary})"
    );
    assert!(
        background >= STEPS / 8 - 2,
        "background spinner ran only {background} times during {STEPS} nops: starved"
    );
}

#[test]
fn a_background_task_over_its_share_waits_for_the_ordinary_ones() {
    // A background task whose every poll takes 2 ms (a busy loop: far over any share of a
    // core whose ordinary task does a nop per turn) gets the slot only on the 8th turn.
    const POLLS: u64 = 400;
    let background = spinner_polls_during(true, 50, POLLS, Duration::from_millis(2));
    // At half the time it would be every other turn; the window's halving lets it in a
    // little more often than every 8th turn, never near every other one.
    assert!(
        background <= POLLS / 4,
        "a background task over its share ran {background} times during {POLLS} nops"
    );
}

#[test]
fn a_share_over_the_maximum_is_refused() {
    let err = Runtime::builder()
        .background_share_percent(ziob_runtime::BACKGROUND_SHARE_PERCENT_MAX + 1)
        .build()
        .err()
        .expect("a share over the maximum must be refused");
    assert!(
        err.to_string().contains("background_share_percent"),
        "unclear error: {err}"
    );
}

#[test]
fn a_background_task_runs_while_ordinary_tasks_never_stop() {
    // The ordinary task is always ready (it only yields), so every turn uses the whole task
    // budget; the background task still runs at least once per turn.
    let background = bounded(Runtime::builder().cores(1).task_budget(16), |rt| {
        rt.block_on(|| async {
            let polls = Rc::new(Cell::new(0));
            let stop = Rc::new(Cell::new(false));
            spinner(true, polls.clone(), stop.clone());
            for _ in 0..STEPS {
                yield_now().await;
            }
            stop.set(true);
            polls.get()
        })
        .unwrap()
    });
    // At most 16 ordinary polls per turn, and the block_on task is one of them.
    assert!(
        background >= STEPS / 16 / 2,
        "background task ran {background} times while an ordinary task yielded {STEPS} times"
    );
}

/// Iterations of an ordinary task that never waits (each busy `busy`, then
/// `consume_budget`, which yields only once the cooperative budget is used — like a task
/// whose reads all complete at once) and polls of a background spinner busy as long, over
/// `iterations`, on a core giving background tasks `share` percent.
fn background_polls_beside_a_task_that_never_waits(share: u8, iterations: u64) -> u64 {
    let busy = Duration::from_micros(20);
    spinner_polls_during_steps(true, share, busy, iterations, move || async move {
        busy_for(busy);
        ziob_runtime::consume_budget().await;
    })
}

#[test]
fn a_background_task_gets_its_share_beside_a_task_that_never_waits() {
    // Before turns were cut at a slice, a turn ran 128 polls of 64 iterations (~160 ms)
    // and then one background poll: the background task got ~0.01 % (a flush beside a
    // reader whose reads all hit the page cache made no progress for seconds). At a 50 %
    // share it gets about as many polls as the ordinary task makes iterations; at 0 % only
    // the one poll per turn.
    const ITERATIONS: u64 = 2_000;
    let half = background_polls_beside_a_task_that_never_waits(50, ITERATIONS);
    assert!(
        half >= ITERATIONS / 5,
        "a background task at a 50 % share polled {half} times beside {ITERATIONS} busy iterations"
    );
    // And no more than its share: the ordinary task keeps about half (polls as long as its
    // iterations; a generous bound, against a runaway background loop).
    assert!(
        half <= ITERATIONS * 3,
        "a background task at a 50 % share polled {half} times beside {ITERATIONS} busy iterations"
    );
    let none = background_polls_beside_a_task_that_never_waits(0, ITERATIONS);
    assert!(
        none <= ITERATIONS / 20,
        "a background task at a 0 % share polled {none} times beside {ITERATIONS} busy iterations"
    );
}

#[test]
fn background_tasks_finish_and_return_their_output() {
    let sums = bounded(Runtime::builder().cores(2), |rt| {
        (0..2)
            .map(|core| {
                rt.run_on(core, || async {
                    let tasks: Vec<_> = (0..8u64)
                        .map(|i| {
                            spawn_background(async move {
                                for _ in 0..i {
                                    nop().await.unwrap();
                                    yield_now().await;
                                }
                                i
                            })
                        })
                        .collect();
                    let mut sum = 0;
                    for t in tasks {
                        sum += t.await;
                    }
                    sum
                })
                .unwrap()
            })
            .collect::<Vec<u64>>()
    });
    assert_eq!(sums, vec![(0..8).sum::<u64>(); 2]);
}

#[test]
fn a_background_task_woken_by_a_plain_thread_or_a_timer_runs_on_a_sleeping_core() {
    // No ordinary task is ready while the background task waits, so the core goes to sleep;
    // the wake-up arrives through the mailbox (a plain thread) or as a completion (a timer).
    let (slept, rounds) = bounded(Runtime::builder().cores(1), |rt| {
        rt.block_on(|| async {
            let (to_thread, from_core) = mpsc::channel::<oneshot::Sender<u32>>();
            let answerer = thread::spawn(move || {
                while let Ok(reply) = from_core.recv() {
                    thread::sleep(Duration::from_micros(300));
                    let _ = reply.send(1);
                }
            });
            let sleeps_before = core_stats().sleeps;
            let rounds = spawn_background(async move {
                let mut n = 0;
                for _ in 0..50 {
                    let (tx, rx) = oneshot::channel();
                    to_thread.send(tx).unwrap();
                    n += rx.await.unwrap();
                    sleep(Duration::from_micros(200)).await.unwrap();
                }
                n
            })
            .await;
            answerer.join().unwrap();
            (core_stats().sleeps - sleeps_before, rounds)
        })
        .unwrap()
    });
    assert_eq!(rounds, 50);
    assert!(
        slept > 0,
        "the core never slept while the background task waited"
    );
}

#[test]
fn an_ordinary_task_awaiting_a_background_one_beside_a_spinning_task_finishes() {
    let done = bounded(Runtime::builder().cores(1), |rt| {
        rt.block_on(|| async {
            let polls = Rc::new(Cell::new(0));
            let stop = Rc::new(Cell::new(false));
            spinner(false, polls.clone(), stop.clone());
            let out = spawn_background(async {
                let mut sum = 0u64;
                for i in 0..200 {
                    nop().await.unwrap();
                    yield_now().await;
                    sum += i;
                }
                sum
            })
            .await;
            stop.set(true);
            out
        })
        .unwrap()
    });
    assert_eq!(done, (0..200).sum::<u64>());
}

/// Sets its flag when dropped, with whether that happened on a core's thread.
struct DropProbe {
    dropped: Arc<AtomicBool>,
    on_core: Arc<AtomicBool>,
}

impl Drop for DropProbe {
    fn drop(&mut self) {
        self.on_core.store(on_core(), Ordering::SeqCst);
        self.dropped.store(true, Ordering::SeqCst);
    }
}

#[test]
fn dropping_a_background_task_cancels_it_and_shutdown_drops_ready_ones_on_their_core() {
    let dropped = Arc::new(AtomicBool::new(false));
    let dropped_on_core = Arc::new(AtomicBool::new(false));
    let (d, c) = (dropped.clone(), dropped_on_core.clone());
    let polls = bounded(Runtime::builder().cores(1), move |rt| {
        rt.block_on(move || async move {
            let polls = Rc::new(Cell::new(0));
            let p = polls.clone();
            let task = spawn_background(async move {
                loop {
                    p.set(p.get() + 1);
                    yield_now().await;
                }
            });
            for _ in 0..100 {
                nop().await.unwrap();
                yield_now().await;
            }
            drop(task);
            let at_drop = polls.get();
            for _ in 0..100 {
                yield_now().await;
            }
            assert_eq!(polls.get(), at_drop, "a dropped background task ran on");
            // One more that is still ready when the runtime shuts down: the core drops it
            // (its future, with the probe) while shutting down.
            let probe = DropProbe {
                dropped: d,
                on_core: c,
            };
            spawn_background(async move {
                let _probe = probe;
                loop {
                    yield_now().await;
                }
            })
            .detach();
            at_drop
        })
        .unwrap()
    });
    assert!(polls > 0, "the background task never ran beside a busy one");
    assert!(
        dropped.load(Ordering::SeqCst),
        "shutdown leaked a ready background task"
    );
    assert!(
        dropped_on_core.load(Ordering::SeqCst),
        "a ready background task was dropped off its core"
    );
}

#[test]
fn no_background_task_runs_after_a_fatal_enter() {
    // The turn whose `io_uring_enter` fails for good must not poll a background task on the
    // broken ring before the core stops.
    let polls = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let at_inject = Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX));
    let (p, a) = (polls.clone(), at_inject.clone());
    bounded(Runtime::builder().cores(1), move |rt| {
        rt.handle()
            .spawn_on(0, move || async move {
                let spun = p.clone();
                spawn_background(async move {
                    loop {
                        spun.fetch_add(1, Ordering::SeqCst);
                        yield_now().await;
                    }
                })
                .detach();
                for _ in 0..64 {
                    nop().await.unwrap();
                }
                a.store(p.load(Ordering::SeqCst), Ordering::SeqCst);
                ziob_runtime::testing::inject_enter_error(libc::EBADR);
                let _ = nop().await;
            })
            .unwrap();
        // Wait until the core is dead (calls to it fail).
        while rt.run_on(0, || async {}).is_ok() {
            thread::sleep(Duration::from_millis(5));
        }
    });
    let at_inject = at_inject.load(Ordering::SeqCst);
    assert!(at_inject > 0 && at_inject != u64::MAX, "{at_inject}");
    assert_eq!(
        polls.load(Ordering::SeqCst),
        at_inject,
        "a background task was polled after the fatal enter"
    );
}

/// Polls a background spinner got while an ordinary task made `STEPS` calls
/// ([`Handle::call`](ziob_runtime::Handle::call)) to its own core, and their summed output.
fn spinner_polls_during_calls_to_the_own_core() -> (u64, u64) {
    // No share: only the turn rules let the spinner in (a share would let a spinner this
    // cheap in many times per turn, whatever the calls do).
    bounded(
        Runtime::builder().cores(1).background_share_percent(0),
        move |rt| {
            rt.block_on(move || async move {
                let polls = Rc::new(Cell::new(0));
                let stop = Rc::new(Cell::new(false));
                spinner(true, polls.clone(), stop.clone());
                yield_now().await;
                let handle = ziob_runtime::handle();
                let before = polls.get();
                let mut sum = 0;
                for i in 0..STEPS {
                    sum += handle.call(0, move || async move { i }).await.unwrap();
                }
                let during = polls.get() - before;
                stop.set(true);
                (during, sum)
            })
            .unwrap()
        },
    )
}

#[test]
fn a_call_to_the_own_core_does_not_wait_for_a_turn_of_the_loop() {
    // Through the mailbox, each call's job waited for the next turn of the loop, and in
    // every such turn the run queue was empty after the reap, so the background spinner ran
    // once per call. Spawned at once, the call's task runs in the caller's turn: the
    // spinner gets only the budget-saturated and every-8th turns.
    let (background, sum) = spinner_polls_during_calls_to_the_own_core();
    assert_eq!(sum, (0..STEPS).sum::<u64>());
    assert!(
        background <= STEPS / 4,
        "the background spinner ran {background} times during {STEPS} calls to the own core: \
         the calls waited for turns of the loop"
    );
}

#[test]
fn a_background_task_calling_its_own_core_gets_every_answer() {
    // A background task's call runs as a background task on the core it goes to (here its
    // own, see `Handle::call`); beside an ordinary spinner that is always ready, every call
    // must still be answered.
    let sum = bounded(Runtime::builder().cores(1), |rt| {
        rt.block_on(|| async {
            let polls = Rc::new(Cell::new(0));
            let stop = Rc::new(Cell::new(false));
            spinner(false, polls.clone(), stop.clone());
            let handle = ziob_runtime::handle();
            let sum = spawn_background(async move {
                let mut sum = 0u64;
                for i in 0..200u64 {
                    sum += handle.call(0, move || async move { i }).await.unwrap();
                }
                sum
            })
            .await;
            stop.set(true);
            sum
        })
        .unwrap()
    });
    assert_eq!(sum, (0..200).sum::<u64>());
}

/// Polls a spinner got on core 1 while an ordinary call there awaited `STEPS` nops, when a
/// background task on core 0 started that spinner on core 1 through `Handle::call` (or
/// `call_on`). Both cores give background tasks no share, so a background spinner gets
/// only every 8th turn.
fn polls_of_a_spinner_called_from_a_background_task(with_call_on: bool) -> u64 {
    use std::sync::atomic::AtomicU64;
    bounded(
        Runtime::builder().cores(2).background_share_percent(0),
        move |rt| {
            rt.block_on(move || async move {
                let polls = Arc::new(AtomicU64::new(0));
                let stop = Arc::new(AtomicBool::new(false));
                let (p, st) = (polls.clone(), stop.clone());
                let spin = move || async move {
                    while !st.load(Ordering::SeqCst) {
                        p.fetch_add(1, Ordering::SeqCst);
                        yield_now().await;
                    }
                };
                let handle = ziob_runtime::handle();
                let caller = spawn_background(async move {
                    if with_call_on {
                        ziob_runtime::call_on(1, spin).await.unwrap();
                    } else {
                        handle.call(1, spin).await.unwrap();
                    }
                });
                while polls.load(Ordering::SeqCst) == 0 {
                    sleep(Duration::from_micros(50)).await.unwrap();
                }
                let during = ziob_runtime::handle()
                    .call(1, move || async move {
                        let before = polls.load(Ordering::SeqCst);
                        for _ in 0..STEPS {
                            nop().await.unwrap();
                        }
                        polls.load(Ordering::SeqCst) - before
                    })
                    .await
                    .unwrap();
                stop.store(true, Ordering::SeqCst);
                caller.await;
                during
            })
            .unwrap()
        },
    )
}

#[test]
fn a_background_tasks_call_runs_as_a_background_task_on_the_target_core() {
    // As an ordinary task the called spinner would run at least once between two nops of
    // the ordinary call beside it (STEPS times); as a background task, every 8th turn.
    for with_call_on in [false, true] {
        let polls = polls_of_a_spinner_called_from_a_background_task(with_call_on);
        assert!(
            polls <= STEPS / 4,
            "a spinner called from a background task ({}) ran {polls} times during {STEPS} \
             nops of an ordinary task on its core: it ran as an ordinary task",
            if with_call_on {
                "call_on"
            } else {
                "Handle::call"
            }
        );
    }
}
