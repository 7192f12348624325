//! A task that is always ready (its operations all complete at once) does not hold its core's
//! loop for the whole task budget while work outside the run queue waits: a call from
//! another thread or from a background task on another core, and the completion of another
//! task's op, are taken up within a few dozen polls (`crate::background::outside_turn_ends`),
//! not after the budget of 128; and since each poll here is long (`polls_are_long`), the
//! loop looks after every poll once it measured that, so the typical wait is a poll or
//! two, not the 8 polls between two looks.
//!
//! Counted in polls of the busy task, not timed: each poll busy-waits [`POLL`], so by the
//! time a turn is found possibly long (16 polls, or 8 for a task that spends its budget)
//! and at every look after it a slice has passed, and a preemption only makes a poll
//! longer. The calls are sent at every phase of a turn (a sleep of k polls before each).
//! Without the rule a turn ran the whole budget (128 polls here, 40 ms) before the loop
//! drained its mailbox or reaped; with looks every 8 polls only, the median wait was 6-23
//! polls.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ziob_runtime::{consume_budget, nop, spawn, spawn_background, yield_now, Runtime};

/// Busy time of each poll of the busy task.
const POLL: Duration = Duration::from_micros(300);
/// Calls or ops measured per test (the k-th call is sent k polls' time after the last).
const ROUNDS: u32 = 48;

/// How the busy task gives way.
#[derive(Clone, Copy, Debug)]
enum Gives {
    /// It yields after each [`POLL`] (CPU work between awaits).
    Yield,
    /// It spends its whole cooperative budget (64 operations that complete at once, as
    /// appends absorbed by a buffer), then is made to yield.
    Budget,
}

/// Most busy polls one call or completion may wait for, far below the budget of 128: in the
/// first turn, before the polls were measured long, until the turn is found possibly long,
/// then to the next look (8 polls), the poll or two of the call's task and its answer, and
/// slack. A task that spends its budget is found so after 8 polls (measured: at most 15-17),
/// one that only yields after 16 (measured: 22-25). The slack (15) covers a sender preempted
/// for a few ms between reading the count and sending.
fn max_wait_polls(gives: Gives) -> u64 {
    match gives {
        Gives::Budget => 32,
        Gives::Yield => 40,
    }
}

/// Most polls the median call or completion may wait for: the poll running when it came
/// (polls are long, so the loop looks after each and the turn ends there), the poll or two
/// of the call's task and its answer (measured: medians 1-2). The median is not moved by a
/// few rounds whose sender was preempted, or by the first turn, before the polls were
/// measured. With a look every 8 polls only the medians were 6 (calls) and 15 (a nop) for
/// a task that spends its budget, 8 and 23 for one that yields.
const MAX_MEDIAN_WAIT_POLLS: u64 = 4;

fn busy_for(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Spawns, on the current core, a task that busy-waits [`POLL`], counts the poll in `polls`
/// and gives way as `gives` says, until `stop` is set.
fn spawn_busy(polls: Arc<AtomicU64>, stop: Arc<AtomicBool>, gives: Gives) {
    spawn(async move {
        while !stop.load(Ordering::Relaxed) {
            busy_for(POLL);
            polls.fetch_add(1, Ordering::SeqCst);
            match gives {
                Gives::Yield => yield_now().await,
                // 64 units, then the 65th call yields.
                Gives::Budget => {
                    for _ in 0..65 {
                        consume_budget().await;
                    }
                }
            }
        }
    })
    .detach();
}

/// The sleep before the `k`-th call: k polls' time, so that the calls land at every phase
/// of a turn.
fn pause(k: u32) -> Duration {
    POLL * k
}

/// A runtime of `cores` cores whose core 0 runs a busy task giving way as `gives` says; `f`
/// gets the runtime and the busy task's poll counter, and its result is returned after the
/// busy task stopped.
fn with_busy_core0<T: Send + 'static>(
    cores: usize,
    gives: Gives,
    f: impl FnOnce(&Runtime, &Arc<AtomicU64>) -> T + Send + 'static,
) -> T {
    common::with_watchdog(Duration::from_secs(120), move || {
        let rt = Runtime::builder().cores(cores).build().unwrap();
        let polls = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (polls.clone(), stop.clone());
        futures::executor::block_on(
            rt.handle()
                .call(0, move || async move { spawn_busy(p, s, gives) }),
        )
        .unwrap();
        let out = f(&rt, &polls);
        stop.store(true, Ordering::Relaxed);
        drop(rt);
        out
    })
}

