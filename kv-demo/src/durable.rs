//! The seam between a shard's engine and its durable logs: the shard's [`Wal`] (group
//! commit, replay) and [`Manifest`] (version edits), both zone logs of the store's log space.

use ziob::Position;

use crate::db_error::DbError;
use crate::manifest::Manifest;
use crate::version_edit::VersionEdit;
use crate::wal::Wal;

/// A shard's WAL and manifest.
#[derive(Debug, Clone)]
pub struct ShardLog {
    /// The WAL.
    pub wal: Wal,
    /// The manifest.
    pub manifest: Manifest,
}

impl ShardLog {
    /// The WAL position after the last record appended (a raw [`Position`]).
    pub fn wal_end(&self) -> u64 {
        self.wal.end().into_raw()
    }

    /// Appends `payload` (encoded batches) in the WAL's next group commit; with `sync`,
    /// returns once it is durable.
    pub async fn append(&self, payload: &[u8], sync: bool) -> Result<(), DbError> {
        self.wal.append(payload, sync).await?;
        Ok(())
    }

    /// Makes every record appended so far durable.
    pub async fn sync(&self) -> Result<(), DbError> {
        Ok(self.wal.sync().await?)
    }

    /// Drops WAL records before `pos` (the manifest says they are in tables).
    pub async fn truncate_before(&self, pos: u64) -> Result<(), DbError> {
        Ok(self.wal.truncate_before(Position::from_raw(pos)).await?)
    }

    /// Records a version edit in the manifest: durable when this returns.
    pub async fn log_edit(&self, edit: &VersionEdit) -> Result<(), DbError> {
        Ok(self.manifest.apply(edit).await?)
    }
}
