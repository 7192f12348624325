//! The operation generator: one worker's plan, drawn from the seed.

use std::fmt;
use std::time::Duration;

use super::rng::Rng;
use super::settings::Settings;

/// One operation through the public API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// `Ziob::append`.
    Append { zone: u32, len: usize },
    /// `Ziob::write_at` at the write pointer a report just gave (may race other writers).
    WriteAtWp { zone: u32, len: usize },
    /// `Ziob::read`.
    Read { zone: u32, offset: u64, len: usize },
    /// `Ziob::flush`.
    Flush { zone: u32 },
    /// `Ziob::sync`.
    Sync,
    /// Zone reset.
    Reset { zone: u32 },
    /// Zone finish.
    Finish { zone: u32 },
    /// Explicit open (the buffer's logical state).
    Open { zone: u32 },
    /// Zone close (the buffer's logical state).
    CloseZone { zone: u32 },
    /// `Ziob::report` of every zone.
    Report,
    /// `Ziob::close` of the whole instance (planned by the epoch's end, not drawn).
    Close,
}

/// How (and whether) the harness drops an operation's future before it completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancel {
    /// Awaited to completion.
    Never,
    /// Dropped if still pending after this many polls.
    AfterPolls(u32),
    /// Raced against a timer (`select!`), dropped when the timer wins.
    AfterTimer(Duration),
}

/// A planned operation.
#[derive(Debug, Clone, Copy)]
pub struct PlannedOp {
    /// What to do.
    pub kind: OpKind,
    /// Whether to drop it early.
    pub cancel: Cancel,
}

impl fmt::Display for PlannedOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.cancel {
            Cancel::Never => write!(f, "{:?}", self.kind),
            c => write!(f, "{:?} [{c:?}]", self.kind),
        }
    }
}

#[derive(Clone, Copy)]
enum Pick {
    Append,
    BigAppend,
    WriteAt,
    Read,
    Flush,
    Sync,
    Reset,
    Finish,
    Open,
    CloseZone,
    Report,
}

/// The plan of one worker: `s.ops_per_worker` operations.
pub fn plan_worker(rng: &mut Rng, s: &Settings) -> Vec<PlannedOp> {
    let g = &s.geometry;
    // A worker favours one zone, so several workers often share a zone.
    let home = rng.below(u64::from(g.zone_count)) as u32;
    (0..s.ops_per_worker)
        .map(|_| {
            let zone = if rng.chance(600) {
                home
            } else {
                rng.below(u64::from(g.zone_count)) as u32
            };
            let pick = rng.weighted(&[
                (30, Pick::Append),
                (3, Pick::BigAppend),
                (6, Pick::WriteAt),
                (14, Pick::Read),
                (9, Pick::Flush),
                (3, Pick::Sync),
                (2, Pick::Reset),
                (1, Pick::Finish),
                (1, Pick::Open),
                (1, Pick::CloseZone),
                (2, Pick::Report),
            ]);
            // Pass-through goes to the device: whole blocks only.
            let bs = g.block_size_bytes;
            let shape = |len: u64| -> usize {
                if s.config.buffered {
                    len as usize
                } else {
                    (len.div_ceil(bs) * bs).min(g.max_append_bytes) as usize
                }
            };
            let small = |rng: &mut Rng| shape(rng.range(1, 6000));
            let kind = match pick {
                Pick::Append => OpKind::Append {
                    zone,
                    len: small(rng),
                },
                Pick::BigAppend => OpKind::Append {
                    zone,
                    len: shape(rng.range(6000, g.zone_capacity_bytes / 2)),
                },
                Pick::WriteAt => OpKind::WriteAtWp {
                    zone,
                    len: small(rng),
                },
                Pick::Read => {
                    let mut offset = rng.below(g.zone_size_bytes);
                    let mut len = rng.range(1, g.zone_size_bytes - offset);
                    if !s.config.buffered {
                        offset = offset / bs * bs;
                        len = len.div_ceil(bs) * bs;
                    }
                    OpKind::Read {
                        zone,
                        offset,
                        len: len as usize,
                    }
                }
                Pick::Flush => OpKind::Flush { zone },
                Pick::Sync => OpKind::Sync,
                Pick::Reset => OpKind::Reset { zone },
                Pick::Finish => OpKind::Finish { zone },
                Pick::Open => OpKind::Open { zone },
                Pick::CloseZone => OpKind::CloseZone { zone },
                Pick::Report => OpKind::Report,
            };
            let cancel = if rng.chance(s.cancel_per_mille) {
                if rng.chance(500) {
                    Cancel::AfterPolls(rng.range(1, 4) as u32)
                } else {
                    Cancel::AfterTimer(Duration::from_micros(rng.range(0, 2000)))
                }
            } else {
                Cancel::Never
            };
            PlannedOp { kind, cancel }
        })
        .collect()
}
