//! One shard: an LSM tree of its own (memtable, immutable memtables, a [`Version`] of
//! tables), its WAL and manifest ([`ShardLog`]), and its background work — one flush task and
//! one compaction task, both on its [`background_core`] (the WAL pump on the shard's core).
//! Callers on any thread reach it through
//! short locks; writers wait (asynchronously) when flushes or compactions fall behind.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use tokio::sync::Notify;

use crate::batch::Op;
use crate::compaction;
use crate::context::StoreCtx;
use crate::db_error::DbError;
use crate::durable::ShardLog;
use crate::flush_first::FlushFirst;
use crate::ikey;
use crate::iter::{first_ikey, LevelSource, MemSource, MergeIter, Source, TableSource};
use crate::memtable::{Lookup, Memtable, Seek};
use crate::options::{L0_FLUSH_FIRST_MAX, L0_STOP_WRITES, MAX_IMMUTABLE_MEMTABLES};
use crate::table_writer::TableWriter;
use crate::version::{table_path, TableHandle, Version};
use crate::version_edit::{FileMeta, VersionEdit};

/// What a writer finds in [`Shard::make_room`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Room {
    /// Write now.
    Free,
    /// Switch the full memtable, then write.
    SwitchFirst,
    /// Wait for a flush or compaction.
    Stalled,
}

/// A memtable waiting for its flush.
#[derive(Debug, Clone)]
struct Immutable {
    mem: Arc<RwLock<Memtable>>,
    /// The WAL position at the switch: every record before it is in this memtable or older.
    wal_end: u64,
    /// At least the highest sequence number in it.
    last_seq: u64,
    /// When it was switched out (the flush's debug event reports its wait in the queue).
    switched: std::time::Instant,
}

/// What readers take a consistent copy of.
#[derive(Debug)]
struct ShardState {
    mem: Arc<RwLock<Memtable>>,
    /// Oldest first.
    imms: VecDeque<Immutable>,
    version: Arc<Version>,
    /// Per level, the largest user key of the last table compacted out of it (round robin).
    compact_pointer: Vec<Vec<u8>>,
}

/// What the shard's tree looks like, for statistics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardStats {
    /// Tables and bytes per level.
    pub levels: Vec<(usize, u64)>,
    /// Bytes of tables written by flushes.
    pub flush_bytes: u64,
    /// Bytes of tables read by compactions.
    pub compaction_read_bytes: u64,
    /// Bytes of tables written by compactions.
    pub compaction_write_bytes: u64,
    /// Times a writer waited for background work.
    pub write_stalls: u64,
    /// Times a compaction paused for a waiting flush.
    pub compaction_pauses: u64,
    /// Memtable bytes (active and immutable).
    pub memtable_bytes: u64,
}

/// One shard of a store.
#[derive(Debug)]
pub struct Shard {
    /// The shard's number.
    pub id: usize,
    /// The core it lives on: its WAL pump, and ZIOB's instance for its zones.
    pub core: usize,
    /// The core its flushes and compactions run on (see [`background_core`]).
    pub background_core: usize,
    ctx: Arc<StoreCtx>,
    state: Mutex<ShardState>,
    /// Writers hold it shared from their WAL append to their memtable insert; a memtable
    /// switch holds it exclusively, so the switch's WAL position splits the WAL exactly.
    pub gate: tokio::sync::RwLock<()>,
    /// The WAL and manifest.
    pub log: ShardLog,
    next_file: AtomicU64,
    /// One edit at a time: manifest write and version swap together.
    edit_lock: tokio::sync::Mutex<()>,
    /// Background progress (a flush or compaction installed, an error, closing).
    changed: Notify,
    flush_work: Notify,
    compact_work: Notify,
    /// Memtables waiting for their flush; compactions pause for them.
    flush_first: FlushFirst,
    error: Mutex<Option<String>>,
    closing: AtomicBool,
    running: AtomicUsize,
    stopped: Notify,
    flush_bytes: AtomicU64,
    compaction_read_bytes: AtomicU64,
    compaction_write_bytes: AtomicU64,
    write_stalls: AtomicU64,
    compaction_pauses: AtomicU64,
    /// WAL bytes queued since the last memtable switch.
    wal_bytes: AtomicU64,
}

pub use crate::placement::background_core;

