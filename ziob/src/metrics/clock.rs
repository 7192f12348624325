//! The cheap clock operations are timed with: the CPU's time-stamp counter where it is
//! invariant (x86-64 with invariant TSC, aarch64), through `quanta`; the monotonic clock
//! elsewhere. A reading is one `rdtsc` (~2.5 times cheaper than `clock_gettime` on the
//! project's VM); only a difference is scaled to nanoseconds.
//!
//! `quanta` calibrates the counter against the monotonic clock once per process, until its
//! error is below 10 ns or for at most 200 ms; on a busy VM it ran to the cap, on the core
//! thread of the first instance to open (docs/METRICS.md, "Cost"). So [`init`] (called
//! when an instance opens) starts the calibration on a thread of its own and returns at
//! once; until it is done, stamps are taken with the monotonic clock. A stamp remembers
//! which clock took it, so a difference is always taken on one clock.

use std::sync::{Once, OnceLock};
use std::time::Instant;

use quanta::Clock;

/// A clock calibrated in the background: the monotonic clock until the calibration is done.
struct LazyClock {
    calibrated: OnceLock<Clock>,
    started: Once,
}

impl LazyClock {
    const fn new() -> LazyClock {
        LazyClock {
            calibrated: OnceLock::new(),
            started: Once::new(),
        }
    }

    /// Starts `calibrate` on a thread of its own, once. If no thread can be started, the
    /// clock stays the monotonic one (calibrating here would make every caller wait).
    ///
    /// The thread inherits the starter's CPU affinity: started from a core pinned to a CPU
    /// (`pin_cores`, off by default) its busy calibration shares that CPU with the core for
    /// up to 200 ms, instead of blocking the core for as long as it used to.
    fn start(&'static self, calibrate: fn() -> Clock) {
        self.started.call_once(|| {
            let spawned = std::thread::Builder::new()
                .name("ziob-clock-calibration".into())
                .spawn(move || {
                    self.calibrated.get_or_init(calibrate);
                });
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "no thread to calibrate the metrics clock: \
                    operations are timed with the monotonic clock");
            }
        });
    }

    #[inline]
    fn now(&'static self) -> Stamp {
        match self.calibrated.get() {
            Some(c) => Stamp::Counter(c.raw()),
            None => {
                self.start(Clock::new);
                Stamp::Monotonic(Instant::now())
            }
        }
    }

    #[inline]
    fn elapsed_ns(&self, stamp: Stamp) -> u64 {
        match stamp {
            Stamp::Counter(raw) => {
                // A counter stamp exists only once the clock is calibrated, and it stays so.
                let c = self
                    .calibrated
                    .get()
                    .expect("a counter stamp is taken only with the clock calibrated");
                c.delta_as_nanos(raw, c.raw())
            }
            Stamp::Monotonic(at) => u64::try_from(at.elapsed().as_nanos()).unwrap_or(u64::MAX),
        }
    }
}

static CLOCK: LazyClock = LazyClock::new();

/// Starts calibrating the clock in the background (once per process; later calls do
/// nothing), so that the first timed operations do not pay for it and no caller waits.
pub(crate) fn init() {
    CLOCK.start(Clock::new);
}

/// A reading of the clock: of the calibrated counter, or of the monotonic clock before the
/// calibration was done.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stamp {
    /// The counter's raw value.
    Counter(u64),
    /// Taken before the counter was calibrated.
    Monotonic(Instant),
}

impl Stamp {
    /// Now.
    #[inline]
    pub(crate) fn now() -> Stamp {
        CLOCK.now()
    }

    /// Nanoseconds from this stamp to now, on the clock that took it (0 if the counter seems
    /// to have gone back).
    #[inline]
    pub(crate) fn elapsed_ns(self) -> u64 {
        CLOCK.elapsed_ns(self)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;

    /// Within 10 % of the wall clock over a 20 ms sleep (scheduling noise aside, the sleep
    /// dominates).
    fn follows_the_wall_clock(s: Stamp, clock: &LazyClock) {
        let t = Instant::now();
        std::thread::sleep(Duration::from_millis(20));
        let ns = clock.elapsed_ns(s);
        let wall = t.elapsed().as_nanos() as u64;
        assert!(ns >= 19_000_000, "{ns} ns ({s:?})");
        assert!(
            ns.abs_diff(wall) < wall / 10,
            "{ns} ns against {wall} ns ({s:?})"
        );
    }

    #[test]
    fn elapsed_follows_the_wall_clock() {
        follows_the_wall_clock(Stamp::now(), &CLOCK);
    }

    /// The calibration a test holds up: it waits for a message before it calibrates.
    static GATE: Mutex<Option<mpsc::Receiver<()>>> = Mutex::new(None);

    fn gated_calibration() -> Clock {
        let rx = GATE.lock().unwrap().take().expect("the test set the gate");
        // A calibration run on the caller's thread would wait here until the timeout, and
        // the test then finds the clock calibrated when `start` returns.
        let _ = rx.recv_timeout(Duration::from_secs(5));
        Clock::new()
    }

    /// `start` returns while the calibration is still running (it used to run on the
    /// caller's thread, up to 200 ms on a busy VM), stamps meanwhile come from the monotonic
    /// clock, and once it is done from the counter; both kinds measure time.
    #[test]
    fn calibration_runs_in_the_background_and_stamps_never_wait_for_it() {
        static LAZY: LazyClock = LazyClock::new();
        let (tx, rx) = mpsc::channel();
        *GATE.lock().unwrap() = Some(rx);
        LAZY.start(gated_calibration);
        assert!(
            LAZY.calibrated.get().is_none(),
            "start waited for the calibration"
        );
        let before = LAZY.now();
        assert!(matches!(before, Stamp::Monotonic(_)), "{before:?}");
        follows_the_wall_clock(before, &LAZY);
        tx.send(()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while LAZY.calibrated.get().is_none() {
            assert!(Instant::now() < deadline, "the calibration never finished");
            std::thread::sleep(Duration::from_millis(1));
        }
        let after = LAZY.now();
        assert!(matches!(after, Stamp::Counter(_)), "{after:?}");
        follows_the_wall_clock(after, &LAZY);
        // A stamp taken before the calibration is still measured on its own clock.
        assert!(LAZY.elapsed_ns(before) >= 40_000_000);
    }
}
