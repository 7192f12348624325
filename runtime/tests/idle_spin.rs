//! `Builder::idle_spin`: an idle core polls its mailbox and completion queue for a while
//! before it blocks in the kernel.
//!
//! Observed through the core's counters (`CoreStats::sleeps`, `spin_wakes`) and the CPU time
//! of its thread, never through wall-clock speed: messages and completions that arrive in the
//! window are picked up without a sleep, ones that arrive after it find the core asleep and
//! still wake it (a lost wake-up is a hang, turned into a failure by a watchdog), a spin of
//! zero sleeps every time as before, an idle core stops spinning and blocks, and a core whose
//! CPU another thread wants stops spinning for a while.
//!
//! A spin that sees another thread run on its CPU (as other tests, builds or benchmarks on a
//! busy machine do) gives up and pauses spinning, which legitimately turns would-be spin
//! wake-ups into sleeps: the tests that expect spins to catch their messages repeat their
//! measurement until one run saw no contention (on a machine too busy for that they check
//! only that everything was answered).
//!
//! The tests take one lock: spinning cores of one test would steal the CPUs (this machine
//! may have two) another test's cores need to see their messages in time.

mod common;

use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use proptest::prelude::RngExt;
use ziob_runtime::{call_on, core_stats, sleep, CoreStats, Runtime, IDLE_SPIN_MAX};

/// Round trips or timers per measurement.
const ROUNDS: u64 = 200;
/// What the counts are compared with. Measured: with a 10 ms spin 0 of 200 round trips or
/// timers slept; without a spin 104 to 201 of 200 round trips (the next message sometimes
/// comes before the core sets `sleeping`) and 200 of 200 timers.
const QUARTER: u64 = ROUNDS / 4;

static SERIAL: Mutex<()> = Mutex::new(());

/// [`common::with_watchdog`], one test at a time (the tests measure spins and sleeps).
fn with_watchdog<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    common::with_watchdog(limit, f)
}

/// Core `core`'s counters.
fn stats_of(rt: &Runtime, core: usize) -> CoreStats {
    rt.run_on(core, || async { core_stats() }).unwrap()
}

/// Attempts at a measurement without contention.
const ATTEMPTS: usize = 20;

/// What a measurement saw on the core it watched.
#[derive(Debug, Clone, Copy)]
struct Seen {
    sleeps: u64,
    spin_wakes: u64,
    contended: u64,
}

impl Seen {
    fn between(before: CoreStats, after: CoreStats) -> Seen {
        Seen {
            sleeps: after.sleeps - before.sleeps,
            spin_wakes: after.spin_wakes - before.spin_wakes,
            contended: after.spins_contended - before.spins_contended,
        }
    }
}

/// Runs `measure` until a run saw no contention, and checks that run with `check`.
fn first_uncontended(mut measure: impl FnMut() -> Option<Seen>, check: impl Fn(Seen)) {
    for _ in 0..ATTEMPTS {
        let Some(seen) = measure() else { return };
        if seen.contended == 0 {
            check(seen);
            return;
        }
    }
    eprintln!("every run saw another thread on a spinning core's CPU: spins not checked");
}

/// `ROUNDS` round trips from a task on core 0 to core 1, one at a time, `gap` apart; core 1's
/// sleeps and spin wake-ups during them.
fn core_to_core_round_trips(spin: Duration, gap: Duration) -> Seen {
    with_watchdog(Duration::from_secs(60), move || {
        let rt = Runtime::builder().cores(2).idle_spin(spin).build().unwrap();
        let before = stats_of(&rt, 1);
        rt.run_on(0, move || async move {
            for i in 0..ROUNDS {
                let back = call_on(1, move || async move { i + 1 }).await.unwrap();
                assert_eq!(back, i + 1);
                if !gap.is_zero() {
                    sleep(gap).await.unwrap();
                }
            }
        })
        .unwrap();
        let mut seen = Seen::between(before, stats_of(&rt, 1));
        // Either core pausing its spin (it then answers late) is contention too: core 1's
        // count is its total, since a pause that began before `before` still runs.
        seen.contended = stats_of(&rt, 1).spins_contended + stats_of(&rt, 0).spins_contended;
        seen
    })
}

#[test]
fn messages_in_the_spin_window_need_no_sleep() {
    first_uncontended(
        || Some(core_to_core_round_trips(IDLE_SPIN_MAX, Duration::ZERO)),
        |Seen {
             sleeps, spin_wakes, ..
         }| {
            assert!(
                sleeps < QUARTER && spin_wakes >= ROUNDS - QUARTER,
                "with a {IDLE_SPIN_MAX:?} spin core 1 slept {sleeps} times and caught \
                 {spin_wakes} messages spinning in {ROUNDS} round trips"
            )
        },
    );
}

