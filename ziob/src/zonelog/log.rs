//! [`ZoneLog`]: one named log of a [`LogSpace`](super::LogSpace) — appends, sync,
//! truncation and the accessors. Reading is in `reader.rs`, streams in `stream.rs`, moving
//! to a fresh zone in `rollover.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use event_listener::Event;
use ziob_backends::DeviceError;

use super::chain::Chain;
use super::position::Position;
use super::record::{encode_batch, frame_len};
use super::recovery::LogRecovery;
use super::space::SpaceInner;
use crate::error::{Result, ZiobError};

/// The shared state of one log.
pub(crate) struct LogInner {
    /// The log's name.
    pub name: String,
    /// Its zones and end.
    pub chain: Mutex<Chain>,
    /// Held while the zone taking appends changes (rollover) or zones are dropped.
    pub roll: futures::lock::Mutex<()>,
    /// Notified when the end moves, a zone is added, or the log is removed.
    pub changed: Event,
    /// What recovery found when the space opened (`None` for a log created since).
    pub recovery: Option<LogRecovery>,
    /// The core whose zones the log takes while one is free ([`NO_CORE`]: none preferred).
    pub core: AtomicUsize,
}

/// [`LogInner::core`] when no core is preferred.
pub(crate) const NO_CORE: usize = usize::MAX;

impl LogInner {
    pub(crate) fn new(name: &str, chain: Chain, recovery: Option<LogRecovery>) -> LogInner {
        LogInner {
            name: name.to_string(),
            chain: Mutex::new(chain),
            roll: futures::lock::Mutex::new(()),
            changed: Event::new(),
            recovery,
            core: AtomicUsize::new(NO_CORE),
        }
    }

    /// The core whose zones the log prefers, if any.
    pub(crate) fn preferred_core(&self) -> Option<usize> {
        Some(self.core.load(Ordering::Relaxed)).filter(|&c| c != NO_CORE)
    }

    /// The chain (a poisoned lock is taken over: the chain is updated in single steps).
    pub(crate) fn chain(&self) -> MutexGuard<'_, Chain> {
        self.chain.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn no_such_log(&self) -> ZiobError {
        ZiobError::NoSuchLog {
            name: self.name.clone(),
        }
    }
}

/// A durable, framed record log over zones of a [`LogSpace`](super::LogSpace).
/// `Clone + Send + Sync`; every future it returns is `Send`.
///
/// Records are appended with a length and a CRC-32C, each zone of the log starts with a
/// zone header, and a record never spans zones: when one does not fit the zone being
/// written, the log finishes that zone and moves to a fresh one. Positions
/// ([`Position`]) grow in log order.
///
/// # Durability
/// A completed [`append`](ZoneLog::append) means the record is in the zone write buffer
/// (readable at once; a crash may lose it). A completed [`sync`](ZoneLog::sync) means every
/// record appended before the call is on the device (a zone's flush, group-committed with
/// other callers'). Zones the log moved away from were finished, which made them durable.
///
/// # Device errors
/// A write-back error the buffer keeps for the zone being appended to
/// ([`ZiobError::Writeback`]) is returned by the log's appends and syncs from then on; the
/// log does not move past it by itself (records acknowledged but not durable would be
/// lost in the middle of the log). Reopening the space recovers the log up to its last
/// durable record and goes on in a fresh zone.
///
/// # Cancel safety
/// Every call may be dropped at any await. A dropped append was appended whole or not at
/// all (its position is not reported; a reader may see it). A dropped sync promises
/// nothing. A dropped rollover leaves the log as it was (a zone it took is reset before it
/// is used again). A dropped truncation has dropped the zones it meant to from the log;
/// those not reset yet are reset, oldest first, before the space resets or takes another.
#[derive(Clone)]
pub struct ZoneLog {
    pub(crate) space: Arc<SpaceInner>,
    pub(crate) log: Arc<LogInner>,
}

impl std::fmt::Debug for ZoneLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZoneLog")
            .field("name", &self.log.name)
            .field("start", &self.start())
            .field("end", &self.end())
            .finish()
    }
}

impl ZoneLog {
    /// The log's name.
    pub fn name(&self) -> &str {
        &self.log.name
    }

    /// Where the log's records begin: the start of its oldest zone's records, at or before
    /// its first record (reading from here gets every record still in the log; positions
    /// before it were truncated).
    pub fn start(&self) -> Position {
        self.log.chain().start()
    }

    /// A position past every record appended so far and at or before the next one: read
    /// or [`wait_for`](ZoneLog::wait_for) from here to get only new records.
    pub fn end(&self) -> Position {
        self.log.chain().end
    }

    /// The largest record this log takes, in bytes (a zone's capacity minus its header and
    /// the record frame; pass-through: also at most one device append).
    pub fn max_record_bytes(&self) -> u64 {
        self.space.layout.max_record_bytes(&self.log.name)
    }

    /// What recovery found for this log when the space was opened (`None` if the log was
    /// created since).
    pub fn recovery(&self) -> Option<&LogRecovery> {
        self.log.recovery.as_ref()
    }

    /// The device zones the log uses now, oldest first.
    pub fn zones(&self) -> Vec<u32> {
        self.log.chain().zones.values().map(|z| z.zone).collect()
    }

    /// Appends one record; returns its position.
    ///
    /// # Errors
    /// [`ZiobError::RecordTooLarge`] for a record larger than
    /// [`max_record_bytes`](ZoneLog::max_record_bytes); [`ZiobError::NoSpace`] when the log
    /// must move to a fresh zone and the space has none; [`ZiobError::NoSuchLog`] after
    /// [`LogSpace::remove_log`](super::LogSpace::remove_log); the buffer's errors.
    ///
    /// # Cancel safety
    /// If dropped, the record was appended whole or not at all.
    pub async fn append(&self, record: &[u8]) -> Result<Position> {
        Ok(self.append_batch(&[record]).await?[0])
    }

