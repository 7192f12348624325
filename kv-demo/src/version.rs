//! A shard's tables: per level, the open [`TableHandle`]s, in an immutable [`Version`]. A
//! flush or compaction makes a new version by applying a [`VersionEdit`]; readers keep the
//! `Arc<Version>` they started with, so a table stays readable while anyone holds it, and its
//! file is deleted once it has left the current version and nobody holds it any more.

use std::cmp::Ordering;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::Arc;

use bytes::Bytes;
use ziob_zonefs::ZoneFs;

use crate::db_error::DbError;
use crate::ikey::{self, Kind};
use crate::memtable::{Lookup, Seek};
use crate::options::LEVELS;
use crate::sst::cache::BlockCache;
use crate::sst::table::Table;
use crate::table_file::ZoneFile;
use crate::version_edit::{FileMeta, VersionEdit};

pub use crate::store::table_path;

/// The block-cache id of a table: shard and file number (never reused) together.
pub fn cache_id(shard: usize, number: u64) -> u64 {
    (shard as u64) << 48 | number
}

/// An open table file. When the shard's tree no longer lists it
/// ([`mark_obsolete`](Self::mark_obsolete)) the file is deleted once the last holder drops it.
pub struct TableFile {
    table: Table<ZoneFile>,
    fs: ZoneFs,
    path: String,
    /// Where the deletion runs (the shard's core) and how to get there.
    handle: ziob::runtime::Handle,
    core: usize,
    obsolete: AtomicBool,
}

impl std::fmt::Debug for TableFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableFile")
            .field("path", &self.path)
            .finish()
    }
}

impl TableFile {
    /// Marks the file as no longer part of the shard (a manifest edit said so).
    pub fn mark_obsolete(&self) {
        self.obsolete.store(true, AtomicOrdering::Release);
    }
}

impl Drop for TableFile {
    fn drop(&mut self) {
        if !self.obsolete.load(AtomicOrdering::Acquire) {
            return;
        }
        let (fs, path) = (self.fs.clone(), std::mem::take(&mut self.path));
        // No version lists the file. If this deletion is lost (the runtime stopping, a
        // crash), the next open deletes it as an orphan.
        let _ = self.handle.spawn_on(self.core, move || async move {
            let _ = fs.delete(&path).await;
        });
    }
}

/// A table of a shard: what the manifest knows of it and its open file.
#[derive(Debug, Clone)]
pub struct TableHandle {
    /// What the manifest records.
    pub meta: FileMeta,
    /// The open file (shared by the handles of a table moved between levels).
    pub file: Arc<TableFile>,
}

impl TableHandle {
    /// Opens table `meta` of shard `shard`.
    pub async fn open(
        fs: &ZoneFs,
        cache: &BlockCache,
        handle: &ziob::runtime::Handle,
        shard: usize,
        core: usize,
        meta: FileMeta,
    ) -> Result<TableHandle, DbError> {
        let path = table_path(shard, meta.number);
        let table = Table::open(
            ZoneFile::open(fs, &path).await?,
            meta.size,
            ikey::order,
            ikey::user_key,
            cache,
            cache_id(shard, meta.number),
        )
        .await?;
        Ok(TableHandle {
            meta,
            file: Arc::new(TableFile {
                table,
                fs: fs.clone(),
                path,
                handle: handle.clone(),
                core,
                obsolete: AtomicBool::new(false),
            }),
        })
    }

    /// The same table listed at `level` (a trivial move).
    pub fn moved(&self, level: usize) -> TableHandle {
        TableHandle {
            meta: FileMeta {
                level: level as u32,
                ..self.meta.clone()
            },
            file: self.file.clone(),
        }
    }

    /// The open table.
    pub fn table(&self) -> &Table<ZoneFile> {
        &self.file.table
    }

    /// The smallest user key in the table.
    pub fn smallest_user_key(&self) -> &[u8] {
        ikey::user_key(&self.meta.smallest)
    }

    /// The largest user key in the table.
    pub fn largest_user_key(&self) -> &[u8] {
        ikey::user_key(&self.meta.largest)
    }

    /// Whether the table's user keys meet `[lo, hi]` (inclusive user keys).
    pub fn overlaps(&self, lo: &[u8], hi: &[u8]) -> bool {
        self.smallest_user_key() <= hi && self.largest_user_key() >= lo
    }

