//! When a core polls a background task ([`crate::spawn_background`]): the decision of each
//! turn of the loop and the recent task-time account behind its share rule. Pure, so the
//! policy is tested with chosen nanoseconds instead of timed runs.

/// A core's background queue is passed over for ready ordinary tasks at most this many
/// turns in a row, minus one: on this turn it runs.
pub(crate) const BACKGROUND_TURNS_MAX: u32 = 8;

/// The account is halved once it holds this much counted task time (ordinary plus
/// background), so that it follows the last few milliseconds of it. Time is counted only
/// while background tasks wait.
pub(crate) const BACKGROUND_WINDOW_NS: u64 = 8_000_000;

/// What a turn of the loop knows when it decides.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Turn {
    /// The turn's ordinary tasks used the whole task budget.
    pub saturated: bool,
    /// Turns in a row, this one included, that passed the background queue over so far.
    pub waited: u32,
    /// No ordinary task is ready after the turn's submit and reap.
    pub run_queue_empty: bool,
}

/// Recent nanoseconds spent polling ordinary and background tasks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TaskTime {
    /// Polling ordinary tasks.
    pub ordinary_ns: u64,
    /// Polling background tasks.
    pub background_ns: u64,
}

impl TaskTime {
    /// Whether background tasks had less than `share_percent` of the counted time.
    pub fn background_behind(&self, share_percent: u64) -> bool {
        let total = self.ordinary_ns.saturating_add(self.background_ns);
        u128::from(self.background_ns) * 100 < u128::from(total) * u128::from(share_percent)
    }

    /// The account with `ns` more on one side, both sides halved once the sum passes
    /// [`BACKGROUND_WINDOW_NS`].
    pub fn add(mut self, ns: u64, background: bool) -> TaskTime {
        if background {
            self.background_ns = self.background_ns.saturating_add(ns);
        } else {
            self.ordinary_ns = self.ordinary_ns.saturating_add(ns);
        }
        if self.ordinary_ns.saturating_add(self.background_ns) > BACKGROUND_WINDOW_NS {
            self.ordinary_ns /= 2;
            self.background_ns /= 2;
        }
        self
    }
}

/// Whether a ready background task runs at the end of `turn`: if no ordinary task is
/// ready, if the turn's ordinary tasks used the whole budget, if background tasks had less
/// than `share_percent` of the recent task time, or on the [`BACKGROUND_TURNS_MAX`]th turn
/// in a row that passed them over.
pub(crate) fn background_runs(turn: Turn, time: TaskTime, share_percent: u64) -> bool {
    turn.run_queue_empty
        || turn.saturated
        || turn.waited >= BACKGROUND_TURNS_MAX
        || time.background_behind(share_percent)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(waited: u32) -> Turn {
        Turn {
            saturated: false,
            waited,
            run_queue_empty: false,
        }
    }

    fn time(ordinary_ns: u64, background_ns: u64) -> TaskTime {
        TaskTime {
            ordinary_ns,
            background_ns,
        }
    }

    #[test]
    fn an_idle_or_saturated_turn_or_the_eighth_runs_one_whatever_the_account() {
        let hogged = time(0, 5_000_000);
        for share in [0, 50, 90] {
            let idle = Turn {
                run_queue_empty: true,
                ..busy(1)
            };
            let saturated = Turn {
                saturated: true,
                ..busy(1)
            };
            assert!(background_runs(idle, hogged, share));
            assert!(background_runs(saturated, hogged, share));
            assert!(background_runs(busy(BACKGROUND_TURNS_MAX), hogged, share));
            assert!(!background_runs(
                busy(BACKGROUND_TURNS_MAX - 1),
                hogged,
                share
            ));
        }
    }

    #[test]
    fn below_its_share_it_runs_on_a_busy_turn_and_at_or_above_it_waits() {
        // 50 %: 1 µs of background against 3 µs of ordinary work is behind; 2 against 2 is not.
        assert!(background_runs(busy(1), time(3_000, 1_000), 50));
        assert!(!background_runs(busy(1), time(2_000, 2_000), 50));
        assert!(!background_runs(busy(1), time(1_000, 3_000), 50));
        // Share 0: never behind (only the turn rules); an empty account is not behind either.
        assert!(!background_runs(busy(1), time(9_000, 0), 0));
        assert!(!background_runs(busy(1), time(0, 0), 50));
        // 90 %: behind until background has nine tenths.
        assert!(background_runs(busy(1), time(1_000, 8_000), 90));
        assert!(!background_runs(busy(1), time(1_000, 9_000), 90));
    }

    #[test]
    fn the_account_halves_past_its_window_and_keeps_the_ratio() {
        let mut t = TaskTime::default();
        for _ in 0..1000 {
            t = t.add(30_000, false).add(10_000, true);
            assert!(t.ordinary_ns + t.background_ns <= BACKGROUND_WINDOW_NS + 30_000);
        }
        // Three to one, whatever was halved.
        let ratio = t.ordinary_ns as f64 / t.background_ns as f64;
        assert!((2.5..3.5).contains(&ratio), "ratio {ratio}");
        assert!(t.background_behind(50));
        // One long background poll puts it ahead; ordinary time brings it back behind.
        t = t.add(BACKGROUND_WINDOW_NS, true);
        assert!(!t.background_behind(50));
        for _ in 0..2000 {
            t = t.add(10_000, false);
        }
        assert!(t.background_behind(50));
    }

    #[test]
    fn huge_values_saturate_instead_of_overflowing() {
        let t = time(u64::MAX, u64::MAX).add(u64::MAX, true);
        let _ = t.background_behind(90);
        assert!(!background_runs(busy(1), time(u64::MAX, u64::MAX), 50));
    }
}