    /// Appends `records` back to back in one buffer append (when they fit in one zone; a
    /// batch larger than a zone is split at zone boundaries, and pass-through at the
    /// device's append limit) and returns their positions, in order.
    ///
    /// # Errors and cancel safety
    /// As [`ZoneLog::append`]; a failed or dropped split batch may have appended a prefix
    /// of its pieces.
    pub async fn append_batch(&self, records: &[&[u8]]) -> Result<Vec<Position>> {
        let max = self.max_record_bytes();
        if let Some(r) = records.iter().find(|r| r.len() as u64 > max) {
            return Err(ZiobError::RecordTooLarge {
                log: self.log.name.clone(),
                len_bytes: r.len() as u64,
                max_bytes: max,
            });
        }
        let room = max + frame_len(0) as u64; // bytes of records one zone holds
        let mut positions = Vec::with_capacity(records.len());
        let mut rest = records;
        while !rest.is_empty() {
            let mut take = 0;
            let mut bytes = 0u64;
            while take < rest.len() && bytes + frame_len(rest[take].len()) as u64 <= room {
                bytes += frame_len(rest[take].len()) as u64;
                take += 1;
            }
            let (piece, more) = rest.split_at(take.max(1));
            positions.extend(self.append_piece(piece).await?);
            rest = more;
        }
        Ok(positions)
    }

    /// Appends records that fit in one zone as one buffer append, moving to a fresh zone
    /// when they do not fit the current one.
    async fn append_piece(&self, records: &[&[u8]]) -> Result<Vec<Position>> {
        let (framed, offsets) = encode_batch(records);
        let framed_len = framed.len() as u64;
        let data = self.space.layout.append_bytes(framed);
        let cap = self.space.layout.capacity_bytes;
        // A piece fits an empty zone, so it needs at most one move to a fresh zone (and
        // one more if another caller's records filled that one first). A zone refusing it
        // again and again is not about room: stop rather than use up the space.
        let mut refusals = 0;
        loop {
            let (generation, open) = {
                let c = self.log.chain();
                if c.removed {
                    return Err(self.log.no_such_log());
                }
                (c.generation, c.open_zone())
            };
            let Some((seq, zone, written)) = open else {
                self.roll(generation).await?;
                continue;
            };
            if written + data.len() as u64 > cap {
                self.roll(generation).await?;
                continue;
            }
            match self.space.client.append(zone, data.clone()).await {
                Ok(off) => {
                    let end = off + framed_len;
                    {
                        let mut c = self.log.chain();
                        c.appended(seq, off + data.len() as u64);
                        debug_assert!(c.end >= Position::new(seq, end as u32));
                    }
                    self.log.changed.notify(usize::MAX);
                    return Ok(offsets
                        .iter()
                        .map(|&o| Position::new(seq, (off + o as u64) as u32))
                        .collect());
                }
                Err(e) if does_not_fit(&e) && refusals < 64 => {
                    refusals += 1;
                    self.roll(generation).await?
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Makes every record appended before this call durable: flushes the zone being
    /// appended to (zones the log left were finished, which flushed them).
    ///
    /// # Cancel safety
    /// A dropped sync promises nothing.
    pub async fn sync(&self) -> Result<()> {
        let open = {
            let c = self.log.chain();
            if c.removed {
                return Err(self.log.no_such_log());
            }
            c.open_zone()
        };
        let Some((seq, zone, _)) = open else {
            return Ok(()); // the last zone was finished: durable
        };
        match self.space.client.flush(zone).await {
            Ok(()) => Ok(()),
            // A rollover finished the zone meanwhile, which made it durable.
            Err(_)
                if self
                    .log
                    .chain()
                    .open_zone()
                    .is_none_or(|(s, _, _)| s != seq) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Drops the log's zones that hold only records before `pos` (every zone but the
    /// current one whose records all lie before `pos`) and resets them, oldest first, so
    /// they are free for any log of the space. Records at or after `pos` are kept; records
    /// before it that share a zone with one at or after it stay readable.
    /// [`start`](ZoneLog::start) moves to the oldest zone left, and reading before it is
    /// [`ZiobError::Truncated`].
    ///
    /// # Errors
    /// [`ZiobError::InvalidPosition`] for a position past [`end`](ZoneLog::end); a failed
    /// reset (its zone is retried before it is used again).
    ///
    /// # Cancel safety
    /// If dropped, the zones not reset yet are still dropped from the log; they stay queued
    /// and the space's next reset or zone take resets them first, oldest first (so a log
    /// never reopens with a gap).
    pub async fn truncate_before(&self, pos: Position) -> Result<()> {
        let _roll = self.log.roll.lock().await;
        let victims = {
            let mut c = self.log.chain();
            if c.removed {
                return Err(self.log.no_such_log());
            }
            if pos > c.end {
                return Err(ZiobError::InvalidPosition {
                    log: self.log.name.clone(),
                    position: pos.into_raw(),
                    detail: format!("it is past the log's end {}", c.end),
                });
            }
            let victims = c.droppable_before(pos);
            for (seq, _) in &victims {
                c.zones.remove(seq);
            }
            victims
        };
        self.space
            .reset_zones(victims.into_iter().map(|(_, z)| z).collect())
            .await
    }
}

/// Whether an append failed because the data does not fit the zone (it is Full, or the
/// data would cross its capacity): the log moves to a fresh zone.
fn does_not_fit(e: &ZiobError) -> bool {
    matches!(
        e,
        ZiobError::Device(DeviceError::ZoneFull { .. } | DeviceError::BoundaryError { .. })
    )
}
