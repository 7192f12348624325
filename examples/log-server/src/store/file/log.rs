//! One log of the file store: its data file, its write path and its reads.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::watch;

use super::commit::FileWriter;
use super::frame::{Header, HEADER_BYTES};
use super::recovery;
use crate::name::LogName;
use crate::position::Position;
use crate::store::commit::AppendQueue;
use crate::store::{Durability, LogInfo, ReadBatch, RecordStream, StoreError};

/// Most bytes of record data one read returns (at least one record is always returned).
const READ_BYTES_MAX: usize = 8 << 20;

/// Records one step of a tail reads.
const TAIL_READ_RECORDS: usize = 256;

/// One open log file.
pub struct FileLog {
    name: LogName,
    dir: PathBuf,
    file: Arc<File>,
    /// The write path.
    appends: AppendQueue,
    /// The end of the written records (readable up to there).
    end: watch::Receiver<u64>,
    start: Mutex<u64>,
    /// Serializes truncations.
    truncating: tokio::sync::Mutex<()>,
}

impl FileLog {
    /// Opens (creating when missing) and recovers the log `name` in `dir`.
    pub async fn open(dir: PathBuf, name: LogName) -> Result<Arc<Self>, StoreError> {
        let (d, n) = (dir.clone(), name.clone());
        let r = tokio::task::spawn_blocking(move || recovery::open_log(&d, n.as_str()))
            .await
            .map_err(StoreError::storage)?
            .map_err(StoreError::storage)?;
        if r.dropped_bytes > 0 {
            tracing::warn!(log = %name, bytes = r.dropped_bytes, end = r.end, "dropped a torn or corrupt tail");
        }
        let file = Arc::new(r.file);
        let (end_tx, end_rx) = watch::channel(r.end);
        let appends = AppendQueue::spawn(FileWriter {
            file: file.clone(),
            end_tx,
            end: r.end,
        });
        Ok(Arc::new(FileLog {
            name,
            dir,
            file,
            appends,
            end: end_rx,
            start: Mutex::new(r.start),
            truncating: tokio::sync::Mutex::new(()),
        }))
    }

    /// The log's extent.
    pub fn info(&self) -> LogInfo {
        LogInfo {
            name: self.name.to_string(),
            start: self.start(),
            end: *self.end.borrow(),
        }
    }

    fn start(&self) -> u64 {
        *self.start.lock().expect("start lock")
    }

    /// Queues one append and waits for its answer.
    pub async fn append(
        &self,
        record: Bytes,
        durability: Durability,
    ) -> Result<Position, StoreError> {
        self.appends.append(record, durability).await
    }

    /// Checks `pos` against the log's extent: before the start is [`StoreError::Truncated`],
    /// past the end [`StoreError::PastEnd`]. Answers the end.
    fn check_extent(&self, pos: Position) -> Result<u64, StoreError> {
        let (start, end) = (self.start(), *self.end.borrow());
        if pos.0 < start {
            return Err(StoreError::Truncated {
                log: self.name.clone(),
                pos,
                start: Position(start),
            });
        }
        if pos.0 > end {
            return Err(StoreError::PastEnd {
                log: self.name.clone(),
                pos,
                end: Position(end),
            });
        }
        Ok(end)
    }

    /// Up to `max_records` records from `from` on.
    pub async fn read(&self, from: Position, max_records: usize) -> Result<ReadBatch, StoreError> {
        let end = self.check_extent(from)?;
        if from.0 == end || max_records == 0 {
            return Ok(ReadBatch {
                records: Vec::new(),
                next: from,
            });
        }
        let (file, name) = (self.file.clone(), self.name.clone());
        tokio::task::spawn_blocking(move || read_records(&file, &name, from, end, max_records))
            .await
            .map_err(StoreError::storage)?
    }

    /// The records from `from` on, following the log.
    pub async fn tail(self: &Arc<Self>, from: Position) -> Result<RecordStream, StoreError> {
        // Validates `from` (extent and record boundary) before the stream starts.
        let first = self.read(from, TAIL_READ_RECORDS).await?;
        let state = TailState {
            log: self.clone(),
            end: self.end.clone(),
            pos: first.next,
            ready: first.records.into(),
            failed: false,
        };
        Ok(Box::pin(futures::stream::unfold(state, TailState::next)))
    }

