//! Wakes from threads that are not cores reach a core that keeps going to sleep, and none is
//! lost: in every round trip below the core runs out of work and goes idle until a plain OS
//! thread wakes the waiting task through the core's mailbox, mail flag and (if the core
//! blocks in `io_uring_enter`) eventfd. A lost wake-up shows as a hang, which the watchdog
//! turns into a failure. Run without an idle spin (the core blocks at once) and with a 50 µs
//! one (a wake-up may then come while the core spins or as it gives up).

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use futures::channel::oneshot;
use ziob_runtime::{spawn, Runtime};

/// Round trips per waiting task.
const ROUNDS: usize = 5_000;
/// Tasks waiting at once on the core, each answered by its own OS thread.
const TASKS: usize = 4;

/// Runs `f` on a thread and fails if it takes longer than `limit` (instead of hanging).
fn with_watchdog(limit: Duration, f: impl FnOnce() + Send + 'static) {
    let (done_tx, done_rx) = mpsc::channel();
    let worker = thread::spawn(move || {
        f();
        let _ = done_tx.send(());
    });
    match done_rx.recv_timeout(limit) {
        Ok(()) => worker.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The closure panicked: report its panic.
            worker.join().unwrap();
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("no progress within {limit:?}: a wake-up from another thread was lost")
        }
    }
}

#[test]
fn wakes_from_plain_threads_reach_a_sleeping_core() {
    round_trips(Runtime::builder().idle_spin(Duration::ZERO));
}

#[test]
fn wakes_from_plain_threads_reach_a_spinning_core() {
    round_trips(Runtime::builder().idle_spin(Duration::from_micros(50)));
}

fn round_trips(builder: ziob_runtime::Builder) {
    with_watchdog(Duration::from_secs(60), move || {
        let rt = builder.cores(2).build().unwrap();
        let per_task = rt
            .run_on(1, || async {
                let mut tasks = Vec::new();
                for t in 0..TASKS {
                    // One answering thread per task: it gets a oneshot sender and fires it.
                    let (to_thread, from_core) = mpsc::channel::<oneshot::Sender<usize>>();
                    let answerer = thread::spawn(move || {
                        let mut n = 0;
                        while let Ok(reply) = from_core.recv() {
                            n += 1;
                            if n % 64 == 0 {
                                // Now and then answer late, after the core has surely slept.
                                thread::sleep(Duration::from_micros(200));
                            }
                            let _ = reply.send(n);
                        }
                    });
                    tasks.push(spawn(async move {
                        let mut last = 0;
                        for _ in 0..ROUNDS {
                            let (tx, rx) = oneshot::channel();
                            to_thread.send(tx).unwrap();
                            let n = rx.await.expect("the answering thread dropped a reply");
                            assert_eq!(n, last + 1, "task {t}: replies out of order");
                            last = n;
                        }
                        drop(to_thread);
                        answerer.join().unwrap();
                        last
                    }));
                }
                let mut out = Vec::new();
                for t in tasks {
                    out.push(t.await);
                }
                out
            })
            .unwrap();
        assert_eq!(per_task, vec![ROUNDS; TASKS]);
    });
}