#[test]
fn without_a_spin_the_core_sleeps_between_messages() {
    // 200 µs between calls: core 1 has nothing to do then, so it must sleep each time (a
    // busy machine may still let a call arrive before it got to its sleep).
    let Seen {
        sleeps, spin_wakes, ..
    } = core_to_core_round_trips(Duration::ZERO, Duration::from_micros(200));
    assert_eq!(spin_wakes, 0, "a zero spin never spins");
    assert!(
        sleeps >= ROUNDS / 2,
        "without a spin core 1 slept only {sleeps} times in {ROUNDS} round trips"
    );
}

/// `ROUNDS` timers of 100 µs awaited one after the other on a one-core runtime; the core's
/// sleeps and spin wake-ups meanwhile.
fn timers(spin: Duration, defer_taskrun: bool) -> Option<Seen> {
    with_watchdog(Duration::from_secs(60), move || {
        let rt = Runtime::builder()
            .cores(1)
            .idle_spin(spin)
            .defer_taskrun(defer_taskrun)
            .build()
            .unwrap();
        if rt.ring_info(0).unwrap().granted.defer_taskrun != defer_taskrun {
            return None; // the kernel lacks DEFER_TASKRUN
        }
        rt.block_on(|| async {
            let before = core_stats();
            for _ in 0..ROUNDS {
                sleep(Duration::from_micros(100)).await.unwrap();
            }
            Some(Seen::between(before, core_stats()))
        })
        .unwrap()
    })
}

#[test]
fn completions_in_the_spin_window_need_no_sleep() {
    // With DEFER_TASKRUN the timers' completions are posted only by an `io_uring_enter` with
    // GETEVENTS: the spin must notice the kernel's IORING_SQ_TASKRUN flag and enter.
    for defer in [false, true] {
        first_uncontended(
            || timers(IDLE_SPIN_MAX, defer),
            |Seen {
                 sleeps, spin_wakes, ..
             }| {
                assert!(
                    sleeps < QUARTER && spin_wakes >= ROUNDS - QUARTER,
                    "defer_taskrun {defer}: with a {IDLE_SPIN_MAX:?} spin the core slept \
                     {sleeps} times and caught {spin_wakes} completions spinning in {ROUNDS} \
                     timers of 100 µs"
                )
            },
        );
        let Some(Seen {
            sleeps, spin_wakes, ..
        }) = timers(Duration::ZERO, defer)
        else {
            continue; // no DEFER_TASKRUN here
        };
        assert_eq!(spin_wakes, 0);
        assert!(
            sleeps >= QUARTER,
            "defer_taskrun {defer}: without a spin the core slept only {sleeps} times in \
             {ROUNDS} timers"
        );
    }
}

/// CPU time (ns) thread `tid` of this process has used, from its schedstat.
fn thread_cpu_ns(tid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).unwrap();
    stat.split_whitespace().next().unwrap().parse().unwrap()
}

/// The scheduler state letter of thread `tid` (`R` running, `S` sleeping, ...).
fn thread_state(tid: i32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
    // The state follows the command name, which is in parentheses.
    let after = &stat[stat.rfind(')').unwrap() + 1..];
    after.trim_start().chars().next().unwrap()
}

#[test]
fn an_idle_core_stops_spinning_and_blocks() {
    with_watchdog(Duration::from_secs(60), || {
        let rt = Runtime::builder()
            .cores(1)
            .idle_spin(IDLE_SPIN_MAX)
            .build()
            .unwrap();
        // SAFETY: gettid has no arguments.
        let tid = rt.block_on(|| async { unsafe { libc::gettid() } }).unwrap();
        let before = stats_of(&rt, 0);
        // Well past the window that began when the core answered.
        thread::sleep(IDLE_SPIN_MAX * 5);
        let cpu0 = thread_cpu_ns(tid);
        thread::sleep(Duration::from_millis(300));
        let used = Duration::from_nanos(thread_cpu_ns(tid) - cpu0);
        let state = thread_state(tid);
        assert!(
            used < Duration::from_millis(30),
            "an idle core with a {IDLE_SPIN_MAX:?} spin used {used:?} of CPU in 300 ms"
        );
        assert_eq!(state, 'S', "an idle core blocks in the kernel");
        // It slept (once, after the spin that followed the answer) and wakes for this call.
        let after = stats_of(&rt, 0);
        assert!(
            after.sleeps > before.sleeps,
            "the core never slept: {before:?} -> {after:?}"
        );
    });
}

