//! The cheap clock operations are timed with: the CPU's time-stamp counter where it is
//! invariant (x86-64 with invariant TSC, aarch64), through `quanta`; the monotonic clock
//! elsewhere. A reading is one `rdtsc` (~2.5 times cheaper than `clock_gettime` on the
//! project's VM); only a difference is scaled to nanoseconds. Calibrated once per process
//! ([`init`], when an instance opens).

use std::sync::OnceLock;

use quanta::Clock;

static CLOCK: OnceLock<Clock> = OnceLock::new();

/// Calibrates the clock now (a few milliseconds, once per process) rather than on the first
/// timed operation.
pub(crate) fn init() {
    clock();
}

#[inline]
fn clock() -> &'static Clock {
    CLOCK.get_or_init(Clock::new)
}

/// A reading of the clock, in its own units.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stamp(u64);

impl Stamp {
    /// Now.
    #[inline]
    pub(crate) fn now() -> Stamp {
        Stamp(clock().raw())
    }

    /// Nanoseconds from this stamp to now (0 if the clock seems to have gone back).
    #[inline]
    pub(crate) fn elapsed_ns(self) -> u64 {
        let c = clock();
        c.delta_as_nanos(self.0, c.raw())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_follows_the_wall_clock() {
        let s = Stamp::now();
        let t = std::time::Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let ns = s.elapsed_ns();
        let wall = t.elapsed().as_nanos() as u64;
        assert!(ns >= 19_000_000, "{ns} ns");
        // Within 10 % of the wall clock (scheduling noise aside, the sleep dominates).
        assert!(ns.abs_diff(wall) < wall / 10, "{ns} ns against {wall} ns");
    }
}
