//! Iterators: a [`MergeIter`] over a shard's memtables and tables in internal-key order (an
//! internal key met in several sources — a batch replayed into a memtable after its flush —
//! counts once), a [`ShardIter`] on top that shows what a snapshot sees (the newest version
//! at most the snapshot, no deletions) within bounds, and [`Scan`], which merges the shards'
//! iterators in key order.

use std::collections::VecDeque;
use std::sync::{Arc, RwLock};

use bytes::Bytes;

use crate::db_error::DbError;
use crate::error::CorruptionError;
use crate::ikey::{self, Kind};
use crate::memtable::Memtable;
use crate::sst::table::Cursor;
use crate::version::{TableHandle, Version};

/// An internal key and its value.
pub type Entry = (Vec<u8>, Bytes);

/// The smallest internal key (where a whole-table iteration starts).
pub fn first_ikey() -> Vec<u8> {
    ikey::seek_key(b"", ikey::MAX_SEQ)
}

/// Most entries copied out of a memtable per lock (the lock is never held across an await).
const MEM_CHUNK: usize = 256;
/// Entries copied by a source's first lock: a seek needs one entry of each source, a scan
/// goes on to chunks twice as large each time, up to [`MEM_CHUNK`].
const MEM_FIRST_CHUNK: usize = 2;

/// A memtable's entries from a start key, read in chunks under its lock.
#[derive(Debug)]
pub struct MemSource {
    mem: Arc<RwLock<Memtable>>,
    buf: VecDeque<Entry>,
    /// The last internal key taken (the next chunk starts after it), or the start.
    from: Vec<u8>,
    /// Whether `from` was already returned (skip it when met again).
    from_taken: bool,
    done: bool,
    /// Entries the next lock copies.
    chunk: usize,
}

impl MemSource {
    /// Entries of `mem` at or after the internal key `start`.
    pub fn new(mem: Arc<RwLock<Memtable>>, start: &[u8]) -> MemSource {
        MemSource {
            mem,
            buf: VecDeque::new(),
            from: start.to_vec(),
            from_taken: false,
            done: false,
            chunk: MEM_FIRST_CHUNK,
        }
    }

    /// The next entry, or `None` at the end.
    pub fn next_entry(&mut self) -> Option<Entry> {
        if self.buf.is_empty() && !self.done {
            let chunk = self.chunk;
            self.chunk = (chunk * 2).min(MEM_CHUNK);
            let m = self.mem.read().unwrap_or_else(|e| e.into_inner());
            for (k, v) in m.iter_from(&self.from) {
                if self.from_taken && k == &self.from[..] {
                    continue;
                }
                self.buf.push_back((k.to_vec(), v.clone()));
                if self.buf.len() >= chunk {
                    break;
                }
            }
            if self.buf.len() < chunk {
                self.done = true;
            }
        }
        let e = self.buf.pop_front()?;
        if self.buf.is_empty() {
            self.from.clone_from(&e.0);
            self.from_taken = true;
        }
        Some(e)
    }
}

/// One table's entries from a start key.
#[derive(Debug)]
pub struct TableSource {
    table: Arc<TableHandle>,
    cursor: Cursor,
}

impl TableSource {
    /// Entries of `table` at or after the internal key `start`.
    pub async fn new(table: Arc<TableHandle>, start: &[u8]) -> Result<TableSource, DbError> {
        let cursor = table.table().cursor_from(start).await?;
        Ok(TableSource { table, cursor })
    }

    async fn next(&mut self) -> Result<Option<Entry>, DbError> {
        Ok(self.table.table().cursor_next(&mut self.cursor).await?)
    }
}

/// The tables of a sorted run: owned, or a level of a shared version (a seek copies no
/// table list).
#[derive(Debug)]
enum Run {
    Owned(Vec<Arc<TableHandle>>),
    Level(Arc<Version>, usize),
}

impl Run {
    fn tables(&self) -> &[Arc<TableHandle>] {
        match self {
            Run::Owned(t) => t,
            Run::Level(v, level) => &v.levels[*level],
        }
    }
}

/// The entries of a sorted run of non-overlapping tables (a level ≥ 1): positioned by a
/// binary search over the tables' largest keys, it opens only the table that may hold the
/// start key, and each next table when the previous one ends.
#[derive(Debug)]
pub struct LevelSource {
    tables: Run,
    next_table: usize,
    current: Option<TableSource>,
}

impl LevelSource {
    /// Entries of the run `tables` (sorted by key) at or after the internal key `start`.
    pub async fn new(tables: Vec<Arc<TableHandle>>, start: &[u8]) -> Result<LevelSource, DbError> {
        Self::on(Run::Owned(tables), start).await
    }