impl Shard {
    /// A shard with the tables of `version`, next file number `next_file`.
    pub fn new(
        id: usize,
        (core, background_core): (usize, usize),
        ctx: Arc<StoreCtx>,
        log: ShardLog,
        version: Version,
        next_file: u64,
    ) -> Shard {
        let version_l0 = version.l0_count();
        Shard {
            id,
            core,
            background_core,
            ctx,
            state: Mutex::new(ShardState {
                mem: Arc::default(),
                imms: VecDeque::new(),
                version: Arc::new(version),
                compact_pointer: vec![Vec::new(); crate::options::LEVELS],
            }),
            gate: tokio::sync::RwLock::new(()),
            log,
            next_file: AtomicU64::new(next_file),
            edit_lock: tokio::sync::Mutex::new(()),
            changed: Notify::new(),
            flush_work: Notify::new(),
            compact_work: Notify::new(),
            flush_first: FlushFirst::new(version_l0, L0_FLUSH_FIRST_MAX),
            error: Mutex::new(None),
            closing: AtomicBool::new(false),
            running: AtomicUsize::new(0),
            stopped: Notify::new(),
            flush_bytes: AtomicU64::new(0),
            compaction_read_bytes: AtomicU64::new(0),
            compaction_write_bytes: AtomicU64::new(0),
            write_stalls: AtomicU64::new(0),
            compaction_pauses: AtomicU64::new(0),
            wal_bytes: AtomicU64::new(0),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ShardState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The store's shared context.
    pub fn ctx(&self) -> &Arc<StoreCtx> {
        &self.ctx
    }

    /// Starts the WAL pump on the shard's core and the flush and compaction tasks on its
    /// background core.
    pub fn start(self: &Arc<Self>) -> Result<(), DbError> {
        for job in [Job::Pump, Job::Flush, Job::Compact] {
            let me = self.clone();
            let core = match job {
                Job::Pump => self.core,
                Job::Flush | Job::Compact => self.background_core,
            };
            self.running.fetch_add(1, Ordering::AcqRel);
            let spawned = self.ctx.handle.spawn_on(core, move || async move {
                // Flushes and compactions give way to the core's reads and writes; the
                // WAL pump is on the writers' path and runs as they do.
                match job {
                    Job::Pump => me.background(job).await,
                    Job::Flush | Job::Compact => {
                        ziob::runtime::spawn_background(me.background(job)).detach()
                    }
                }
            });
            if let Err(e) = spawned {
                self.running.fetch_sub(1, Ordering::AcqRel);
                return Err(DbError::io(format!(
                    "shard {}: starting background work on core {core}: {e}",
                    self.id
                )));
            }
        }
        Ok(())
    }

    /// Fails if a background flush or compaction failed or the store is closing.
    pub fn check(&self) -> Result<(), DbError> {
        if let Some(e) = &*self.error.lock().unwrap_or_else(|e| e.into_inner()) {
            return Err(DbError::io(format!(
                "shard {}: background work failed: {e}",
                self.id
            )));
        }
        if self.closing.load(Ordering::Acquire) {
            return Err(DbError::Closed);
        }
        Ok(())
    }

    fn fail(&self, e: DbError) {
        let mut err = self.error.lock().unwrap_or_else(|e| e.into_inner());
        if err.is_none() {
            *err = Some(e.to_string());
        }
        drop(err);
        self.flush_first.release();
        self.changed.notify_waiters();
    }

    /// Waits until the shard can take a write: switches a full memtable, waits (async) while
    /// too many immutable memtables or L0 tables wait for background work.
    pub async fn make_room(&self) -> Result<(), DbError> {
        // Fast path: room now, and no waiter registered (and unregistered) to learn it.
        let mut room = self.room()?;
        while room == Room::Stalled {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            room = self.room()?;
            if room == Room::Stalled {
                self.write_stalls.fetch_add(1, Ordering::Relaxed);
                self.compact_work.notify_one();
                self.flush_work.notify_one();
                // The loop registers again before it looks: no wake-up is lost.
                changed.await;
            }
        }
        if room == Room::SwitchFirst {
            self.switch_memtable(true).await?;
        }
        Ok(())
    }

    /// Whether a writer may go on now (see [`make_room`](Self::make_room)).
    fn room(&self) -> Result<Room, DbError> {
        self.check()?;
        let st = self.state();
        let (l0, full, imms) = (st.version.l0_count(), self.is_full(&st), st.imms.len());
        Ok(
            if l0 >= L0_STOP_WRITES || (full && imms >= MAX_IMMUTABLE_MEMTABLES) {
                Room::Stalled
            } else if full {
                Room::SwitchFirst
            } else {
                Room::Free
            },
        )
    }

    /// Whether the memtable is full: by memory, or by WAL bytes (a batch spanning shards is
    /// logged whole to each of them, so a shard's WAL can grow faster than its memtable, and
    /// the WAL's room is sized by the write buffer).
    fn is_full(&self, st: &ShardState) -> bool {
        let limit = self.ctx.opts.write_buffer_bytes;
        let mem = st.mem.read().unwrap_or_else(|e| e.into_inner());
        mem.approximate_bytes() >= limit
            || (!mem.is_empty() && self.wal_bytes.load(Ordering::Relaxed) >= limit as u64)
    }

    /// Makes the memtable immutable (if it holds anything; with `only_if_full`, if it is
    /// still full once the gate is taken) and starts a new one; wakes the flush task.
    pub async fn switch_memtable(&self, only_if_full: bool) -> Result<(), DbError> {
        let _g = self.gate.write().await;
        {
            // Writers that saw the memtable full queue here one after another: only the
            // first switches it, the others find a fresh one.
            let st = self.state();
            if st.mem.read().unwrap_or_else(|e| e.into_inner()).is_empty()
                || (only_if_full && !self.is_full(&st))
            {
                return Ok(());
            }
        }
        // Every batch in the memtable is queued for this WAL: wait until it is appended,
        // so the WAL position below is past all of them.
        self.log.barrier().await?;
        let mut st = self.state();
        let mem = std::mem::take(&mut st.mem);
        self.wal_bytes.store(0, Ordering::Relaxed);
        st.imms.push_back(Immutable {
            mem,
            wal_end: self.log.wal_end(),
            last_seq: self.ctx.seq.last_allocated(),
            switched: std::time::Instant::now(),
        });
        self.flush_first.switched(st.imms.len());
        drop(st);
        self.flush_work.notify_one();
        Ok(())
    }

    /// Counts `n` bytes queued for the shard's WAL (a memtable switch comes at
    /// `write_buffer_bytes` of them too).
    pub fn count_wal_bytes(&self, n: usize) {
        self.wal_bytes.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Inserts `ops` (with their sequence numbers) into the memtable. The caller holds
    /// [`gate`](Self::gate) shared and has logged them.
    pub fn insert<'a>(&self, ops: impl Iterator<Item = (u64, &'a Op)>) {
        let mem = self.state().mem.clone();
        let mut m = mem.write().unwrap_or_else(|e| e.into_inner());
        for (seq, op) in ops {
            m.add(&op.key, seq, op.kind, op.value.clone());
        }
    }

    /// Inserts one replayed WAL operation (recovery, before the store runs), unless the
    /// memtable has it already (a batch logged to several shards' WALs is replayed from each).
    /// The caller skips operations the shard's tables hold (sequence at most its manifest's
    /// `last_seq`).
    pub fn replay(&self, seq: u64, op: &Op) {
        let mem = self.state().mem.clone();
        let mut m = mem.write().unwrap_or_else(|e| e.into_inner());
        if ikey_at(&m, &op.key, seq) != Some(seq) {
            m.add(&op.key, seq, op.kind, op.value.clone());
        }
    }

    /// The newest value of `key` at `snapshot` (`None`: read the visible sequence after
    /// taking the tree, see `Db::get`).
    pub async fn get(&self, key: &[u8], snapshot: Option<u64>) -> Result<Option<Bytes>, DbError> {
        let (mem, imms, version) = {
            let st = self.state();
            let imms: Vec<_> = st.imms.iter().rev().map(|i| i.mem.clone()).collect();
            (st.mem.clone(), imms, st.version.clone())
        };
        // Taken after the tree: any flush or compaction that made `version` dropped only
        // versions this sequence cannot see (one installed after the tree was taken left
        // its immutable memtable in `imms`, read whole).
        let snap = snapshot.unwrap_or_else(|| self.ctx.seq.visible());
        let seek = Seek::new(key, snap);
        for m in std::iter::once(&mem).chain(imms.iter()) {
            match m
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .get_at(key, &seek)
            {
                Lookup::Absent => {}
                Lookup::Found(v) => return Ok(Some(v)),
                Lookup::Deleted => return Ok(None),
            }
        }
        Ok(crate::version::lookup_value(version.get(key, &seek).await?))
    }

    /// A merge of everything the shard holds, positioned at the internal key `start`.
    pub async fn merge_iter(&self, start: &[u8]) -> Result<MergeIter, DbError> {
        let (mems, version) = {
            let st = self.state();
            let mut mems = vec![st.mem.clone()];
            mems.extend(st.imms.iter().rev().map(|i| i.mem.clone()));
            (mems, st.version.clone())
        };
        let mut sources = Vec::new();
        for m in mems {
            sources.push(Source::Mem(MemSource::new(m, start)));
        }
        for t in &version.levels[0] {
            // A table wholly before `start` has nothing to give: not even its index is read.
            if !crate::ikey::order(&t.meta.largest, start).is_lt() {
                sources.push(Source::Table(TableSource::new(t.clone(), start).await?));
            }
        }
        for level in 1..version.levels.len() {
            if !version.levels[level].is_empty() {
                let run = LevelSource::in_version(version.clone(), level, start).await?;
                sources.push(Source::Level(run));
            }
        }
        Ok(MergeIter::new(sources))
    }

    /// Switches the memtable and waits until every immutable memtable is flushed.
    pub async fn flush(&self) -> Result<(), DbError> {
        self.switch_memtable(false).await?;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            self.check()?;
            if self.state().imms.is_empty() {
                return Ok(());
            }
            self.flush_work.notify_one();
            changed.await;
        }
    }

