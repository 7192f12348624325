//! Iterators: a [`MergeIter`] over a shard's memtables and tables in internal-key order (an
//! internal key met in several sources — a batch replayed into a memtable after its flush —
//! counts once), a [`ShardIter`] on top that shows what a snapshot sees (the newest version
//! at most the snapshot, no deletions) within bounds, and [`Scan`], which merges the shards'
//! iterators in key order.
//!
//! Every level steps in place: `step` moves to the next entry, `key`/`value` lend it until
//! the next `step`. No entry is copied on the way up (a table's key is rebuilt in its block
//! iterator's buffer, a memtable's chunk keeps its keys in one buffer), so a scan allocates
//! nothing per entry. A `step` dropped at an await loses nothing: each level moves a source
//! on only at the start of the next `step` (`stale`), and a source's own step is cancel-safe.

use std::sync::{Arc, RwLock};

use bytes::Bytes;

use crate::db_error::DbError;
use crate::error::CorruptionError;
use crate::ikey::{self, Kind};
use crate::memtable::{Memtable, Seek};
use crate::sst::table::{Cursor, CursorUse};
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

/// A memtable's entries from a start key, read in chunks under its lock; a chunk's keys sit
/// back to back in one buffer.
#[derive(Debug)]
pub struct MemSource {
    mem: Arc<RwLock<Memtable>>,
    /// The chunk's keys, back to back.
    keys: Vec<u8>,
    /// The chunk's entries: where each key ends in `keys`, and its value.
    entries: Vec<(usize, Bytes)>,
    /// The current entry's index in `entries` (`entries.len()`: none yet).
    pos: usize,
    /// Where the next chunk starts: the last internal key taken, or the start.
    from: Seek,
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
            keys: Vec::new(),
            entries: Vec::new(),
            pos: 0,
            from: Seek::at(start),
            from_taken: false,
            done: false,
            chunk: MEM_FIRST_CHUNK,
        }
    }

    /// Moves to the next entry; `false` at the end.
    pub fn step(&mut self) -> bool {
        if self.pos + 1 < self.entries.len() {
            self.pos += 1;
            return true;
        }
        if self.done {
            self.pos = self.entries.len();
            return false;
        }
        if !self.entries.is_empty() {
            let n = self.entries.len();
            let start = if n == 1 { 0 } else { self.entries[n - 2].0 };
            self.from.set(&self.keys[start..self.entries[n - 1].0]);
            self.from_taken = true;
        }
        self.keys.clear();
        self.entries.clear();
        self.pos = 0;
        let chunk = self.chunk;
        self.chunk = (chunk * 2).min(MEM_CHUNK);
        // Room for a chunk of keys like the last one (no growth while the lock is held).
        self.keys
            .reserve(chunk * self.from.as_bytes().len().max(24));
        self.entries.reserve(chunk);
        let m = self.mem.read().unwrap_or_else(|e| e.into_inner());
        for (k, v) in m.iter_at(&self.from) {
            if self.from_taken && k == self.from.as_bytes() {
                continue;
            }
            self.keys.extend_from_slice(k);
            self.entries.push((self.keys.len(), v.clone()));
            if self.entries.len() >= chunk {
                break;
            }
        }
        drop(m);
        if self.entries.len() < chunk {
            self.done = true;
        }
        !self.entries.is_empty()
    }

    fn at(&self, i: usize) -> (&[u8], &Bytes) {
        let start = if i == 0 { 0 } else { self.entries[i - 1].0 };
        let (end, v) = &self.entries[i];
        (&self.keys[start..*end], v)
    }

    /// The current entry's internal key (after a [`step`](Self::step) that gave `true`).
    pub fn key(&self) -> &[u8] {
        self.at(self.pos).0
    }

    /// The current entry's value.
    pub fn value(&self) -> &Bytes {
        self.at(self.pos).1
    }

    /// The next entry, or `None` at the end.
    pub fn next_entry(&mut self) -> Option<Entry> {
        self.step()
            .then(|| (self.key().to_vec(), self.value().clone()))
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
        Self::for_use(table, start, CursorUse::Lookup).await
    }

    /// [`TableSource::new`] for `reader` (a compaction reads differently, see [`CursorUse`]).
    pub async fn for_use(
        table: Arc<TableHandle>,
        start: &[u8],
        reader: CursorUse,
    ) -> Result<TableSource, DbError> {
        let cursor = table.table().cursor_for(start, reader).await?;
        Ok(TableSource { table, cursor })
    }

    async fn step(&mut self) -> Result<bool, DbError> {
        Ok(self.table.table().cursor_step(&mut self.cursor).await?)
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
    /// How its tables are read.
    reader: CursorUse,
}

impl LevelSource {
    /// Entries of the run `tables` (sorted by key) at or after the internal key `start`,
    /// read for `reader`.
    pub async fn new(
        tables: Vec<Arc<TableHandle>>,
        start: &[u8],
        reader: CursorUse,
    ) -> Result<LevelSource, DbError> {
        Self::on(Run::Owned(tables), start, reader).await
    }