    /// Entries of level `level` (≥ 1) of `version` at or after the internal key `start`.
    pub async fn in_version(
        version: Arc<Version>,
        level: usize,
        start: &[u8],
    ) -> Result<LevelSource, DbError> {
        Self::on(Run::Level(version, level), start).await
    }

    async fn on(tables: Run, start: &[u8]) -> Result<LevelSource, DbError> {
        let run = tables.tables();
        let first = run.partition_point(|t| ikey::order(&t.meta.largest, start).is_lt());
        let current = match run.get(first) {
            Some(t) => Some(TableSource::new(t.clone(), start).await?),
            None => None,
        };
        Ok(LevelSource {
            tables,
            next_table: first + 1,
            current,
        })
    }

    async fn next(&mut self) -> Result<Option<Entry>, DbError> {
        loop {
            if let Some(cur) = &mut self.current {
                if let Some(e) = cur.next().await? {
                    return Ok(Some(e));
                }
            }
            match self.tables.tables().get(self.next_table) {
                None => {
                    self.current = None;
                    return Ok(None);
                }
                Some(t) => {
                    self.current = Some(TableSource::new(t.clone(), &first_ikey()).await?);
                    self.next_table += 1;
                }
            }
        }
    }
}

/// A source of entries in internal-key order.
#[derive(Debug)]
pub enum Source {
    /// A memtable.
    Mem(MemSource),
    /// One table.
    Table(TableSource),
    /// A level's sorted run of tables.
    Level(LevelSource),
}

impl Source {
    async fn next(&mut self) -> Result<Option<Entry>, DbError> {
        match self {
            Source::Mem(m) => Ok(m.next_entry()),
            Source::Table(t) => t.next().await,
            Source::Level(l) => l.next().await,
        }
    }
}

/// Entries of several sources in internal-key order; an internal key in several sources is
/// returned once (the same key always has the same value: sequence numbers are unique).
///
/// Cancel-safe: a source is moved on only at the start of the next call (`stale`), so a
/// call dropped at an await loses no entry.
#[derive(Debug)]
pub struct MergeIter {
    sources: Vec<Source>,
    heads: Vec<Option<Entry>>,
    /// The head of each source was taken (or never read): read it before merging.
    stale: Vec<bool>,
}

impl MergeIter {
    /// Merges `sources` (each already positioned).
    pub fn new(sources: Vec<Source>) -> MergeIter {
        let n = sources.len();
        MergeIter {
            sources,
            heads: vec![None; n],
            stale: vec![true; n],
        }
    }

    /// The next entry, or `None` at the end.
    pub async fn next(&mut self) -> Result<Option<Entry>, DbError> {
        for i in 0..self.sources.len() {
            if self.stale[i] {
                self.heads[i] = self.sources[i].next().await?;
                self.stale[i] = false;
            }
        }
        let mut min: Option<usize> = None;
        for (i, h) in self.heads.iter().enumerate() {
            if let Some((k, _)) = h {
                match min {
                    Some(m) if !ikey::order(k, &self.heads[m].as_ref().unwrap().0).is_lt() => {}
                    _ => min = Some(i),
                }
            }
        }
        let Some(m) = min else { return Ok(None) };
        let entry = self.heads[m].take().unwrap();
        self.stale[m] = true;
        // The same internal key in other sources is the same entry (a source's keys are
        // unique, so its next one is past it).
        for i in 0..self.heads.len() {
            if self.heads[i].as_ref().is_some_and(|(k, _)| *k == entry.0) {
                self.heads[i] = None;
                self.stale[i] = true;
            }
        }
        Ok(Some(entry))
    }
}

/// What a snapshot sees of one shard: user keys in order, each with its newest value at most
/// the snapshot, deleted keys left out, up to an exclusive end key.
#[derive(Debug)]
pub struct ShardIter {
    merge: MergeIter,
    snapshot: u64,
    end: Option<Vec<u8>>,
    /// The user key last met (reused: no allocation per entry), valid when `has_last`.
    last_key: Vec<u8>,
    has_last: bool,
    done: bool,
}

impl ShardIter {
    /// Over `merge` (positioned at the start key) at `snapshot`, ending before `end`.
    pub fn new(merge: MergeIter, snapshot: u64, end: Option<Vec<u8>>) -> ShardIter {
        ShardIter {
            merge,
            snapshot,
            end,
            last_key: Vec::new(),
            has_last: false,
            done: false,
        }
    }