    /// Tells the background tasks to stop after their current job (the WAL pump after
    /// appending what is queued); [`stop`](Self::stop) waits for them.
    pub fn begin_stop(&self) {
        self.closing.store(true, Ordering::Release);
        self.flush_first.release();
        self.flush_work.notify_one();
        self.compact_work.notify_one();
        self.log.wake_pump();
        self.changed.notify_waiters();
    }

    /// Stops the background tasks (after their current job) and waits for them.
    pub async fn stop(&self) {
        self.closing.store(true, Ordering::Release);
        self.flush_first.release();
        loop {
            let stopped = self.stopped.notified();
            tokio::pin!(stopped);
            stopped.as_mut().enable();
            if self.running.load(Ordering::Acquire) == 0 {
                break;
            }
            self.flush_work.notify_one();
            self.compact_work.notify_one();
            self.log.wake_pump();
            self.changed.notify_waiters();
            stopped.await;
        }
        self.changed.notify_waiters();
    }

    /// Statistics of the shard.
    pub fn stats(&self) -> ShardStats {
        let st = self.state();
        let levels = st
            .version
            .levels
            .iter()
            .map(|l| (l.len(), l.iter().map(|t| t.meta.size).sum()))
            .collect();
        let mut memtable_bytes = st
            .mem
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .approximate_bytes() as u64;
        for i in &st.imms {
            memtable_bytes += i
                .mem
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .approximate_bytes() as u64;
        }
        ShardStats {
            levels,
            flush_bytes: self.flush_bytes.load(Ordering::Relaxed),
            compaction_read_bytes: self.compaction_read_bytes.load(Ordering::Relaxed),
            compaction_write_bytes: self.compaction_write_bytes.load(Ordering::Relaxed),
            write_stalls: self.write_stalls.load(Ordering::Relaxed),
            compaction_pauses: self.compaction_pauses.load(Ordering::Relaxed),
            memtable_bytes,
        }
    }

