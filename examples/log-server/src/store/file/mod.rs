//! The plain-file store: one file per log in a directory (`NAME.log`), records framed as
//! `len | crc32c | data` ([`frame`]), written with `pwrite` on tokio's blocking pool and made
//! durable by `fdatasync` group commit ([`commit`]). A record's position is the byte offset
//! of its frame. Truncation records the new start in `NAME.start` ([`recovery`]).

pub mod commit;
pub mod frame;
pub mod log;
pub mod recovery;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use self::log::FileLog;
use crate::name::LogName;
use crate::position::Position;
use crate::store::open_logs::OpenLogs;
use crate::store::{Durability, LogInfo, LogStore, ReadBatch, RecordStream, StoreError};

/// Largest record the file store takes, in bytes.
pub const RECORD_BYTES_MAX: usize = 64 << 20;

/// Logs stored as plain files in one directory.
pub struct FileStore {
    dir: PathBuf,
    logs: OpenLogs<FileLog>,
    /// Serializes the creation of logs.
    creating: tokio::sync::Mutex<()>,
}

impl FileStore {
    /// Opens the store in `dir` (created when missing) and recovers every `NAME.log` in it.
    pub async fn open(dir: impl AsRef<Path>) -> Result<Self, StoreError> {
        let dir = dir.as_ref().to_path_buf();
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(|e| StoreError::Storage(format!("{}: {e}", dir.display())))?;
        let mut logs = HashMap::new();
        let mut entries = tokio::fs::read_dir(&dir)
            .await
            .map_err(StoreError::storage)?;
        while let Some(entry) = entries.next_entry().await.map_err(StoreError::storage)? {
            let file_name = entry.file_name();
            let Some(stem) = file_name.to_str().and_then(|n| n.strip_suffix(".log")) else {
                continue;
            };
            match LogName::new(stem) {
                Ok(name) => {
                    let log = FileLog::open(dir.clone(), name.clone()).await?;
                    logs.insert(name, log);
                }
                Err(e) => tracing::warn!(file = ?file_name, error = %e, "skipped: not a log name"),
            }
        }
        Ok(FileStore {
            dir,
            logs: OpenLogs::new(logs),
            creating: tokio::sync::Mutex::new(()),
        })
    }

    fn get(&self, name: &LogName) -> Result<Arc<FileLog>, StoreError> {
        self.logs
            .get(name)?
            .ok_or_else(|| StoreError::NotFound(name.clone()))
    }

    async fn get_or_create(&self, name: &LogName) -> Result<Arc<FileLog>, StoreError> {
        match self.get(name) {
            Err(StoreError::NotFound(_)) => {}
            found => return found,
        }
        let _one = self.creating.lock().await;
        match self.get(name) {
            Err(StoreError::NotFound(_)) => {}
            found => return found,
        }
        let log = FileLog::open(self.dir.clone(), name.clone()).await?;
        // `creating` is held: no other creation can have inserted `name` meanwhile.
        Ok(self.logs.get_or_insert(name, || log))
    }
}

impl LogStore for FileStore {
    fn kind(&self) -> &'static str {
        "file"
    }

    fn record_bytes_max(&self) -> usize {
        RECORD_BYTES_MAX
    }

    async fn append(
        &self,
        log: &LogName,
        record: Bytes,
        durability: Durability,
    ) -> Result<Position, StoreError> {
        if record.len() > RECORD_BYTES_MAX {
            return Err(StoreError::RecordTooLarge {
                len: record.len(),
                max_bytes: RECORD_BYTES_MAX,
            });
        }
        self.get_or_create(log)
            .await?
            .append(record, durability)
            .await
    }

    async fn read(
        &self,
        log: &LogName,
        from: Position,
        max_records: usize,
    ) -> Result<ReadBatch, StoreError> {
        self.get(log)?.read(from, max_records).await
    }

    async fn tail(&self, log: &LogName, from: Position) -> Result<RecordStream, StoreError> {
        self.get(log)?.tail(from).await
    }

    async fn truncate_before(&self, log: &LogName, before: Position) -> Result<(), StoreError> {
        self.get(log)?.truncate_before(before).await
    }

    async fn info(&self, log: &LogName) -> Result<LogInfo, StoreError> {
        Ok(self.get(log)?.info())
    }

    async fn list(&self) -> Result<Vec<LogInfo>, StoreError> {
        self.logs.check_open()?;
        let mut all: Vec<LogInfo> = self.logs.all().iter().map(|l| l.info()).collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(all)
    }

    async fn close(&self) -> Result<(), StoreError> {
        self.logs.mark_closed();
        // Waits for a creation in progress, then takes every log.
        let _one = self.creating.lock().await;
        let mut first_error = None;
        for log in self.logs.all() {
            if let Err(e) = log.close().await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
