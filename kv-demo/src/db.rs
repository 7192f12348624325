//! The store: [`Db`] routes each key to its shard (`xxh3(key) % shards`), numbers writes
//! with one sequence for all shards and publishes them in order, logs a batch that spans
//! shards to every involved shard's WAL before any of them applies it, and merges the
//! shards for scans.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use smallvec::SmallVec;
use tokio::sync::Notify;
use ziob_zonefs::{FsStats, SpaceUsage, ZoneFs};

use crate::batch::WriteBatch;
use crate::context::StoreCtx;
use crate::db_error::DbError;
use crate::ikey;
use crate::iter::{Scan, ShardIter};
use crate::options::{Options, WriteOptions};
pub use crate::shard::shard_of;
use crate::shard::Shard;
use crate::snapshot::{Publish, Snapshot};
use crate::store::Store;

/// What the store has done, for write and space amplification.
#[derive(Debug, Clone)]
pub struct DbStats {
    /// Shards.
    pub shards: usize,
    /// Bytes of keys and values written by callers.
    pub user_bytes: u64,
    /// Bytes of tables written by flushes.
    pub flush_bytes: u64,
    /// Bytes of tables read by compactions.
    pub compaction_read_bytes: u64,
    /// Bytes of tables written by compactions.
    pub compaction_write_bytes: u64,
    /// Times a writer waited for background work.
    pub write_stalls: u64,
    /// Times a compaction paused for a waiting flush (flushes go first on the core they
    /// share: [`flush_first`](crate::flush_first)).
    pub compaction_pauses: u64,
    /// Tables and bytes per level, summed over the shards.
    pub levels: Vec<(usize, u64)>,
    /// Memtable bytes (active and immutable), all shards.
    pub memtable_bytes: u64,
    /// Bytes written to the device through ZIOB (WAL, manifest, tables, zonefs journal, GC
    /// copies): the ZIOB metrics' `bytes_written`, or `writeback_bytes` when larger (padding).
    pub device_bytes: u64,
    /// The zone file system's byte counts (tables, journal, GC).
    pub fs: FsStats,
    /// The zone file system's space use (`df`).
    pub df: SpaceUsage,
}

impl DbStats {
    /// Device bytes written per user byte (0 when nothing was written).
    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes == 0 {
            return 0.0;
        }
        self.device_bytes as f64 / self.user_bytes as f64
    }

    /// Bytes the table zones occupy (live files plus reclaimable garbage) per byte of live
    /// files (zonefs `df`).
    pub fn space_amplification(&self) -> f64 {
        self.df.space_amplification()
    }
}

#[derive(Debug)]
struct DbInner {
    shards: Vec<Arc<Shard>>,
    ctx: Arc<StoreCtx>,
    store: Store,
    closed: AtomicBool,
    /// Writes counted by [`Db::begin_write`] that have not ended (for a moment also ones it
    /// refuses because `closed` is set): `close` waits until none is left.
    writes_in_progress: AtomicUsize,
    /// The last write in progress ended while `closed` was set.
    writes_ended: Notify,
    /// `close` or `abandon` ran to its end: nothing is left for the drop to stop.
    finished: AtomicBool,
    user_bytes: AtomicU64,
}

impl Drop for DbInner {
    /// The last `Db` went without a finished `close` (never called, or its future dropped):
    /// stop the shards' background tasks (each holds its shard, so they would run forever)
    /// and close the device in a task, as `close` would. Without a runtime to run it, the
    /// tasks are at least told to stop.
    fn drop(&mut self) {
        if self.finished.load(Ordering::Acquire) || self.shards.is_empty() {
            return;
        }
        self.closed.store(true, Ordering::Release);
        for s in &self.shards {
            s.begin_stop();
        }
        let shards = std::mem::take(&mut self.shards);
        let store = self.store.clone();
        let core = shards[0].core;
        let _ = self.ctx.handle.spawn_on(core, move || async move {
            for s in &shards {
                s.stop().await;
            }
            if let Err(e) = store.close().await {
                tracing::warn!("kv-demo: closing a store dropped without close: {e}");
            }
            drop(shards);
        });
    }
}

/// A write in progress (see [`Db::begin_write`]); dropping it (the write ended, or its
/// future was dropped) wakes a waiting `close` when it was the last one.
struct WriteInProgress<'a>(&'a DbInner);

impl Drop for WriteInProgress<'_> {
    fn drop(&mut self) {
        if self.0.writes_in_progress.fetch_sub(1, Ordering::SeqCst) == 1
            && self.0.closed.load(Ordering::SeqCst)
        {
            self.0.writes_ended.notify_waiters();
        }
    }
}