    /// The current version.
    pub fn version(&self) -> Arc<Version> {
        self.state().version.clone()
    }

    /// A new file number.
    pub fn new_file_number(&self) -> u64 {
        self.next_file.fetch_add(1, Ordering::AcqRel)
    }

    /// The next unused file number.
    pub fn next_file_number(&self) -> u64 {
        self.next_file.load(Ordering::Acquire)
    }

    /// Writes `edit` to the manifest and installs it: the new version replaces the current
    /// one (with `added`, the opened tables of `edit.added`), `then` runs under the state lock,
    /// and the deleted tables' files go once nobody reads them.
    pub async fn install(
        &self,
        edit: VersionEdit,
        added: Vec<Arc<TableHandle>>,
        then: impl FnOnce(&mut ShardStateAccess<'_>),
    ) -> Result<(), DbError> {
        let _e = self.edit_lock.lock().await;
        self.log.log_edit(&edit).await?;
        let removed: Vec<Arc<TableHandle>> = {
            let mut st = self.state();
            let old = st.version.clone();
            st.version = Arc::new(old.apply(&edit, added)?);
            then(&mut ShardStateAccess(&mut st));
            self.flush_first.set_l0_tables(st.version.l0_count());
            // A moved table is deleted at one level and added at another: its file stays.
            old.all()
                .filter(|t| edit.deleted.contains(&(t.meta.level, t.meta.number)))
                .filter(|t| !edit.added.iter().any(|a| a.number == t.meta.number))
                .cloned()
                .collect()
        };
        for t in removed {
            t.file.mark_obsolete();
        }
        self.changed.notify_waiters();
        self.compact_work.notify_one();
        Ok(())
    }

    /// [`install`](Self::install) for a compaction out of `level` whose inputs ended at
    /// the user key `pointer` (the next compaction of that level starts after it).
    pub async fn install_move(
        &self,
        edit: VersionEdit,
        added: Vec<Arc<TableHandle>>,
        level: usize,
        pointer: Vec<u8>,
    ) -> Result<(), DbError> {
        self.install(edit, added, |st| st.set_compact_pointer(level, pointer))
            .await
    }

    async fn background(self: Arc<Self>, job: Job) {
        let mut end = JobEnd {
            shard: &self,
            job,
            finished: false,
        };
        loop {
            let closing = self.closing.load(Ordering::Acquire);
            let stop = match job {
                // The pump empties the WAL queue before it stops.
                Job::Pump => closing && self.log.is_drained(),
                _ => closing || self.error_set(),
            };
            if stop {
                break;
            }
            let done = match job {
                Job::Pump => self.log.pump_once().await,
                Job::Flush => self.flush_one().await,
                Job::Compact => self.compact_one().await,
            };
            match done {
                Ok(true) => {}
                Ok(false) => match job {
                    Job::Pump if closing => break,
                    Job::Pump => self.log.pump_idle().await,
                    Job::Flush => self.flush_work.notified().await,
                    Job::Compact => self.compact_work.notified().await,
                },
                Err(e) => {
                    self.fail(e);
                    break;
                }
            }
        }
        end.finished = true;
    }

    fn error_set(&self) -> bool {
        self.error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Flushes the oldest immutable memtable; `false` if there was none.
    async fn flush_one(&self) -> Result<bool, DbError> {
        let Some(imm) = self.state().imms.front().cloned() else {
            return Ok(false);
        };
        let started = std::time::Instant::now();
        let number = self.new_file_number();
        let path = table_path(self.id, number);
        let mut w = TableWriter::create(
            &self.ctx.fs,
            path,
            crate::placement::lifetime_of(0),
            self.ctx.table_options(),
        )
        .await?;
        // As a compaction does: a version hidden by a newer one that every reader sees is
        // not written (fillrandom's overwrites made tables a third larger than their data).
        let oldest = self.ctx.snapshots.oldest(&self.ctx.seq);
        let mut src = MemSource::new(imm.mem.clone(), &first_ikey());
        let (mut user_key, mut newer_seq) = (Vec::new(), u64::MAX);
        let mut n = 0u64;
        while src.step() {
            let (uk, seq, _) = ikey::decode(src.key())
                .ok_or_else(|| crate::error::CorruptionError::new("internal key in a flush"))?;
            if newer_seq == u64::MAX || user_key[..] != *uk {
                user_key.clear();
                user_key.extend_from_slice(uk);
                newer_seq = u64::MAX;
            }
            let hidden = newer_seq <= oldest;
            newer_seq = seq;
            // Entries visited, written or not: a memtable of overwrites skips most of them.
            n += 1;
            if n.is_multiple_of(crate::options::BACKGROUND_YIELD_EVERY) {
                // Cooperative: the core also serves foreground I/O and reads.
                ziob::runtime::yield_now().await;
            }
            if hidden {
                continue;
            }
            w.add(src.key(), src.value()).await?;
        }
        let built = started.elapsed();
        let summary = w.finish().await?;
        let synced = started.elapsed();
        let meta = FileMeta {
            number,
            level: 0,
            size: summary.file_bytes,
            entries: summary.entries,
            smallest: Bytes::from(summary.first_key),
            largest: Bytes::from(summary.last_key),
        };
        let t = TableHandle::open(
            &self.ctx.fs,
            &self.ctx.cache,
            &self.ctx.handle,
            self.id,
            self.core,
            meta.clone(),
        )
        .await?;
        // A batch spanning shards is in this memtable only after it was appended to every
        // involved shard's WAL. Once this table is in the manifest the batch's operations
        // here are durable, so the rest of it must be too: sync every WAL first (else a
        // crash could keep this shard's part and lose another's unsynced tail).
        if self.ctx.logs.len() > 1 {
            futures::future::try_join_all(self.ctx.logs.iter().map(|l| l.sync())).await?;
        }
        let edit = VersionEdit {
            added: vec![meta],
            deleted: vec![],
            wal_start: Some(imm.wal_end),
            next_file_number: Some(self.next_file_number()),
            last_seq: Some(imm.last_seq),
        };
        let flushed = &self.flush_bytes;
        let flush_first = &self.flush_first;
        self.install(edit, vec![Arc::new(t)], |st| {
            st.0.imms.pop_front();
            flush_first.flushed(st.0.imms.len());
            // Counted with the switch, before waiters wake: a `flush` that returned sees its
            // bytes (counted after `install`, a caller on another thread could read the
            // stats first — `db_scan::flush_leaves_out_hidden_versions` once did).
            flushed.fetch_add(summary.file_bytes, Ordering::Relaxed);
        })
        .await?;
        self.log.truncate_before(imm.wal_end).await?;
        drop(src);
        retire_memtable(imm.mem);
        tracing::debug!(
            shard = self.id,
            table = number,
            bytes = summary.file_bytes,
            queued_ms = started.duration_since(imm.switched).as_secs_f64() * 1e3,
            build_ms = built.as_secs_f64() * 1e3,
            sync_ms = (synced - built).as_secs_f64() * 1e3,
            ms = started.elapsed().as_secs_f64() * 1e3,
            "flushed a memtable"
        );
        Ok(true)
    }

    /// Runs one compaction if one is due; `false` if none was.
    async fn compact_one(&self) -> Result<bool, DbError> {
        let pick = {
            let st = self.state();
            compaction::pick(&st.version, &self.ctx.opts, &st.compact_pointer)
        };
        let Some(c) = pick else { return Ok(false) };
        let started = std::time::Instant::now();
        let (level, inputs, overlaps) = (c.level, c.inputs.len(), c.overlaps.len());
        let out = compaction::run(
            &self.ctx,
            self.id,
            self.core,
            &|| self.new_file_number(),
            &self.flush_first,
            c,
        )
        .await?;
        let mut edit = out.edit;
        edit.next_file_number = Some(self.next_file_number());
        // Counted before the new version wakes anyone (as a flush's bytes): the bytes were
        // read and written whether or not the install succeeds.
        self.compaction_read_bytes
            .fetch_add(out.read_bytes, Ordering::Relaxed);
        self.compaction_write_bytes
            .fetch_add(out.written_bytes, Ordering::Relaxed);
        self.compaction_pauses
            .fetch_add(out.pauses, Ordering::Relaxed);
        self.install_move(edit, out.added, out.level, out.pointer)
            .await?;
        tracing::debug!(
            shard = self.id,
            level,
            inputs,
            overlaps,
            read = out.read_bytes,
            written = out.written_bytes,
            pauses = out.pauses,
            ms = started.elapsed().as_secs_f64() * 1e3,
            "compacted"
        );
        Ok(true)
    }
}

/// What [`Shard::install`]'s callback may change under the state lock.
pub struct ShardStateAccess<'a>(&'a mut ShardState);

impl ShardStateAccess<'_> {
    /// Records that a table ending at `key` was compacted out of `level`.
    pub fn set_compact_pointer(&mut self, level: usize, key: Vec<u8>) {
        self.0.compact_pointer[level] = key;
    }
}