    /// Entries of level `level` (≥ 1) of `version` at or after the internal key `start`.
    pub async fn in_version(
        version: Arc<Version>,
        level: usize,
        start: &[u8],
    ) -> Result<LevelSource, DbError> {
        Self::on(Run::Level(version, level), start, CursorUse::Lookup).await
    }

    async fn on(tables: Run, start: &[u8], reader: CursorUse) -> Result<LevelSource, DbError> {
        let run = tables.tables();
        let first = run.partition_point(|t| ikey::order(&t.meta.largest, start).is_lt());
        let current = match run.get(first) {
            Some(t) => Some(TableSource::for_use(t.clone(), start, reader).await?),
            None => None,
        };
        Ok(LevelSource {
            tables,
            next_table: first + 1,
            current,
            reader,
        })
    }

    /// Cancel-safe: dropped while the next table opens, the current (ended) table stays,
    /// and the next call opens the same next table.
    async fn step(&mut self) -> Result<bool, DbError> {
        loop {
            if let Some(cur) = &mut self.current {
                if cur.step().await? {
                    return Ok(true);
                }
            }
            match self.tables.tables().get(self.next_table) {
                None => return Ok(false),
                Some(t) => {
                    self.current =
                        Some(TableSource::for_use(t.clone(), &first_ikey(), self.reader).await?);
                    self.next_table += 1;
                }
            }
        }
    }

    fn cursor(&self) -> &Cursor {
        &self
            .current
            .as_ref()
            .expect("a level source with an entry has a table")
            .cursor
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
    /// Moves to the next entry; `false` at the end.
    async fn step(&mut self) -> Result<bool, DbError> {
        match self {
            Source::Mem(m) => Ok(m.step()),
            Source::Table(t) => t.step().await,
            Source::Level(l) => l.step().await,
        }
    }

    fn key(&self) -> &[u8] {
        match self {
            Source::Mem(m) => m.key(),
            Source::Table(t) => t.cursor.key(),
            Source::Level(l) => l.cursor().key(),
        }
    }

    fn value(&self) -> &[u8] {
        match self {
            Source::Mem(m) => m.value(),
            Source::Table(t) => t.cursor.value(),
            Source::Level(l) => l.cursor().value(),
        }
    }

    fn value_bytes(&self) -> Bytes {
        match self {
            Source::Mem(m) => m.value().clone(),
            Source::Table(t) => t.cursor.value_bytes(),
            Source::Level(l) => l.cursor().value_bytes(),
        }
    }
}

/// Entries of several sources in internal-key order; an internal key in several sources is
/// returned once (the same key always has the same value: sequence numbers are unique).
///
/// Cancel-safe: a source is moved on only at the start of the next [`step`](Self::step)
/// (`stale`), so a step dropped at an await loses no entry.
#[derive(Debug)]
pub struct MergeIter {
    sources: Vec<Source>,
    /// Whether each source has a current entry (read when not stale).
    valid: Vec<bool>,
    /// The source's current entry was taken (or never read): step it before merging.
    stale: Vec<bool>,
    /// The source whose entry is the current one.
    cur: Option<usize>,
}

impl MergeIter {
    /// Merges `sources` (each already positioned).
    pub fn new(sources: Vec<Source>) -> MergeIter {
        let n = sources.len();
        MergeIter {
            sources,
            valid: vec![false; n],
            stale: vec![true; n],
            cur: None,
        }
    }

    /// Moves to the next entry; `false` at the end.
    pub async fn step(&mut self) -> Result<bool, DbError> {
        self.cur = None;
        for i in 0..self.sources.len() {
            if self.stale[i] {
                self.valid[i] = self.sources[i].step().await?;
                self.stale[i] = false;
            }
        }
        let mut min: Option<usize> = None;
        for (i, s) in self.sources.iter().enumerate() {
            if self.valid[i] {
                match min {
                    Some(m) if !ikey::order(s.key(), self.sources[m].key()).is_lt() => {}
                    _ => min = Some(i),
                }
            }
        }
        let Some(m) = min else { return Ok(false) };
        self.stale[m] = true;
        // The same internal key in other sources is the same entry (a source's keys are
        // unique, so its next one is past it).
        if self.sources.len() > 1 {
            let key = self.sources[m].key();
            for (i, s) in self.sources.iter().enumerate() {
                if i != m && self.valid[i] && !self.stale[i] && s.key() == key {
                    self.stale[i] = true;
                }
            }
        }
        self.cur = Some(m);
        Ok(true)
    }

    fn current(&self) -> &Source {
        &self.sources[self.cur.expect("a merge iterator at an entry")]
    }

    /// The current entry's internal key (after a [`step`](Self::step) that gave `true`).
    pub fn key(&self) -> &[u8] {
        self.current().key()
    }

    /// The current entry's value.
    pub fn value(&self) -> &[u8] {
        self.current().value()
    }