    /// Drops the records before `before`: records the new start durably (after making the
    /// records up to `before` durable, so the start never passes the durable end). The file's
    /// space is not given back (documented in docs/LOG-SERVER.md).
    pub async fn truncate_before(&self, before: Position) -> Result<(), StoreError> {
        let _one = self.truncating.lock().await;
        if before.0 <= self.start() {
            return Ok(());
        }
        let end = self.check_extent(before)?;
        if before.0 < end {
            // Checks that a record starts at `before`.
            self.read(before, 1).await?;
        }
        let (file, dir, name) = (self.file.clone(), self.dir.clone(), self.name.clone());
        tokio::task::spawn_blocking(move || {
            file.sync_data()?;
            recovery::write_start(&dir, name.as_str(), before.0)
        })
        .await
        .map_err(StoreError::storage)?
        .map_err(StoreError::storage)?;
        *self.start.lock().expect("start lock") = before.0;
        Ok(())
    }

    /// Refuses new appends, waits for the queued ones and makes everything durable. Tails
    /// end.
    pub async fn close(&self) -> Result<(), StoreError> {
        self.appends.close().await?;
        let file = self.file.clone();
        tokio::task::spawn_blocking(move || file.sync_data())
            .await
            .map_err(StoreError::storage)?
            .map_err(StoreError::storage)
    }
}

/// Reads up to `max_records` whole records in `[from, end)` (blocking). A frame that does
/// not check at `from` means `from` is not a record's position; one further on means the file
/// is corrupt.
fn read_records(
    file: &File,
    name: &LogName,
    from: Position,
    end: u64,
    max_records: usize,
) -> Result<ReadBatch, StoreError> {
    let mut records = Vec::new();
    let mut pos = from.0;
    let mut bytes = 0usize;
    let mut header = [0u8; HEADER_BYTES as usize];
    while records.len() < max_records && pos < end && bytes < READ_BYTES_MAX {
        let bad = || {
            if pos == from.0 {
                StoreError::NotARecord {
                    log: name.clone(),
                    pos: from,
                }
            } else {
                StoreError::Storage(format!("log {name}: corrupt record at {pos}"))
            }
        };
        if pos + HEADER_BYTES > end {
            return Err(bad());
        }
        file.read_exact_at(&mut header, pos)
            .map_err(StoreError::storage)?;
        let h = Header::decode(&header);
        if pos + h.frame_bytes() > end {
            return Err(bad());
        }
        let mut data = vec![0u8; h.len as usize];
        file.read_exact_at(&mut data, pos + HEADER_BYTES)
            .map_err(StoreError::storage)?;
        if !h.checks(&data) {
            return Err(bad());
        }
        bytes += data.len();
        records.push((Position(pos), Bytes::from(data)));
        pos += h.frame_bytes();
    }
    Ok(ReadBatch {
        records,
        next: Position(pos),
    })
}

/// Where a tail is.
struct TailState {
    log: Arc<FileLog>,
    end: watch::Receiver<u64>,
    /// Position of the next record to read.
    pos: Position,
    /// Records read but not yielded yet.
    ready: VecDeque<(Position, Bytes)>,
    failed: bool,
}

impl TailState {
    async fn next(mut self) -> Option<(Result<(Position, Bytes), StoreError>, Self)> {
        loop {
            if self.failed {
                return None;
            }
            if let Some(r) = self.ready.pop_front() {
                return Some((Ok(r), self));
            }
            let end = *self.end.borrow_and_update();
            if self.pos.0 < end {
                match self.log.read(self.pos, TAIL_READ_RECORDS).await {
                    Ok(batch) => {
                        self.pos = batch.next;
                        self.ready.extend(batch.records);
                    }
                    Err(e) => {
                        self.failed = true;
                        return Some((Err(e), self));
                    }
                }
                continue;
            }
            // The writer is gone (the log closed): the tail ends.
            self.end.changed().await.ok()?;
        }
    }
}