#[derive(Debug, Clone, Copy)]
enum Job {
    /// Appends the queued WAL payloads.
    Pump,
    Flush,
    Compact,
}

/// The shard of `key` among `shards`: `xxh3(key) % shards`.
pub fn shard_of(key: &[u8], shards: usize) -> usize {
    (xxhash_rust::xxh3::xxh3_64(key) % shards as u64) as usize
}

/// The sequence number of the entry a snapshot at `seq` finds for `key` (None: none).
fn ikey_at(m: &Memtable, key: &[u8], seq: u64) -> Option<u64> {
    let from = ikey::seek_key(key, seq);
    let (k, _) = m.iter_from(&from).next()?;
    let (uk, s, _) = ikey::decode(k)?;
    (uk == key).then_some(s)
}

/// Gives back a background job's share of [`Shard::running`] however the job's future ends:
/// normally, by a panic (which the runtime catches) or dropped unfinished when its core shuts
/// down. An end that is not normal fails the shard, so stalled writers, `flush` and `close`
/// get an error instead of waiting for a job that is gone.
struct JobEnd<'a> {
    shard: &'a Shard,
    job: Job,
    finished: bool,
}

impl Drop for JobEnd<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.shard.fail(DbError::io(format!(
                "shard {}: its {:?} job stopped unfinished (it panicked, or its core shut down)",
                self.shard.id, self.job
            )));
        }
        self.shard.running.fetch_sub(1, Ordering::AcqRel);
        self.shard.stopped.notify_waiters();
    }
}

