//! The shared vocabulary of the manifest and the LSM engine: which tables a shard has and how
//! a flush or compaction changes that set. The manifest (`manifest`) encodes these; the
//! engine applies them to its in-memory version.

use bytes::Bytes;

/// One SSTable of a shard, as the manifest records it. The table's file is
/// `kv/<shard>/<number>.sst` in the store's zone file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    /// The table's file number (unique within its shard, never reused).
    pub number: u64,
    /// The LSM level the table is in (0 = freshly flushed, key ranges may overlap).
    pub level: u32,
    /// The table file's size in bytes.
    pub size: u64,
    /// Entries (internal keys) in the table.
    pub entries: u64,
    /// The smallest internal key in the table (`ikey` encoding).
    pub smallest: Bytes,
    /// The largest internal key in the table (`ikey` encoding).
    pub largest: Bytes,
}

/// A change to a shard's set of tables and its recovery point, written to the manifest as one
/// record: applied all at once or not at all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// Tables added (by a flush or a compaction).
    pub added: Vec<FileMeta>,
    /// Tables removed, as `(level, number)`.
    pub deleted: Vec<(u32, u64)>,
    /// WAL replay starts here after this edit: every WAL record before this position (a raw
    /// [`ziob::Position`] value) is in the shard's tables.
    pub wal_start: Option<u64>,
    /// The next unused file number of the shard.
    pub next_file_number: Option<u64>,
    /// The highest sequence number in the shard's tables.
    pub last_seq: Option<u64>,
}