/// The polls of the busy task each call from a plain thread waited for.
fn call_waits(gives: Gives) -> Vec<u64> {
    with_busy_core0(1, gives, |rt, polls| {
        let handle = rt.handle();
        let mut waits = Vec::new();
        for k in 0..ROUNDS {
            std::thread::sleep(pause(k));
            let sent_at = polls.load(Ordering::SeqCst);
            let p = polls.clone();
            let ran_at = futures::executor::block_on(
                handle.call(0, move || async move { p.load(Ordering::SeqCst) }),
            )
            .unwrap();
            waits.push(ran_at - sent_at);
        }
        waits
    })
}

/// The polls of the busy task on core 0 each call from a background task on core 1 waited
/// for (the call runs as a background task on core 0: kv-demo's compaction calling the core
/// that owns its zones).
fn background_call_waits(gives: Gives) -> Vec<u64> {
    with_busy_core0(2, gives, |rt, polls| {
        let polls = polls.clone();
        futures::executor::block_on(rt.handle().call(1, move || async move {
            spawn_background(async move {
                let handle = ziob_runtime::handle();
                let mut waits = Vec::new();
                for k in 0..ROUNDS {
                    ziob_runtime::sleep(pause(k)).await.unwrap();
                    let sent_at = polls.load(Ordering::SeqCst);
                    let p = polls.clone();
                    let ran_at = handle
                        .call(0, move || async move { p.load(Ordering::SeqCst) })
                        .await
                        .unwrap();
                    waits.push(ran_at - sent_at);
                }
                waits
            })
            .await
        }))
        .unwrap()
    })
}

/// The polls of the busy task a task on its core waited for each of its nops' completions.
fn nop_waits(gives: Gives) -> Vec<u64> {
    with_busy_core0(1, gives, |rt, polls| {
        let polls = polls.clone();
        futures::executor::block_on(rt.handle().call(0, move || async move {
            let mut waits = Vec::new();
            for k in 0..ROUNDS {
                ziob_runtime::sleep(pause(k)).await.unwrap();
                let before = polls.load(Ordering::SeqCst);
                nop().await.unwrap();
                waits.push(polls.load(Ordering::SeqCst) - before);
            }
            waits
        }))
        .unwrap()
    })
}

fn check(what: &str, waits: impl Fn(Gives) -> Vec<u64>) {
    for gives in [Gives::Budget, Gives::Yield] {
        let mut waits = waits(gives);
        waits.sort_unstable();
        let worst = *waits.last().unwrap();
        let median = waits[waits.len() / 2];
        let max = max_wait_polls(gives);
        eprintln!("{what} ({gives:?}): waited at most {worst} polls, median {median}");
        assert!(
            worst <= max,
            "{what} waited {worst} polls of a task that is always ready ({gives:?}; at most \
             {max})"
        );
        assert!(
            median <= MAX_MEDIAN_WAIT_POLLS,
            "{what} waited {median} polls (median) of a task whose polls are long ({gives:?}; \
             at most {MAX_MEDIAN_WAIT_POLLS}): the loop should look after every poll"
        );
    }
}

#[test]
fn a_call_from_another_thread_waits_a_few_polls_not_the_whole_budget() {
    check("a call from a plain thread", call_waits);
}

#[test]
fn a_call_from_a_background_task_on_another_core_waits_a_few_polls() {
    check("a call from a background task", background_call_waits);
}

#[test]
fn a_completion_is_reaped_a_few_polls_after_it_not_after_the_whole_budget() {
    check("a nop's task", nop_waits);
}