/// Frees a flushed memtable on the flush's core (the shard's background core) in a background task of its own, a little
/// at a time. Without this the last reader to let go of it (a `get` that took it just
/// before the flush installed its table) freed all of it inside that `get`: in
/// readwhilewriting at 1,000,000 keys three quarters of the reader's time went to freeing
/// memtables. While the task holds its reference no reader is the last. While a reader or
/// an open scan still holds one, it looks again after 1 ms, doubling up to 128 ms (a scan
/// may stay open for long, so the flush does not wait for it). If the core stops meanwhile
/// (the task is dropped, or its timer fails) whoever lets go last frees the memtable.
fn retire_memtable(mem: Arc<RwLock<Memtable>>) {
    ziob::runtime::spawn_background(async move {
        let mut mem = mem;
        let mut pause = std::time::Duration::from_millis(1);
        let table = loop {
            match Arc::try_unwrap(mem) {
                Ok(lock) => break lock.into_inner().unwrap_or_else(|e| e.into_inner()),
                Err(shared) => {
                    mem = shared;
                    if ziob::runtime::sleep(pause).await.is_err() {
                        return;
                    }
                    pause = (pause * 2).min(std::time::Duration::from_millis(128));
                }
            }
        };
        table
            .free_gradually(crate::options::MEMTABLE_FREE_PER_YIELD)
            .await;
    })
    .detach();
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::Context;

    use bytes::Bytes;

    use crate::batch::WriteBatch;
    use crate::options::Options;

    /// Two writers that both saw the memtable full and wait for the gate: the first
    /// switches it; the second, finding a fresh memtable with an entry in it, leaves it (it
    /// used to switch it too: a one-entry memtable, a tiny L0 table, a stall sooner).
    #[test]
    fn writers_that_saw_the_memtable_full_switch_it_once() {
        let rt = ziob::Runtime::builder().cores(1).build().unwrap();
        futures::executor::block_on(async {
            let opts = Options {
                shards: 1,
                write_buffer_bytes: 4096,
                ..Options::default()
            };
            let (shards, _ctx, store) =
                crate::open::open(rt.handle(), "mem:zones=16,zone_size=1M", opts)
                    .await
                    .unwrap();
            let s = shards[0].clone();
            let mut b = WriteBatch::new();
            for i in 0..64u32 {
                b.put(Bytes::from(i.to_be_bytes().to_vec()), vec![0u8; 100])
                    .unwrap();
            }
            s.insert(b.ops().iter().enumerate().map(|(j, op)| (j as u64 + 1, op)));
            {
                let writer = s.gate.read().await;
                let waker = futures::task::noop_waker();
                let mut cx = Context::from_waker(&waker);
                let mut a = pin!(s.make_room());
                let mut c = pin!(s.make_room());
                assert!(a.as_mut().poll(&mut cx).is_pending());
                assert!(c.as_mut().poll(&mut cx).is_pending());
                drop(writer);
                a.await.unwrap();
                assert_eq!(s.state().imms.len(), 1);
                let mut one = WriteBatch::new();
                one.put(&b"late"[..], &b"v"[..]).unwrap();
                s.insert(one.ops().iter().map(|op| (100, op)));
                c.await.unwrap();
            }
            assert_eq!(
                s.state().imms.len(),
                1,
                "a memtable of one entry was switched"
            );
            drop((s, shards));
            store.close().await.unwrap();
        });
    }
}