    /// The newest version of `key` at the snapshot of `seek` (made for `key`) in this table.
    pub async fn get(&self, key: &[u8], seek: &Seek) -> Result<Lookup, DbError> {
        if key < self.smallest_user_key() || key > self.largest_user_key() {
            return Ok(Lookup::Absent);
        }
        match self.table().seek_first(seek.as_bytes(), true).await? {
            Some((k, v)) => match ikey::decode(&k) {
                Some((uk, _, kind)) if uk == key => Ok(match kind {
                    Kind::Put => Lookup::Found(v),
                    Kind::Delete => Lookup::Deleted,
                }),
                Some(_) => Ok(Lookup::Absent),
                None => Err(crate::error::CorruptionError::new(format!(
                    "table {}: malformed internal key",
                    self.meta.number
                ))
                .into()),
            },
            None => Ok(Lookup::Absent),
        }
    }
}

/// A shard's tables at one moment: `levels[0]` newest first (overlapping key ranges),
/// `levels[1..]` sorted by key, non-overlapping. Immutable; replaced whole.
#[derive(Debug, Clone, Default)]
pub struct Version {
    /// Tables per level.
    pub levels: Vec<Vec<Arc<TableHandle>>>,
}

impl Version {
    /// A version without tables.
    pub fn empty() -> Version {
        Version {
            levels: vec![Vec::new(); LEVELS],
        }
    }

    /// The version after `edit`: its deleted tables removed, `added` (the opened tables of
    /// `edit.added`, same order) put in. An edit naming a table that is not there is
    /// corruption (the manifest and the tree disagree).
    pub fn apply(
        &self,
        edit: &VersionEdit,
        added: Vec<Arc<TableHandle>>,
    ) -> Result<Version, DbError> {
        let mut levels = self.levels.clone();
        for &(level, number) in &edit.deleted {
            let l = levels.get_mut(level as usize).ok_or_else(|| {
                crate::error::CorruptionError::new(format!("version edit: level {level}"))
            })?;
            let before = l.len();
            l.retain(|t| t.meta.number != number);
            if l.len() == before {
                return Err(crate::error::CorruptionError::new(format!(
                    "version edit: deletes table {number} not in level {level}"
                ))
                .into());
            }
        }
        for t in added {
            let level = t.meta.level as usize;
            if level >= LEVELS {
                return Err(crate::error::CorruptionError::new(format!(
                    "version edit: table {} at level {level} (at most {})",
                    t.meta.number,
                    LEVELS - 1
                ))
                .into());
            }
            levels[level].push(t);
        }
        levels[0].sort_by_key(|t| std::cmp::Reverse(t.meta.number));
        for l in &mut levels[1..] {
            l.sort_by(|a, b| ikey::order(&a.meta.smallest, &b.meta.smallest));
        }
        Ok(Version { levels })
    }

    /// Tables in L0.
    pub fn l0_count(&self) -> usize {
        self.levels[0].len()
    }

    /// Bytes of the tables of `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels[level].iter().map(|t| t.meta.size).sum()
    }

    /// Tables of `level` whose user keys meet `[lo, hi]`.
    pub fn overlapping(&self, level: usize, lo: &[u8], hi: &[u8]) -> Vec<Arc<TableHandle>> {
        self.levels[level]
            .iter()
            .filter(|t| t.overlaps(lo, hi))
            .cloned()
            .collect()
    }

    /// Whether any table below `level` meets `[lo, hi]`.
    pub fn deeper_overlap(&self, level: usize, lo: &[u8], hi: &[u8]) -> bool {
        self.levels[level + 1..]
            .iter()
            .any(|l| l.iter().any(|t| t.overlaps(lo, hi)))
    }

    /// Every table, with its level.
    pub fn all(&self) -> impl Iterator<Item = &Arc<TableHandle>> {
        self.levels.iter().flatten()
    }

    /// The newest version of `key` at the snapshot of `seek` (made for `key`) in the
    /// tables: L0 newest first, then one table per level.
    pub async fn get(&self, key: &[u8], seek: &Seek) -> Result<Lookup, DbError> {
        for t in &self.levels[0] {
            match t.get(key, seek).await? {
                Lookup::Absent => {}
                found => return Ok(found),
            }
        }
        for level in &self.levels[1..] {
            let i = level.partition_point(|t| t.largest_user_key().cmp(key) == Ordering::Less);
            if let Some(t) = level.get(i) {
                match t.get(key, seek).await? {
                    Lookup::Absent => {}
                    found => return Ok(found),
                }
            }
        }
        Ok(Lookup::Absent)
    }
}

/// A value found by a lookup, as the API returns it.
pub fn lookup_value(l: Lookup) -> Option<Bytes> {
    match l {
        Lookup::Found(v) => Some(v),
        _ => None,
    }
}
