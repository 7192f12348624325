//! The file store's part of the shared write path ([`crate::store::commit`]): a batch is
//! one `pwrite` of the framed records at the log's end, a sync one `fdatasync`.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use tokio::sync::watch;

use super::frame;
use crate::position::Position;
use crate::store::commit::{BatchWriter, Syncer};
use crate::store::StoreError;

/// Writes the batches of one log file at `end` on, publishing each new end on `end_tx` once
/// written (records become readable then).
pub struct FileWriter {
    /// The log file.
    pub file: Arc<File>,
    /// Where the end is published.
    pub end_tx: watch::Sender<u64>,
    /// The end of the written records.
    pub end: u64,
}

/// Makes one log file durable with `fdatasync`.
pub struct FileSyncer(Arc<File>);

impl BatchWriter for FileWriter {
    type Syncer = FileSyncer;

    const BATCH_BYTES_MAX: usize = 4 << 20;

    const WRITES_METRIC: &'static str = "log_server_file_writes_total";

    fn syncer(&self) -> FileSyncer {
        FileSyncer(self.file.clone())
    }

    async fn write(&mut self, records: &[&[u8]]) -> Result<Vec<Position>, StoreError> {
        let bytes: usize = records.iter().map(|r| r.len()).sum();
        let mut buf = Vec::with_capacity(bytes + records.len() * frame::HEADER_BYTES as usize);
        let mut positions = Vec::with_capacity(records.len());
        for r in records {
            positions.push(Position(self.end + buf.len() as u64));
            frame::encode_into(&mut buf, r);
        }
        let len = buf.len() as u64;
        let f = self.file.clone();
        let at = self.end;
        let written = tokio::task::spawn_blocking(move || f.write_all_at(&buf, at))
            .await
            .map_err(StoreError::storage)
            .and_then(|r| r.map_err(StoreError::storage));
        match written {
            Ok(()) => {
                self.end += len;
                self.end_tx.send_replace(self.end);
                Ok(positions)
            }
            Err(e) => {
                // Nothing of the batch is acknowledged; the next batch overwrites from `end`.
                tracing::error!(error = %e, "log file write failed");
                Err(e)
            }
        }
    }
}

impl Syncer for FileSyncer {
    const SYNCS_METRIC: &'static str = "log_server_file_fdatasyncs_total";

    const GROUP_METRIC: &'static str = "log_server_file_group_commit_records";

    async fn sync(&self) -> Result<(), StoreError> {
        let f = self.0.clone();
        tokio::task::spawn_blocking(move || f.sync_data())
            .await
            .map_err(StoreError::storage)
            .and_then(|r| r.map_err(StoreError::storage))
    }
}
