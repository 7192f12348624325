//! How a turn of a core's loop is divided: when it polls a background task
//! ([`crate::spawn_background`]) and the recent task-time account behind its share rule, and
//! when a long turn of ordinary tasks ends early because work outside the run queue waits
//! (messages, completions). Pure, so the policy is tested with chosen nanoseconds instead of
//! timed runs.

/// A core's background queue is passed over for ready ordinary tasks at most this many
/// turns in a row, minus one: on this turn it runs.
pub(crate) const BACKGROUND_TURNS_MAX: u32 = 8;

/// The account is halved once it holds this much counted task time (ordinary plus
/// background), so that it follows the last few milliseconds of it. Time is counted only
/// while background tasks wait.
pub(crate) const BACKGROUND_WINDOW_NS: u64 = 8_000_000;

/// While background tasks wait and are behind their share, a turn's ordinary tasks stop
/// after this much of their time, and its background tasks go on until this much of theirs:
/// turns stay short beside an ordinary task that never waits (its operations all complete
/// at once), and background tasks get their share within a turn instead of one poll per
/// turn.
pub(crate) const TURN_SLICE_NS: u64 = 200_000;

/// A turn's ordinary tasks look every this many polls (while more are ready) whether the
/// turn may be long ([`outside_clock_starts`]) and then whether it should end for work
/// outside the run queue ([`outside_turn_ends`]): the clock and the flags are not read after
/// every poll of a cheap task (a clock read is about 20 ns, a nop's whole cost about 110 ns
/// at depth 32). Polls found long ([`polls_are_long`]) are looked after one by one.
pub(crate) const OUTSIDE_LOOK_EVERY: usize = 8;

/// Mean poll time from which a core's ordinary polls count as long ([`polls_are_long`]):
/// [`OUTSIDE_LOOK_EVERY`] polls shorter than this take less than a [`TURN_SLICE_NS`].
pub(crate) const LONG_POLL_NS: u64 = TURN_SLICE_NS / OUTSIDE_LOOK_EVERY as u64;

/// Whether `polls` ordinary polls that took `spent_ns` together are long: at least
/// [`LONG_POLL_NS`] each on average. Then the loop looks after every poll, and starts each
/// turn's clock at the turn's start, until polls measured again are short (polls are timed
/// only in turns whose clock started: 16 polls, or 256 budget units, or long mode): with a look
/// every [`OUTSIDE_LOOK_EVERY`] polls, a task that computes for 600 µs per poll (32
/// seeks over a dozen tables) held another core's calls for 8 polls (5 ms) past the slice,
/// and 24 polls (15 ms) in a turn that had not yet found itself long. A clock read per
/// poll of 25 µs or more costs under 0.1 %.
pub(crate) fn polls_are_long(spent_ns: u64, polls: usize) -> bool {
    polls > 0 && spent_ns / polls as u64 >= LONG_POLL_NS
}

/// What a sample of `polls` ordinary polls that took `spent_ns` says: `Some(true)` if they
/// are long ([`polls_are_long`]) — at once, from a single poll —, `Some(false)` if they are
/// short and at least [`OUTSIDE_LOOK_EVERY`] (a cheap poll or a few, say a call's task
/// queued before a long task, do not end the looks after every poll), `None`: not yet.
pub(crate) fn poll_sample_verdict(spent_ns: u64, polls: usize) -> Option<bool> {
    if polls_are_long(spent_ns, polls) {
        Some(true)
    } else if polls >= OUTSIDE_LOOK_EVERY {
        Some(false)
    } else {
        None
    }
}

/// Polls after which a turn may be long (see [`outside_clock_starts`]).
pub(crate) const OUTSIDE_CLOCK_POLLS: usize = 16;
/// Budget units (operations completed at once) after which a turn may be long (see
/// [`outside_clock_starts`]): four polls of a task that spends its whole budget.
pub(crate) const OUTSIDE_CLOCK_UNITS: u32 = 256;

/// Whether a turn whose ordinary tasks made `polls` polls using `units` budget units
/// (operations that completed at once, [`crate::consume_budget`]) may be long enough for
/// its slice to matter, so that its clock starts: after [`OUTSIDE_CLOCK_POLLS`] polls, or
/// once the polls used [`OUTSIDE_CLOCK_UNITS`] units (a task whose every call completes at
/// once uses 64 per poll). A turn of 32 cheap polls (32 tasks each reaping a nop and
/// submitting the next) then reads the clock twice (with a look after every 8 polls from
/// the first poll on, four times: nops at depth 32 cost about 3 % more).
pub(crate) fn outside_clock_starts(polls: usize, units: u32) -> bool {
    polls >= OUTSIDE_CLOCK_POLLS || units >= OUTSIDE_CLOCK_UNITS
}

/// Whether a turn's ordinary tasks stop for now, `spent_ns` after the turn was found
/// possibly long ([`outside_clock_starts`]; after its first poll's start while the core's
/// polls are long, [`polls_are_long`]), while work outside the run queue waits for the
/// loop (a message from another core, an op's completion, a poller): past
/// [`TURN_SLICE_NS`]. Otherwise a task that is always ready would hold the loop for the
/// whole task budget (128 polls of up to 64 operations each: tens of ms), and every message
/// from another core, every completion and every background task waiting for one would
/// wait that long.
pub(crate) fn outside_turn_ends(spent_ns: u64) -> bool {
    spent_ns >= TURN_SLICE_NS
}