    /// The current entry's value as shared bytes (no copy).
    pub fn value_bytes(&self) -> Bytes {
        self.current().value_bytes()
    }

    /// The next entry, or `None` at the end.
    pub async fn next(&mut self) -> Result<Option<Entry>, DbError> {
        Ok(if self.step().await? {
            Some((self.key().to_vec(), self.value_bytes()))
        } else {
            None
        })
    }
}

/// What a snapshot sees of one shard: user keys in order, each with its newest value at most
/// the snapshot, deleted keys left out, up to an exclusive end key.
#[derive(Debug)]
pub struct ShardIter {
    merge: MergeIter,
    snapshot: u64,
    end: Option<Vec<u8>>,
    /// The user key last met (reused: no allocation per entry), valid when `has_last`; the
    /// current entry's key when `at_entry`.
    last_key: Vec<u8>,
    has_last: bool,
    at_entry: bool,
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
            at_entry: false,
            done: false,
        }
    }

    /// Moves to the next visible entry; `false` at the end.
    pub async fn step(&mut self) -> Result<bool, DbError> {
        self.at_entry = false;
        while !self.done {
            if !self.merge.step().await? {
                self.done = true;
                break;
            }
            let (uk, seq, kind) = ikey::decode(self.merge.key())
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
                self.at_entry = true;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The current entry's user key (after a [`step`](Self::step) that gave `true`).
    pub fn key(&self) -> &[u8] {
        &self.last_key
    }

    /// The current entry's value.
    pub fn value(&self) -> &[u8] {
        self.merge.value()
    }

    /// The current entry's value as shared bytes (no copy).
    pub fn value_bytes(&self) -> Bytes {
        self.merge.value_bytes()
    }

    /// The next visible `(key, value)`, or `None` at the end.
    pub async fn next(&mut self) -> Result<Option<(Bytes, Bytes)>, DbError> {
        Ok(if self.step().await? {
            Some((Bytes::copy_from_slice(self.key()), self.value_bytes()))
        } else {
            None
        })
    }
}

/// A range scan over the whole store: the shards' visible keys merged in key order (a key
/// lives in exactly one shard). Holds its snapshot and the tables it reads until dropped.
/// Dropping a [`step`](Scan::step) or [`next`](Scan::next) future at any await loses
/// nothing: the next call goes on from the same place.
///
/// [`step`](Scan::step) with [`current`](Scan::current) reads the entries in place (no
/// allocation per entry); [`next`](Scan::next) hands each one out as owned bytes.
#[derive(Debug)]
pub struct Scan {
    shards: Vec<ShardIter>,
    /// Whether each shard has a current entry (read when not stale).
    valid: Vec<bool>,
    /// The shard's current entry was taken (or never read): step it before merging.
    stale: Vec<bool>,
    /// The shard whose entry is the current one.
    cur: Option<usize>,
    /// Keeps the snapshot registered while the scan runs.
    _snapshot: Option<crate::snapshot::Snapshot>,
}

impl Scan {
    /// Merges the shard iterators `shards`; `snapshot` stays registered until the scan ends.
    pub fn new(shards: Vec<ShardIter>, snapshot: Option<crate::snapshot::Snapshot>) -> Scan {
        let n = shards.len();
        Scan {
            shards,
            valid: vec![false; n],
            stale: vec![true; n],
            cur: None,
            _snapshot: snapshot,
        }
    }

    /// Moves to the next `(key, value)` in key order: `true` if there is one (then
    /// [`current`](Self::current) lends it until the next step), `false` at the end.
    pub async fn step(&mut self) -> Result<bool, DbError> {
        self.cur = None;
        for i in 0..self.shards.len() {
            if self.stale[i] {
                self.valid[i] = self.shards[i].step().await?;
                self.stale[i] = false;
            }
        }
        let mut min: Option<usize> = None;
        for (i, s) in self.shards.iter().enumerate() {
            if self.valid[i] && min.is_none_or(|m| s.key() < self.shards[m].key()) {
                min = Some(i);
            }
        }
        let Some(m) = min else { return Ok(false) };
        self.stale[m] = true;
        self.cur = Some(m);
        Ok(true)
    }

    /// The entry the last [`step`](Self::step) moved to: `(key, value)`; `None` before the
    /// first step, at the end, or after a step that failed or was dropped.
    pub fn current(&self) -> Option<(&[u8], &[u8])> {
        let s = &self.shards[self.cur?];
        Some((s.key(), s.value()))
    }

    /// The next `(key, value)` in key order, or `None` at the end.
    pub async fn next(&mut self) -> Result<Option<(Bytes, Bytes)>, DbError> {
        Ok(if self.step().await? {
            let s = &self.shards[self.cur.expect("stepped to an entry")];
            Some((Bytes::copy_from_slice(s.key()), s.value_bytes()))
        } else {
            None
        })
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
                if got.len().is_multiple_of(add_every) {
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
