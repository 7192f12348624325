//! The seam between a shard's engine and its durable logs: where WAL records and manifest
//! edits go.

use crate::db_error::DbError;
use crate::version_edit::VersionEdit;

/// A shard's WAL and manifest.
#[derive(Debug)]
pub enum ShardLog {
    /// Nothing is logged (no recovery): the engine alone, for tests of the engine.
    Volatile,
}

impl ShardLog {
    /// The WAL position after the last record appended (a raw `ziob::Position`).
    pub fn wal_end(&self) -> u64 {
        match self {
            ShardLog::Volatile => 0,
        }
    }

    /// Appends one WAL record (the encoded batch).
    pub async fn append(&self, _payload: &[u8]) -> Result<(), DbError> {
        match self {
            ShardLog::Volatile => Ok(()),
        }
    }

    /// Makes every record appended so far durable.
    pub async fn sync(&self) -> Result<(), DbError> {
        match self {
            ShardLog::Volatile => Ok(()),
        }
    }

    /// Drops WAL records before `pos` (they are in tables).
    pub async fn truncate_before(&self, _pos: u64) -> Result<(), DbError> {
        match self {
            ShardLog::Volatile => Ok(()),
        }
    }

    /// Records a version edit in the manifest: durable when this returns.
    pub async fn log_edit(&self, _edit: &VersionEdit) -> Result<(), DbError> {
        match self {
            ShardLog::Volatile => Ok(()),
        }
    }
}