/// Most background polls in one turn (the next turn's completions and messages may make
/// ordinary tasks ready).
pub(crate) const BACKGROUND_POLLS_PER_TURN_MAX: u32 = 64;

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

/// Whether a turn's ordinary tasks stop for now after `spent_ns` of their time (background
/// tasks waiting): past [`TURN_SLICE_NS`], if background tasks are behind their share of the
/// recent task time with this time counted.
pub(crate) fn ordinary_turn_ends(spent_ns: u64, time: TaskTime, share_percent: u64) -> bool {
    spent_ns >= TURN_SLICE_NS && time.add(spent_ns, false).background_behind(share_percent)
}

/// Whether another ready background task runs in this turn after `ran` background polls took
/// `spent_ns` and the turn's ordinary tasks `ordinary_ns`: while background tasks are behind
/// their share of the recent task time, for at most [`TURN_SLICE_NS`] or the ordinary
/// tasks' time if longer (an ordinary poll may run long between two checks), and at most
/// [`BACKGROUND_POLLS_PER_TURN_MAX`] polls.
pub(crate) fn background_continues(
    ran: u32,
    spent_ns: u64,
    ordinary_ns: u64,
    time: TaskTime,
    share_percent: u64,
) -> bool {
    ran < BACKGROUND_POLLS_PER_TURN_MAX
        && spent_ns < TURN_SLICE_NS.max(ordinary_ns)
        && time.background_behind(share_percent)
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
    fn a_turn_is_long_after_16_polls_or_256_units_and_ends_a_slice_later() {
        assert!(!outside_clock_starts(8, 0), "8 cheap polls");
        assert!(!outside_clock_starts(15, OUTSIDE_CLOCK_UNITS - 1));
        assert!(
            outside_clock_starts(8, 4 * 64),
            "4 polls that used their whole budget"
        );
        assert!(outside_clock_starts(OUTSIDE_CLOCK_POLLS, 0));
        assert!(!outside_turn_ends(TURN_SLICE_NS - 1));
        assert!(outside_turn_ends(TURN_SLICE_NS));
    }

    #[test]
    fn polls_are_long_when_eight_of_them_take_a_slice() {
        assert_eq!(LONG_POLL_NS, 25_000);
        assert!(
            !polls_are_long(8 * LONG_POLL_NS - 1, 8),
            "8 polls within a slice"
        );
        assert!(polls_are_long(8 * LONG_POLL_NS, 8));
        assert!(polls_are_long(600_000, 1), "one seek-heavy poll");
        assert!(
            !polls_are_long(600_000, 40),
            "a long poll among many short ones"
        );
        assert!(!polls_are_long(u64::MAX, 0), "no polls measured");
        assert_eq!(poll_sample_verdict(600_000, 1), Some(true));
        assert_eq!(
            poll_sample_verdict(1_000, 1),
            None,
            "one cheap poll decides nothing"
        );
        assert_eq!(poll_sample_verdict(7 * 1_000, 7), None);
        assert_eq!(poll_sample_verdict(8 * 1_000, 8), Some(false));
        assert_eq!(
            poll_sample_verdict(1_000 + 600_000, 2),
            Some(true),
            "a cheap poll, then a long one"
        );
    }

    #[test]
    fn ordinary_tasks_stop_after_a_slice_only_while_background_is_behind() {
        let behind = time(3_000_000, 1_000_000);
        let ahead = time(1_000_000, 3_000_000);
        assert!(
            !ordinary_turn_ends(TURN_SLICE_NS - 1, behind, 50),
            "within the slice"
        );
        assert!(ordinary_turn_ends(TURN_SLICE_NS, behind, 50));
        assert!(
            !ordinary_turn_ends(10 * TURN_SLICE_NS, time(0, 0), 0),
            "share 0"
        );
        // Ahead of its share, unless this turn's ordinary time puts it behind.
        assert!(!ordinary_turn_ends(TURN_SLICE_NS, ahead, 50));
        assert!(ordinary_turn_ends(3 * TURN_SLICE_NS, time(0, 300_000), 50));
    }

    #[test]
    fn background_goes_on_within_a_slice_while_behind() {
        let behind = time(3_000_000, 1_000_000);
        assert!(background_continues(1, 0, 0, behind, 50));
        let slice = TURN_SLICE_NS;
        assert!(!background_continues(1, slice, 0, behind, 50), "slice used");
        // A long ordinary poll this turn: as long again for background tasks.
        let long = 5 * slice;
        assert!(background_continues(1, slice, long, behind, 50));
        assert!(!background_continues(1, long, long, behind, 50));
        let max = BACKGROUND_POLLS_PER_TURN_MAX;
        assert!(!background_continues(max, 0, 0, behind, 50), "poll cap");
        let even = time(1_000, 1_000);
        assert!(!background_continues(1, 0, 0, even, 50), "at its share");
        assert!(!background_continues(1, 0, 0, behind, 0), "share 0");
    }

    #[test]
    fn huge_values_saturate_instead_of_overflowing() {
        let t = time(u64::MAX, u64::MAX).add(u64::MAX, true);
        let _ = t.background_behind(90);
        assert!(!background_runs(busy(1), time(u64::MAX, u64::MAX), 50));
    }
}