#[test]
fn messages_around_the_end_of_the_window_are_never_lost() {
    // Plain threads and a core send to core 0 after gaps drawn around the length of its
    // spin window, so messages land while it spins, as the window ends, while it is about to
    // block and while it sleeps. Every call must be answered.
    const SPIN: Duration = Duration::from_micros(200);
    const SENDERS: u64 = 3;
    const CALLS: u64 = 300;
    with_watchdog(Duration::from_secs(120), || {
        let rt = Runtime::builder().cores(2).idle_spin(SPIN).build().unwrap();
        let handle = rt.handle();
        let before = stats_of(&rt, 0);
        let mut threads = Vec::new();
        for seed in 1..=SENDERS {
            let handle = handle.clone();
            threads.push(thread::spawn(move || {
                let mut rng = common::seeded_rng(0x9e37_79b9_7f4a_7c15 ^ seed);
                for i in 0..CALLS {
                    let gap = rng.random_range(0..3 * SPIN.as_micros() as u64);
                    thread::sleep(Duration::from_micros(gap));
                    let got = futures::executor::block_on(
                        handle.call(0, move || async move { seed * 1_000_000 + i }),
                    )
                    .unwrap();
                    assert_eq!(got, seed * 1_000_000 + i, "seed {seed}");
                }
            }));
        }
        // A core sender too: its messages come with `mail` raised from a core thread.
        let from_core = rt.run_on(1, || async {
            let mut rng = common::seeded_rng(0xdead_beef);
            let mut sum = 0;
            for i in 0..CALLS {
                let gap = rng.random_range(0..3 * SPIN.as_micros() as u64);
                sleep(Duration::from_micros(gap)).await.unwrap();
                sum += call_on(0, move || async move { i }).await.unwrap();
            }
            sum
        });
        assert_eq!(from_core.unwrap(), CALLS * (CALLS - 1) / 2);
        for t in threads {
            t.join().unwrap();
        }
        let seen = Seen::between(before, stats_of(&rt, 0));
        // Both paths were taken: some messages found the core spinning (unless every spin
        // found its CPU wanted by another thread), some asleep.
        assert!(
            seen.sleeps > 0 && (seen.spin_wakes > 0 || seen.contended > 0),
            "{seen:?}"
        );
    });
}

#[test]
fn busy_poll_never_sleeps_whatever_the_spin() {
    with_watchdog(Duration::from_secs(60), || {
        let rt = Runtime::builder()
            .cores(1)
            .busy_poll(true)
            .idle_spin(Duration::from_micros(10))
            .build()
            .unwrap();
        let before = stats_of(&rt, 0);
        thread::sleep(Duration::from_millis(20));
        let after = stats_of(&rt, 0);
        assert_eq!(after.sleeps, before.sleeps);
    });
}

/// Pins the calling thread to `cpu`.
fn pin_to(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it (cpu < CPU_SETSIZE: it came
    // from sched_getcpu); sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0
        );
    }
}

#[test]
fn a_core_whose_cpu_is_contended_stops_spinning() {
    // A thread pinned to the core's CPU burns it: a spin that yields finds that thread ran
    // meanwhile, and the core stops spinning for a while (it sleeps, and is woken with the
    // scheduler's priority for sleepers) instead of spinning at every idle moment. Its calls
    // are still answered.
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    with_watchdog(Duration::from_secs(60), || {
        let rt = Runtime::builder()
            .cores(1)
            .pin_cores(true)
            .idle_spin(IDLE_SPIN_MAX)
            .build()
            .unwrap();
        // SAFETY: sched_getcpu has no arguments.
        let cpu = rt
            .block_on(|| async { unsafe { libc::sched_getcpu() } })
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let hog = {
            let stop = stop.clone();
            thread::spawn(move || {
                pin_to(cpu as usize);
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        thread::sleep(Duration::from_millis(20));
        let handle = rt.handle();
        let before = stats_of(&rt, 0);
        for i in 0..ROUNDS {
            thread::sleep(Duration::from_micros(200));
            let got = futures::executor::block_on(handle.call(0, move || async move { i }));
            assert_eq!(got.unwrap(), i);
        }
        let after = stats_of(&rt, 0);
        stop.store(true, Ordering::Relaxed);
        hog.join().unwrap();
        let (spins, contended) = (
            after.spins - before.spins,
            after.spins_contended - before.spins_contended,
        );
        assert!(
            contended > 0 && spins < QUARTER,
            "with a thread burning its CPU the core spun {spins} times in {ROUNDS} idle \
             moments ({contended} seen contended)"
        );
    });
}