/// An open store. Cheap to clone; every clone is the same store; usable from any thread
/// (its futures are `Send`).
#[derive(Debug, Clone)]
pub struct Db {
    inner: Arc<DbInner>,
}

impl Db {
    /// Opens the store on the device `spec` (a ZIOB device spec) with the runtime `handle`.
    pub async fn open(
        handle: ziob::runtime::Handle,
        spec: &str,
        opts: Options,
    ) -> Result<Db, DbError> {
        let parts = crate::open::open(handle, spec, opts).await?;
        Db::start(parts).await
    }

    /// Opens the store on the device of `client` (a ZIOB instance the caller made: e.g. over
    /// a device it keeps for fault injection). Closing the store closes `client`'s instance.
    /// The instance's cores are the caller's choice ([`ziob::ZiobConfig::cores`]): `shards`
    /// 0 makes a new store with one shard per core of the instance, and a shard on a core
    /// without a ZIOB shard reaches its zones across cores.
    pub async fn open_on(
        handle: ziob::runtime::Handle,
        client: ziob::Client,
        opts: Options,
    ) -> Result<Db, DbError> {
        let parts = crate::open::open_on(handle, client, opts).await?;
        Db::start(parts).await
    }

    async fn start((shards, ctx, store): crate::open::Opened) -> Result<Db, DbError> {
        match Db::assemble(shards, ctx, store.clone()) {
            Ok(db) => Ok(db),
            Err(e) => {
                let _ = store.close().await;
                Err(e)
            }
        }
    }

    /// The store made of `shards` (started here) on `store`.
    fn assemble(shards: Vec<Arc<Shard>>, ctx: Arc<StoreCtx>, store: Store) -> Result<Db, DbError> {
        for s in &shards {
            s.start()?;
        }
        Ok(Db {
            inner: Arc::new(DbInner {
                shards,
                ctx,
                store,
                closed: AtomicBool::new(false),
                writes_in_progress: AtomicUsize::new(0),
                writes_ended: Notify::new(),
                finished: AtomicBool::new(false),
                user_bytes: AtomicU64::new(0),
            }),
        })
    }

