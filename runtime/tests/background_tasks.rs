//! Background tasks (`spawn_background`) give way to ordinary tasks on their core and are
//! never starved by them. Counted in polls, not timed: a background task that is always
//! ready (it yields in a loop) runs in turns where no ordinary task is ready, in every turn
//! in which ordinary tasks used the whole task budget, and after waiting 8 turns.

use std::cell::Cell;
use std::rc::Rc;

use ziob_runtime::{nop, spawn, spawn_background, yield_now, Runtime};

/// Ops or yields of the ordinary task in each test.
const STEPS: u64 = 2_000;

/// Spawns a task on the current core that counts its polls and yields until `stop` is set,
/// in the background or as an ordinary task.
fn spinner(background: bool, polls: Rc<Cell<u64>>, stop: Rc<Cell<bool>>) {
    let work = async move {
        while !stop.get() {
            polls.set(polls.get() + 1);
            yield_now().await;
        }
    };
    if background {
        spawn_background(work).detach();
    } else {
        spawn(work).detach();
    }
}

/// Polls the spinner got while one ordinary task awaited `STEPS` nops in a row.
fn spinner_polls_during_nops(background: bool) -> u64 {
    let rt = Runtime::builder().cores(1).build().unwrap();
    rt.block_on(move || async move {
        let polls = Rc::new(Cell::new(0));
        let stop = Rc::new(Cell::new(false));
        spinner(background, polls.clone(), stop.clone());
        yield_now().await;
        let before = polls.get();
        for _ in 0..STEPS {
            nop().await.unwrap();
        }
        let during = polls.get() - before;
        stop.set(true);
        during
    })
    .unwrap()
}

#[test]
fn a_ready_background_task_does_not_run_between_an_ordinary_tasks_ops() {
    // A nop completes in the syscall that submits it, so the ordinary task is ready again by
    // the time the turn would run a background task: the background task waits, and runs
    // only once it has waited 8 turns (one nop each). As an ordinary task the same spinner
    // runs at least once between two nops.
    let background = spinner_polls_during_nops(true);
    let ordinary = spinner_polls_during_nops(false);
    assert!(
        ordinary >= STEPS,
        "ordinary spinner ran {ordinary} times during {STEPS} nops"
    );
    assert!(
        background <= STEPS / 8 + 2,
        "background spinner ran {background} times during {STEPS} nops (ordinary: {ordinary})"
    );
}

#[test]
fn a_background_task_runs_while_ordinary_tasks_never_stop() {
    // The ordinary task is always ready (it only yields), so every turn uses the whole task
    // budget; the background task still runs once per turn.
    let rt = Runtime::builder().cores(1).task_budget(16).build().unwrap();
    let (background, yields) = rt
        .block_on(|| async {
            let polls = Rc::new(Cell::new(0));
            let stop = Rc::new(Cell::new(false));
            spinner(true, polls.clone(), stop.clone());
            for _ in 0..STEPS {
                yield_now().await;
            }
            stop.set(true);
            (polls.get(), STEPS)
        })
        .unwrap();
    // At most 16 ordinary polls per turn, and the block_on task is one of them.
    assert!(
        background >= yields / 16 / 2,
        "background task ran {background} times while an ordinary task yielded {yields} times"
    );
}

#[test]
fn background_tasks_finish_and_return_their_output() {
    let rt = Runtime::builder().cores(2).build().unwrap();
    for core in 0..2 {
        let sum = rt
            .run_on(core, || async {
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
            .unwrap();
        assert_eq!(sum, (0..8).sum::<u64>());
    }
}

#[test]
fn dropping_a_background_task_cancels_it_and_shutdown_drops_ready_ones() {
    let rt = Runtime::builder().cores(1).build().unwrap();
    let polls = rt
        .block_on(|| async {
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
            // One more that is still ready when the runtime shuts down.
            spawn_background(async {
                loop {
                    yield_now().await;
                }
            })
            .detach();
            at_drop
        })
        .unwrap();
    assert!(polls > 0);
    drop(rt);
}
