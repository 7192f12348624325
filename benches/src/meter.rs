//! [`Meter`]: counts completed ops, opens the measured window after the warm-up and closes it
//! after the duration, taking time, CPU time and ring-entry counts at both edges.
//!
//! Every in-process runner ticks the same meter once per completed op, so warm-up, window and
//! CPU accounting are identical for all of them. The clock is read every
//! [`TICKS_PER_CLOCK_READ`] ticks, not every op.

use std::cell::Cell;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cpu::{self, CpuTime};

/// Ops between two reads of the clock.
pub const TICKS_PER_CLOCK_READ: u64 = 16;

#[derive(Debug, Clone, Copy)]
struct Edge {
    at: Instant,
    ops: u64,
    process: CpuTime,
    thread: CpuTime,
    enters: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Warmup,
    Measuring,
    Done,
}

/// Result of one measurement.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Sample {
    /// Ops completed inside the measured window.
    pub ops: u64,
    /// Length of the window in seconds.
    pub secs: f64,
    /// Ops per second.
    pub iops: f64,
    /// Process CPU time (user + system, all threads) per op, in nanoseconds.
    pub cpu_ns_per_op: f64,
    /// CPU time of the thread that ran the ops, per op, in nanoseconds.
    pub thread_cpu_ns_per_op: f64,
    /// Share of the process CPU time spent in the kernel (0..=1).
    pub sys_share: f64,
    /// `io_uring_enter` calls per op, when the runner counts them.
    pub enters_per_op: Option<f64>,
}

/// Counts ops and delimits the measured window; single-threaded (one per run).
pub struct Meter {
    warmup_end: Instant,
    duration: Duration,
    ticks: Cell<u64>,
    phase: Cell<Phase>,
    start: Cell<Option<Edge>>,
    end: Cell<Option<Edge>>,
    enters: Option<Box<dyn Fn() -> u64>>,
}

impl Meter {
    /// A meter whose window opens `warmup` from now and lasts `duration`. `enters` reads the
    /// runner's count of `io_uring_enter` calls, if it has one.
    pub fn new(warmup: Duration, duration: Duration, enters: Option<Box<dyn Fn() -> u64>>) -> Self {
        Meter {
            warmup_end: Instant::now() + warmup,
            duration,
            ticks: Cell::new(0),
            phase: Cell::new(Phase::Warmup),
            start: Cell::new(None),
            end: Cell::new(None),
            enters,
        }
    }

    fn edge(&self, at: Instant) -> Edge {
        Edge {
            at,
            ops: self.ticks.get(),
            process: cpu::process(),
            thread: cpu::thread(),
            enters: self.enters.as_ref().map(|f| f()),
        }
    }

    /// Records one completed op; returns false once the window has closed (stop issuing).
    #[inline]
    pub fn tick(&self) -> bool {
        let t = self.ticks.get() + 1;
        self.ticks.set(t);
        if t.is_multiple_of(TICKS_PER_CLOCK_READ) {
            self.check_clock();
        }
        self.phase.get() != Phase::Done
    }

    /// Whether ops should still be issued.
    pub fn running(&self) -> bool {
        self.phase.get() != Phase::Done
    }

    #[cold]
    fn check_clock(&self) {
        let now = Instant::now();
        match self.phase.get() {
            Phase::Warmup if now >= self.warmup_end => {
                self.start.set(Some(self.edge(now)));
                self.phase.set(Phase::Measuring);
            }
            Phase::Measuring => {
                let start = self.start.get().expect("measuring has a start edge");
                if now.duration_since(start.at) >= self.duration {
                    self.end.set(Some(self.edge(now)));
                    self.phase.set(Phase::Done);
                }
            }
            _ => {}
        }
    }

    /// The measurement, once the window has closed.
    pub fn sample(&self) -> Result<Sample, String> {
        let (Some(s), Some(e)) = (self.start.get(), self.end.get()) else {
            return Err(format!(
                "the measured window never closed ({} ops ticked)",
                self.ticks.get()
            ));
        };
        let ops = e.ops - s.ops;
        if ops == 0 {
            return Err("no op completed in the measured window".into());
        }
        let secs = e.at.duration_since(s.at).as_secs_f64();
        let process = e.process.since(&s.process);
        let thread = e.thread.since(&s.thread);
        let per_op = |d: Duration| d.as_secs_f64() * 1e9 / ops as f64;
        let total = process.total().as_secs_f64();
        Ok(Sample {
            ops,
            secs,
            iops: ops as f64 / secs,
            cpu_ns_per_op: per_op(process.total()),
            thread_cpu_ns_per_op: per_op(thread.total()),
            sys_share: if total > 0.0 {
                process.system.as_secs_f64() / total
            } else {
                0.0
            },
            enters_per_op: match (s.enters, e.enters) {
                (Some(a), Some(b)) => Some((b - a) as f64 / ops as f64),
                _ => None,
            },
        })
    }
}