    /// The next visible `(key, value)`, or `None` at the end.
    pub async fn next(&mut self) -> Result<Option<(Bytes, Bytes)>, DbError> {
        while !self.done {
            let Some((mut k, v)) = self.merge.next().await? else {
                self.done = true;
                break;
            };
            let (uk, seq, kind) = ikey::decode(&k)
                .ok_or_else(|| CorruptionError::new("internal key during a scan"))?;
            if seq > self.snapshot || (self.has_last && self.last_key[..] == *uk) {
                continue;
            }
            if self.end.as_deref().is_some_and(|e| uk >= e) {
                self.done = true;
                break;
            }
            self.last_key.clear();
            self.last_key.extend_from_slice(uk);
            self.has_last = true;
            if kind == Kind::Put {
                // The internal key's own buffer becomes the user key (no copy).
                let len = uk.len();
                debug_assert_eq!(&k[..len], &self.last_key[..]);
                k.truncate(len);
                return Ok(Some((Bytes::from(k), v)));
            }
        }
        Ok(None)
    }
}

/// A range scan over the whole store: the shards' visible keys merged in key order (a key
/// lives in exactly one shard). Holds its snapshot and the tables it reads until dropped.
/// Dropping a [`next`](Scan::next) future at any await loses nothing: the next call goes on
/// from the same place.
#[derive(Debug)]
pub struct Scan {
    shards: Vec<ShardIter>,
    heads: Vec<Option<(Bytes, Bytes)>>,
    /// The head of each shard was taken (or never read): read it before merging.
    stale: Vec<bool>,
    /// Keeps the snapshot registered while the scan runs.
    _snapshot: Option<crate::snapshot::Snapshot>,
}

impl Scan {
    /// Merges the shard iterators `shards`; `snapshot` stays registered until the scan ends.
    pub fn new(shards: Vec<ShardIter>, snapshot: Option<crate::snapshot::Snapshot>) -> Scan {
        let n = shards.len();
        Scan {
            shards,
            heads: vec![None; n],
            stale: vec![true; n],
            _snapshot: snapshot,
        }
    }

    /// The next `(key, value)` in key order, or `None` at the end.
    pub async fn next(&mut self) -> Result<Option<(Bytes, Bytes)>, DbError> {
        for i in 0..self.shards.len() {
            if self.stale[i] {
                self.heads[i] = self.shards[i].next().await?;
                self.stale[i] = false;
            }
        }
        let mut min: Option<usize> = None;
        for (i, h) in self.heads.iter().enumerate() {
            if let Some((k, _)) = h {
                if min.is_none_or(|m| *k < self.heads[m].as_ref().unwrap().0) {
                    min = Some(i);
                }
            }
        }
        let Some(m) = min else { return Ok(None) };
        self.stale[m] = true;
        Ok(self.heads[m].take())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// A memtable source (chunks growing from 2 to 256 entries) yields exactly the
        /// memtable's entries from the start key, in order, each once, also when entries
        /// are added between two reads (a source sees an added entry after its position or
        /// not at all, never out of order or twice).
        #[test]
        fn mem_source_is_the_memtable_from_start(
            keys in proptest::collection::btree_set((0u16..600, 1u64..4), 0..700),
            later in proptest::collection::vec(0u16..600, 0..50),
            start in 0u16..650,
            add_every in 1usize..40,
        ) {
            let mut m = Memtable::new();
            for (k, s) in &keys {
                m.add(&k.to_be_bytes(), *s, Kind::Put, Bytes::from(vec![*s as u8]));
            }
            let mem = Arc::new(RwLock::new(m));
            let from = ikey::seek_key(&start.to_be_bytes(), ikey::MAX_SEQ);
            let mut src = MemSource::new(mem.clone(), &from);
            let mut got: Vec<Entry> = Vec::new();
            let mut later = later.into_iter().enumerate();
            while let Some(e) = src.next_entry() {
                got.push(e);
                if got.len() % add_every == 0 {
                    if let Some((i, k)) = later.next() {
                        let mut m = mem.write().unwrap();
                        m.add(&k.to_be_bytes(), 10 + i as u64, Kind::Put, Bytes::from(vec![1]));
                    }
                }
            }
            // Strictly increasing, at or after the start.
            for w in got.windows(2) {
                prop_assert!(ikey::order(&w[0].0, &w[1].0).is_lt());
            }
            if let Some(first) = got.first() {
                prop_assert!(!ikey::order(&first.0, &from).is_lt());
            }
            // Every entry there from the beginning is returned, with its value.
            let m = mem.read().unwrap();
            let expected: Vec<Entry> = m
                .iter_from(&from)
                .filter(|(k, _)| ikey::decode(k).unwrap().1 < 10)
                .map(|(k, v)| (k.to_vec(), v.clone()))
                .collect();
            let got_old: Vec<Entry> = got
                .iter()
                .filter(|(k, _)| ikey::decode(k).unwrap().1 < 10)
                .cloned()
                .collect();
            prop_assert_eq!(got_old, expected);
            // Whatever else it returned is in the memtable.
            for (k, v) in &got {
                let found = m.iter_from(k).next().map(|(k2, v2)| (k2.to_vec(), v2.clone()));
                prop_assert_eq!(found, Some((k.clone(), v.clone())));
            }
        }
    }
}