    fn check_open(&self) -> Result<(), DbError> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(DbError::Closed);
        }
        Ok(())
    }

    /// Counts a write in progress until the guard drops; [`DbError::Closed`] once `close`
    /// began. (The count goes up before `closed` is read and `close` sets `closed` before
    /// it reads the count, both `SeqCst`: a write `close` does not wait for sees `closed`.)
    fn begin_write(&self) -> Result<WriteInProgress<'_>, DbError> {
        self.inner.writes_in_progress.fetch_add(1, Ordering::SeqCst);
        let guard = WriteInProgress(&self.inner);
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(DbError::Closed);
        }
        Ok(guard)
    }

    /// Waits until no write that began before `close` is in progress.
    async fn wait_for_writes(&self) {
        loop {
            let ended = self.inner.writes_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.inner.writes_in_progress.load(Ordering::SeqCst) == 0 {
                return;
            }
            ended.await;
        }
    }

    /// The shard of `key`.
    pub fn shard_of(&self, key: &[u8]) -> usize {
        shard_of(key, self.inner.shards.len())
    }

    /// Shards of the store.
    pub fn shards(&self) -> usize {
        self.inner.shards.len()
    }

    /// The zone file system holding the tables.
    pub fn fs(&self) -> &ZoneFs {
        &self.inner.ctx.fs
    }

    /// Writes `key` → `value`.
    pub async fn put(
        &self,
        key: impl Into<Bytes>,
        value: impl Into<Bytes>,
        w: &WriteOptions,
    ) -> Result<(), DbError> {
        let mut b = WriteBatch::new();
        b.put(key, value)?;
        self.write(b, w).await
    }

    /// Deletes `key`.
    pub async fn delete(&self, key: impl Into<Bytes>, w: &WriteOptions) -> Result<(), DbError> {
        let mut b = WriteBatch::new();
        b.delete(key)?;
        self.write(b, w).await
    }

    /// Applies `batch` atomically: after a crash, all of it or none (across shards too).
    pub async fn write(&self, batch: WriteBatch, w: &WriteOptions) -> Result<(), DbError> {
        let _in_progress = self.begin_write()?;
        if batch.is_empty() {
            return Ok(());
        }
        let n = self.inner.shards.len();
        // Inline up to a few shards: a put allocates none of these lists.
        let routes: SmallVec<[usize; 4]> =
            batch.ops().iter().map(|op| shard_of(&op.key, n)).collect();
        let mut involved = routes.clone();
        involved.sort_unstable();
        involved.dedup();
        let shards: SmallVec<[&Arc<Shard>; 4]> =
            involved.iter().map(|&s| &self.inner.shards[s]).collect();
        // Encoded once, at sequence 0 until the numbers are allocated.
        let mut record = Vec::with_capacity(batch.payload_bytes() + 16 + 4 * batch.len());
        batch.encode(0, &mut record);
        let max = shards[0].log.wal.max_payload_bytes();
        if record.len() as u64 > max {
            return Err(DbError::InvalidArgument(format!(
                "a batch of {} encoded bytes is over the WAL's {max}-byte record limit",
                record.len()
            )));
        }
        for s in &shards {
            s.make_room().await?;
            s.log.wait_room().await?;
        }
        // In shard order: a memtable switch takes one gate exclusively, so no cycle.
        let mut gates = SmallVec::with_capacity(shards.len());
        for s in &shards {
            gates.push(s.gate.read().await);
        }
        // A write that began before `close` but got its gates after `close` began ends
        // here, having written nothing (so `Closed` keeps meaning "not written").
        self.check_open()?;
        let seq = &self.inner.ctx.seq;
        let start = seq.allocate(batch.len() as u64);
        record[..8].copy_from_slice(&start.to_le_bytes());
        let publish = Publish {
            seq,
            start,
            n: batch.len() as u64,
        };
        // From here the batch may reach a WAL, so it goes into the memtables however this
        // ends (an error, this future dropped): a batch in one involved shard's WAL is
        // replayed into all of them after a crash, so it must be in all of them now too.
        let apply = Apply {
            shards: &shards,
            involved: &involved,
            routes: &routes,
            batch: &batch,
            start,
            gates,
        };
        // Every involved shard's WAL gets the whole batch, queued before any memtable
        // sees it: replay of any one of them restores all of it.
        let mut tickets: SmallVec<[Result<u64, DbError>; 4]> =
            SmallVec::with_capacity(shards.len());
        let record_bytes = record.len();
        for (i, s) in shards.iter().enumerate() {
            s.count_wal_bytes(record_bytes);
            // The last shard takes the record itself: a one-shard write copies nothing.
            let payload = if i + 1 == shards.len() {
                std::mem::take(&mut record)
            } else {
                record.clone()
            };
            tickets.push(s.log.enqueue(payload));
        }
        drop(apply);
        let tickets = tickets
            .into_iter()
            .collect::<Result<SmallVec<[u64; 4]>, DbError>>()?;
        if w.sync {
            futures::future::try_join_all(shards.iter().zip(tickets).map(|(s, t)| async move {
                s.log.wait_appended(t).await?;
                s.log.wal.sync().await.map_err(DbError::from)
            }))
            .await?;
        }
        drop(publish);
        seq.wait_visible(start + batch.len() as u64 - 1).await;
        self.inner
            .user_bytes
            .fetch_add(batch.payload_bytes() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// The value of `key`, if any.
    pub async fn get(&self, key: &[u8]) -> Result<Option<Bytes>, DbError> {
        self.check_open()?;
        self.inner.shards[self.shard_of(key)].get(key, None).await
    }

    /// The value of `key` as `snap` sees it.
    pub async fn get_at(&self, key: &[u8], snap: &Snapshot) -> Result<Option<Bytes>, DbError> {
        self.check_open()?;
        self.inner.shards[self.shard_of(key)]
            .get(key, Some(snap.seq()))
            .await
    }

    /// A consistent view of the store as of now.
    pub fn snapshot(&self) -> Snapshot {
        self.inner.ctx.snapshots.acquire(&self.inner.ctx.seq)
    }

    /// Keys in `[start, end)` (`None` = unbounded) in key order, merged across shards, as
    /// `snap` sees them (`None`: a snapshot taken now).
    pub async fn scan(
        &self,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        snap: Option<&Snapshot>,
    ) -> Result<Scan, DbError> {
        self.check_open()?;
        let snap = match snap {
            Some(s) => s.clone(),
            None => self.snapshot(),
        };
        let from = ikey::seek_key(start.unwrap_or_default(), ikey::MAX_SEQ);
        let mut iters = Vec::with_capacity(self.inner.shards.len());
        for s in &self.inner.shards {
            let merge = s.merge_iter(&from).await?;
            iters.push(ShardIter::new(merge, snap.seq(), end.map(|e| e.to_vec())));
        }
        Ok(Scan::new(iters, Some(snap)))
    }

    /// Writes every memtable to tables and waits for it.
    pub async fn flush(&self) -> Result<(), DbError> {
        self.check_open()?;
        futures::future::try_join_all(self.inner.shards.iter().map(|s| s.flush())).await?;
        Ok(())
    }

    /// Closes the store: waits for the writes in progress (a sync write until it is durable;
    /// one stalled for a flush or compaction until that is done; one that had not got its
    /// gates yet ends with [`DbError::Closed`]), stops the background work (after the flush
    /// or compaction under way), syncs the WALs and the table files, closes the device.
    /// Other clones of this `Db` get `Closed` from then on: a write that returns it after
    /// `close` began wrote nothing, while a read or scan under way may return it instead of
    /// its result. A write future that was polled and is never polled again keeps `close`
    /// waiting (drop it instead). Memtables are not flushed: the next open replays them from
    /// the WAL. If the last `Db` is dropped without a finished close (this future dropped
    /// too), the same happens in a background task; reopen the device only after a close
    /// that returned.
    pub async fn close(self) -> Result<(), DbError> {
        if self.inner.closed.swap(true, Ordering::SeqCst) {
            return Err(DbError::Closed);
        }
        self.wait_for_writes().await;
        for s in &self.inner.shards {
            // A memtable switch under way (`flush`) finishes first.
            drop(s.gate.write().await);
        }
        for s in &self.inner.shards {
            s.stop().await;
        }
        let closed = self.inner.store.clone().close().await;
        self.inner.finished.store(true, Ordering::Release);
        // Failing to close is an I/O error, even one that says the instance is closed
        // (`Closed` from `close` means "closed already").
        closed.map_err(|e| DbError::Io(Box::new(e)))
    }

    /// Stops the store as a power loss would, for crash tests: ZIOB's buffered (unsynced)
    /// data is dropped, nothing is synced, the background work stops (what it was writing
    /// is cut off). Reopening the device recovers the store as after a crash.
    #[doc(hidden)]
    pub async fn abandon(self) -> Result<(), DbError> {
        self.inner.closed.store(true, Ordering::Release);
        self.inner
            .store
            .client()
            .with_ziob(|z| async move { z.abandon().await })
            .await?;
        for s in &self.inner.shards {
            s.stop().await;
        }
        self.inner.finished.store(true, Ordering::Release);
        Ok(())
    }

    /// What the store has done so far.
    pub async fn stats(&self) -> DbStats {
        let mut levels = vec![(0usize, 0u64); crate::options::LEVELS];
        let (mut flush, mut cr, mut cw, mut stalls, mut pauses, mut mem) = (0, 0, 0, 0, 0, 0);
        for s in &self.inner.shards {
            let st = s.stats();
            for (l, (n, b)) in st.levels.iter().enumerate() {
                levels[l].0 += n;
                levels[l].1 += b;
            }
            flush += st.flush_bytes;
            cr += st.compaction_read_bytes;
            cw += st.compaction_write_bytes;
            stalls += st.write_stalls;
            pauses += st.compaction_pauses;
            mem += st.memtable_bytes;
        }
        let device_bytes = match self.inner.store.client().metrics().await {
            Ok(m) => {
                let t = &m.total().stats;
                t.bytes_written.max(t.writeback_bytes)
            }
            Err(_) => 0,
        };
        DbStats {
            shards: self.inner.shards.len(),
            user_bytes: self.inner.user_bytes.load(Ordering::Relaxed),
            flush_bytes: flush,
            compaction_read_bytes: cr,
            compaction_write_bytes: cw,
            write_stalls: stalls,
            compaction_pauses: pauses,
            levels,
            memtable_bytes: mem,
            device_bytes,
            fs: self.inner.ctx.fs.stats().await,
            df: self.inner.ctx.fs.df().await,
        }
    }
}

/// Inserts a logged batch into its shards' memtables when dropped, then lets go of their
/// gates.
struct Apply<'a> {
    shards: &'a [&'a Arc<Shard>],
    involved: &'a [usize],
    routes: &'a [usize],
    batch: &'a WriteBatch,
    start: u64,
    gates: SmallVec<[tokio::sync::RwLockReadGuard<'a, ()>; 4]>,
}

impl Drop for Apply<'_> {
    fn drop(&mut self) {
        for (i, s) in self.involved.iter().zip(self.shards) {
            s.insert(
                self.batch
                    .ops()
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| self.routes[*j] == *i)
                    .map(|(j, op)| (self.start + j as u64, op)),
            );
        }
        self.gates.clear();
    }
}
