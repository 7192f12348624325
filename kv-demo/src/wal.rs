//! A shard's write-ahead log: the zone log `wal-<shard>` of the store's
//! [`LogSpace`], with group commit.
//!
//! One WAL record = one group commit: the payloads (each one or more
//! [`WriteBatch::encode`](crate::batch::WriteBatch::encode)s) of every writer that queued
//! while the previous record was being written, back to back, in queue order
//! ([`WriteBatch::decode_all`](crate::batch::WriteBatch::decode_all) splits it again). The
//! zone log frames each record with its length and CRC-32C and cuts a torn or corrupt tail
//! when the space opens (`docs/format.md`, "kv-demo manifest and WAL" → "WAL").
//!
//! Group commit: [`Wal::append`] queues its payload; if no record is being written, the
//! queue's payloads become the next record (at most one record in flight, so records are in
//! queue order) and every writer in it awaits that one append, plus one sync if any of them
//! asked for it. The in-flight record's work is a shared future: whichever of its writers is
//! polled drives it, so dropping a writer (a cancelled caller) neither stalls nor aborts the
//! others' record. A dropped [`append`](Wal::append) may or may not have its payload in the
//! WAL; one that returned `Ok` has it there (and durable when `sync` was true).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt, Shared};
use futures::{Stream, StreamExt};
use ziob::zonelog::LogRecovery;
use ziob::{LogSpace, Position, ZiobError, ZoneLog};

/// What can go wrong in a WAL call.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WalError {
    /// The zone log below failed (device error, no space in the log space, damaged data
    /// found while reading, closed instance, ...). Shared by every writer of the record.
    #[error("WAL {log}: {source}")]
    Log {
        /// The log's name.
        log: String,
        /// The zone log's error.
        source: Arc<ZiobError>,
    },
    /// A payload larger than one WAL record may be.
    #[error("WAL {log}: a payload of {len} bytes is over the {max}-byte record limit")]
    TooLarge {
        /// The log's name.
        log: String,
        /// The payload's length.
        len: usize,
        /// The largest record of the log.
        max: u64,
    },
}

impl WalError {
    fn log(log: &str, e: ZiobError) -> WalError {
        WalError::Log {
            log: log.to_string(),
            source: Arc::new(e),
        }
    }
}

/// The log name of shard `shard`'s WAL.
pub fn wal_log_name(shard: usize) -> String {
    format!("wal-{shard}")
}

/// Counters of one WAL since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalStats {
    /// Payloads appended ([`Wal::append`] calls that got a record).
    pub payloads: u64,
    /// Records appended (group commits).
    pub records: u64,
    /// Syncs issued by group commits and [`Wal::sync`].
    pub syncs: u64,
    /// Payload bytes appended (without the record frames).
    pub bytes: u64,
}

type GroupResult = Result<Position, WalError>;
type Work = Shared<BoxFuture<'static, GroupResult>>;
/// Where a writer learns which record took its payload.
type Slot = Arc<Mutex<Option<Work>>>;

/// The record being written: its tickets and its work.
struct Group {
    /// Its first ticket.
    first: u64,
    work: Work,
}

/// Payloads waiting for a record, and the record in flight.
#[derive(Default)]
struct Queue {
    /// `(ticket, payload, sync, slot)` in ticket order.
    pending: VecDeque<(u64, Vec<u8>, bool, Slot)>,
    /// The ticket the next payload gets.
    next_ticket: u64,
    in_flight: Option<Group>,
}

struct Inner {
    log: ZoneLog,
    queue: Mutex<Queue>,
    payloads: AtomicU64,
    records: AtomicU64,
    syncs: AtomicU64,
    bytes: AtomicU64,
}

/// A shard's WAL (`Clone + Send + Sync`; futures are `Send`).
#[derive(Clone)]
pub struct Wal {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal").field("log", &self.inner.log).finish()
    }
}

/// What a writer does next.
enum Step {
    /// Await the record holding our payload.
    Ours(Work),
    /// Await an earlier record, then look again.
    Earlier(Work, u64),
}

impl Wal {
    /// Opens (creating it when missing) the WAL of shard `shard` in `space`: the zone log
    /// `wal-<shard>`, recovered (torn or corrupt tail cut) when the space was opened. Its
    /// zones are taken from the shard's core ([`log_core`](crate::placement::log_core)).
    ///
    /// # Errors
    /// The zone log's ([`WalError::Log`]), e.g. no zone free for a new log.
    pub async fn open(space: &LogSpace, shard: usize) -> Result<Wal, WalError> {
        let name = wal_log_name(shard);
        let log = space
            .open_log_on_core(&name, crate::placement::log_core(space, shard))
            .await
            .map_err(|e| WalError::log(&name, e))?;
        Ok(Wal::new(log))
    }

