//! When an idle core may spin (see `Core::spin_idle`): not while its CPU is contended.
//!
//! A spinning core gives its CPU to any other runnable thread (`sched_yield`), so that the
//! core it waits for, or a thread of the application, runs first. When that thread is not
//! one that will answer soon (a build, a compaction, another process), the yield costs the
//! core a whole scheduler slice (ms) during which a message that arrives is not seen: a
//! runnable thread gets no wake-up preemption, a sleeping one does. The spin therefore
//! watches for time off its CPU (a long gap between two looks at the clock), and after such
//! a *contended* spin the core does not spin for a while: 1 ms, doubling up to 100 ms while
//! spins stay contended, back to 1 ms after a spin that was not.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// A gap this long between two looks at the clock during a spin (normally a few µs apart)
/// means another thread ran on the core's CPU.
pub(crate) const CONTENDED_GAP: Duration = Duration::from_micros(50);
/// The first pause of spinning after a contended spin.
pub(crate) const PAUSE_MIN: Duration = Duration::from_millis(1);
/// The longest pause of spinning.
pub(crate) const PAUSE_MAX: Duration = Duration::from_millis(100);

/// Whether a core may spin now, and for how long it stops after a contended spin.
#[derive(Debug)]
pub(crate) struct SpinGate {
    /// No spin before this instant.
    paused_until: Cell<Option<Instant>>,
    /// The pause the next contended spin starts.
    next_pause: Cell<Duration>,
}

impl Default for SpinGate {
    fn default() -> Self {
        SpinGate {
            paused_until: Cell::new(None),
            next_pause: Cell::new(PAUSE_MIN),
        }
    }
}

impl SpinGate {
    /// Whether the core may spin (reads the clock only while a pause runs).
    #[inline]
    pub(crate) fn allows(&self) -> bool {
        match self.paused_until.get() {
            None => true,
            Some(until) if Instant::now() >= until => {
                self.paused_until.set(None);
                true
            }
            Some(_) => false,
        }
    }

    /// A spin saw the core off its CPU at `now`: pause spinning, longer than last time.
    pub(crate) fn contended(&self, now: Instant) {
        let pause = self.next_pause.get();
        self.paused_until.set(Some(now + pause));
        self.next_pause.set((pause * 2).min(PAUSE_MAX));
    }

    /// A spin ended without contention: the next contended one pauses for [`PAUSE_MIN`].
    #[inline]
    pub(crate) fn clean(&self) {
        self.next_pause.set(PAUSE_MIN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_while_contended_and_reset_after_a_clean_spin() {
        let g = SpinGate::default();
        assert!(g.allows());
        let now = Instant::now();
        g.contended(now);
        assert!(!g.allows(), "a contended spin pauses spinning");
        assert_eq!(g.paused_until.get(), Some(now + PAUSE_MIN));
        let mut pause = PAUSE_MIN;
        for _ in 0..10 {
            g.contended(now);
            pause = (pause * 2).min(PAUSE_MAX);
            assert_eq!(g.paused_until.get(), Some(now + pause));
        }
        assert_eq!(pause, PAUSE_MAX);
        g.clean();
        g.contended(now);
        assert_eq!(g.paused_until.get(), Some(now + PAUSE_MIN));
        // A pause that has passed allows spinning again (and is forgotten).
        let past = Instant::now().checked_sub(PAUSE_MAX * 2).unwrap();
        g.contended(past);
        assert!(g.allows());
        assert_eq!(g.paused_until.get(), None);
    }
}