    /// A WAL over an open zone log.
    pub fn new(log: ZoneLog) -> Wal {
        Wal {
            inner: Arc::new(Inner {
                log,
                queue: Mutex::new(Queue::default()),
                payloads: AtomicU64::new(0),
                records: AtomicU64::new(0),
                syncs: AtomicU64::new(0),
                bytes: AtomicU64::new(0),
            }),
        }
    }

    /// The zone log below.
    pub fn log(&self) -> &ZoneLog {
        &self.inner.log
    }

    /// What the zone log's recovery found when the space was opened (`None` for a WAL
    /// created since): where a torn or corrupt tail was cut.
    pub fn recovery(&self) -> Option<&LogRecovery> {
        self.inner.log.recovery()
    }

    /// Where the WAL's records begin (replaying from here gets every record kept).
    pub fn start(&self) -> Position {
        self.inner.log.start()
    }

    /// A position past every record appended so far: records appended later are at or
    /// after it.
    pub fn end(&self) -> Position {
        self.inner.log.end()
    }

    /// The largest payload [`append`](Wal::append) takes (one record's worth).
    pub fn max_payload_bytes(&self) -> u64 {
        self.inner.log.max_record_bytes()
    }

    /// Counters since the WAL was opened.
    pub fn stats(&self) -> WalStats {
        let i = &self.inner;
        WalStats {
            payloads: i.payloads.load(Ordering::Relaxed),
            records: i.records.load(Ordering::Relaxed),
            syncs: i.syncs.load(Ordering::Relaxed),
            bytes: i.bytes.load(Ordering::Relaxed),
        }
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.inner.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends `payload` in the next group commit and returns the position of the record
    /// holding it (several payloads share a record and its position). With `sync` it returns
    /// once the record is durable; without, once the zone write buffer took it (readable
    /// and in WAL order at once; a crash may lose it, and with it every later record).
    ///
    /// # Errors
    /// [`WalError::TooLarge`] for a payload over [`max_payload_bytes`](Wal::max_payload_bytes)
    /// (nothing queued); the zone log's errors, shared by every payload of the record.
    ///
    /// # Cancel safety
    /// If dropped, the payload may or may not be in the WAL; the other writers of its
    /// record are not affected. A record whose writers were all dropped is driven to its
    /// end by the next `append` or [`truncate_before`](Wal::truncate_before).
    pub async fn append(&self, payload: &[u8], sync: bool) -> Result<Position, WalError> {
        let max = self.max_payload_bytes();
        if payload.len() as u64 > max {
            return Err(WalError::TooLarge {
                log: self.inner.log.name().to_string(),
                len: payload.len(),
                max,
            });
        }
        let slot: Slot = Arc::default();
        {
            let mut q = self.queue();
            let t = q.next_ticket;
            q.next_ticket += 1;
            q.pending
                .push_back((t, payload.to_vec(), sync, slot.clone()));
        }
        loop {
            match self.step(&slot) {
                Step::Ours(work) => return work.await,
                Step::Earlier(work, first) => {
                    let _ = work.await;
                    self.retire(first);
                }
            }
        }
    }

    /// What the writer with `slot` waits for: the record that took its payload, an earlier
    /// one still in flight, or (if none is) a new record it starts from the queue.
    fn step(&self, slot: &Slot) -> Step {
        let mut q = self.queue();
        if let Some(work) = lock(slot).clone() {
            return Step::Ours(work);
        }
        if let Some(g) = &q.in_flight {
            return Step::Earlier(g.work.clone(), g.first);
        }
        // Nothing in flight and our payload still queued: the queue's front payloads (ours
        // among them: every earlier one is in a record or before ours) become the next
        // record.
        let max = self.max_payload_bytes() as usize;
        let mut record = Vec::new();
        let mut sync = false;
        let mut members = Vec::new();
        let first = q.pending.front().map_or(0, |p| p.0);
        while let Some((_, p, s, _)) = q.pending.front() {
            if !record.is_empty() && record.len() + p.len() > max {
                break;
            }
            record.extend_from_slice(p);
            sync |= *s;
            let (_, _, _, member) = q.pending.pop_front().expect("front");
            members.push(member);
        }
        let count = members.len() as u64;
        let log = self.inner.log.clone();
        let weak = Arc::downgrade(&self.inner);
        let work = async move {
            let fail = |e| WalError::log(log.name(), e);
            let pos = log.append(&record).await.map_err(fail)?;
            if sync {
                log.sync().await.map_err(fail)?;
            }
            if let Some(inner) = Weak::upgrade(&weak) {
                if sync {
                    inner.syncs.fetch_add(1, Ordering::Relaxed);
                }
                inner.records.fetch_add(1, Ordering::Relaxed);
                inner.payloads.fetch_add(count, Ordering::Relaxed);
                inner
                    .bytes
                    .fetch_add(record.len() as u64, Ordering::Relaxed);
                Wal { inner }.retire(first);
            }
            Ok(pos)
        }
        .boxed()
        .shared();
        for m in members {
            *lock(&m) = Some(work.clone());
        }
        q.in_flight = Some(Group {
            first,
            work: work.clone(),
        });
        if lock(slot).is_some() {
            Step::Ours(work)
        } else {
            // The record filled up before our payload: it goes in a later one.
            Step::Earlier(work, first)
        }
    }

    /// The record starting at ticket `first` finished: the next one may start.
    fn retire(&self, first: u64) {
        let mut q = self.queue();
        if q.in_flight.as_ref().is_some_and(|g| g.first == first) {
            q.in_flight = None;
        }
    }

    /// Drives the record in flight, if any, to its end. Its writers may all have been
    /// dropped: then nothing else polls it, and it may hold the zone log's roll lock (a
    /// record moving the log to a fresh zone), which [`truncate_before`](Wal::truncate_before)
    /// needs. Its result is its writers' (a failure shows in the zone log's next call).
    async fn settle(&self) {
        let in_flight = self
            .queue()
            .in_flight
            .as_ref()
            .map(|g| (g.work.clone(), g.first));
        if let Some((work, first)) = in_flight {
            let _ = work.await;
            self.retire(first);
        }
    }

    /// Makes every payload whose [`append`](Wal::append) returned durable (a sync of the
    /// zone log, group-committed with other syncs). It does not wait for a record in flight
    /// (a sync write's own record is appended already; waiting for the next group's would
    /// add an append to its latency).
    ///
    /// # Errors
    /// The zone log's.
    pub async fn sync(&self) -> Result<(), WalError> {
        let log = &self.inner.log;
        log.sync().await.map_err(|e| WalError::log(log.name(), e))?;
        self.inner.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The records from `from` on, with their positions, in log order, up to the end of the
    /// WAL when each batch is read. `from` is a record's position, the position after one,
    /// [`start`](Wal::start), or [`Position::ZERO`] (= from the start). A `from` where no
    /// record starts because a crash cut the log before it (the manifest recorded a WAL
    /// position whose records were in tables but never durable in the WAL), or past the
    /// WAL's end, gives the records after it: none in that zone, then those of later zones.
    ///
    /// # Errors (as the stream's last item)
    /// Reading before [`start`](Wal::start) (truncated records; `ZERO` excepted), damaged
    /// data in a zone recovery did not read through.
    pub fn replay(
        &self,
        from: Position,
    ) -> impl Stream<Item = Result<(Position, Bytes), WalError>> + Send + 'static {
        let log = self.inner.log.clone();
        let from = if from == Position::ZERO {
            log.start()
        } else {
            from
        };
        let name = log.name().to_string();
        futures::stream::once(async move {
            match first_at_or_after(&log, from).await {
                Ok(Some(p)) => log.stream(p).boxed(),
                Ok(None) => futures::stream::empty().boxed(),
                Err(e) => futures::stream::once(futures::future::ready(Err(e))).boxed(),
            }
        })
        .flatten()
        .map(move |r| r.map_err(|e| WalError::log(&name, e)))
    }

    /// [`replay`](Wal::replay) collected.
    pub async fn replay_all(&self, from: Position) -> Result<Vec<(Position, Bytes)>, WalError> {
        let mut out = Vec::new();
        let mut s = std::pin::pin!(self.replay(from));
        while let Some(r) = s.next().await {
            out.push(r?);
        }
        Ok(out)
    }

    /// Drops the WAL's zones before the one `pos` lies in (records at or after `pos` are
    /// kept; records before it in a kept zone stay readable), so that `pos` stays a valid
    /// [`replay`](Wal::replay) start. Call it once everything before `pos` is in tables that
    /// the manifest records (with `pos` as its replay start).
    ///
    /// `pos`'s own zone is kept even when all its records lie before `pos`: `pos` may be
    /// that zone's end (the WAL's end when the next record did not fit and went to a fresh
    /// zone), and dropping the zone would make replaying from `pos` a
    /// [`Truncated`](ziob::ZiobError::Truncated) error for good.
    ///
    /// # Errors
    /// The zone log's (a position past [`end`](Wal::end), a failed reset).
    pub async fn truncate_before(&self, pos: Position) -> Result<(), WalError> {
        self.settle().await;
        let log = &self.inner.log;
        log.truncate_before(Position::new(pos.seq(), 0))
            .await
            .map_err(|e| WalError::log(log.name(), e))
    }
}

/// Where reading from `from` starts: `from` itself when a record (or the padding before
/// one) is there, else the first record after it (searched from the log's start), or `None`
/// when no record lies at or after it.
async fn first_at_or_after(log: &ZoneLog, from: Position) -> Result<Option<Position>, ZiobError> {
    if from >= log.end() {
        return Ok(None);
    }
    match log.read_from(from, 1).await {
        Ok(_) => Ok(Some(from)),
        Err(ZiobError::InvalidPosition { .. }) => {
            let mut records = std::pin::pin!(log.stream(log.start()));
            while let Some(r) = records.next().await {
                let (p, _) = r?;
                if p >= from {
                    return Ok(Some(p));
                }
            }
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
