//! The seam between a shard's engine and its durable logs: the shard's [`Wal`] (group
//! commit, replay) and [`Manifest`] (version edits), both zone logs of the store's log space.
//!
//! Writers do not wait for the WAL append of a non-sync write: they queue the encoded batch
//! here and the shard's *WAL pump* (a task on the shard's core) appends what has queued as
//! one record, while the writer goes on to its memtable insert, and a lone writer no longer
//! pays a round trip to the zone's core per write. A non-sync write is thus in process
//! memory when it returns, with the ZIOB buffer on or off (off, the pump's append writes
//! to the device; the write did not wait for it); it is durable at the next sync. With the
//! buffer on this changed nothing (a finished append lands in ZIOB's buffer, process memory
//! too); with it off, a non-sync write used to be on the device when it returned. A `sync`
//! write waits until the pump has appended its batch, then syncs. Queued bytes are bounded
//! ([`QUEUE_BYTES_MAX`], a soft bound: writers check it before they queue): writers wait
//! for the pump.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
use ziob::Position;

use crate::db_error::DbError;
use crate::manifest::Manifest;
use crate::version_edit::VersionEdit;
use crate::wal::Wal;

/// Bytes a shard's WAL queue holds at most before writers wait for the pump.
pub const QUEUE_BYTES_MAX: usize = 8 << 20;

#[derive(Debug, Default)]
struct QueueState {
    pending: VecDeque<Vec<u8>>,
    pending_bytes: usize,
    /// Payloads queued so far (the last one's ticket).
    enqueued: u64,
    /// Payloads appended so far (in queue order).
    appended: u64,
    /// The pump failed: nothing queued is appended any more.
    failed: Option<String>,
}

#[derive(Debug, Default)]
struct WalQueue {
    state: Mutex<QueueState>,
    /// Something was queued (wakes the pump).
    work: Notify,
    /// The pump appended (or failed).
    progress: Notify,
}

/// A shard's WAL (with its queue) and manifest.
#[derive(Debug, Clone)]
pub struct ShardLog {
    /// The WAL.
    pub wal: Wal,
    /// The manifest.
    pub manifest: Manifest,
    queue: Arc<WalQueue>,
}

impl ShardLog {
    /// The shard log over `wal` and `manifest`.
    pub fn new(wal: Wal, manifest: Manifest) -> ShardLog {
        ShardLog {
            wal,
            manifest,
            queue: Arc::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, QueueState> {
        self.queue.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn failed(&self, s: &QueueState) -> Result<(), DbError> {
        match &s.failed {
            Some(e) => Err(DbError::io(format!("WAL: {e}"))),
            None => Ok(()),
        }
    }

    /// Waits while the queue holds [`QUEUE_BYTES_MAX`] bytes or more.
    pub async fn wait_room(&self) -> Result<(), DbError> {
        // Fast path, without registering a waiter.
        {
            let s = self.state();
            self.failed(&s)?;
            if s.pending_bytes < QUEUE_BYTES_MAX {
                return Ok(());
            }
        }
        loop {
            let progress = self.queue.progress.notified();
            tokio::pin!(progress);
            progress.as_mut().enable();
            {
                let s = self.state();
                self.failed(&s)?;
                if s.pending_bytes < QUEUE_BYTES_MAX {
                    return Ok(());
                }
            }
            progress.await;
        }
    }

    /// Queues `payload` (encoded batches) for the WAL; returns its ticket for
    /// [`wait_appended`](Self::wait_appended).
    pub fn enqueue(&self, payload: Vec<u8>) -> Result<u64, DbError> {
        let mut s = self.state();
        self.failed(&s)?;
        s.pending_bytes += payload.len();
        s.pending.push_back(payload);
        s.enqueued += 1;
        let t = s.enqueued;
        drop(s);
        self.queue.work.notify_one();
        Ok(t)
    }

    /// Waits until the payload with `ticket` (and every one before it) is in the WAL.
    pub async fn wait_appended(&self, ticket: u64) -> Result<(), DbError> {
        loop {
            let progress = self.queue.progress.notified();
            tokio::pin!(progress);
            progress.as_mut().enable();
            {
                let s = self.state();
                if s.appended >= ticket {
                    return Ok(());
                }
                self.failed(&s)?;
            }
            self.queue.work.notify_one();
            progress.await;
        }
    }

    /// Waits until everything queued so far is in the WAL.
    pub async fn barrier(&self) -> Result<(), DbError> {
        let t = self.state().enqueued;
        self.wait_appended(t).await
    }

    /// Appends what has queued (up to one record's worth) as one WAL record; `false` if
    /// nothing had. The shard's pump task calls it.
    pub async fn pump_once(&self) -> Result<bool, DbError> {
        let max = self.wal.max_payload_bytes() as usize;
        let (record, n) = {
            let mut s = self.state();
            let mut record = Vec::new();
            let mut n = 0u64;
            while let Some(p) = s.pending.front() {
                if !record.is_empty() && record.len() + p.len() > max {
                    break;
                }
                let p = s.pending.pop_front().expect("front");
                s.pending_bytes -= p.len();
                if record.is_empty() {
                    record = p;
                } else {
                    record.extend_from_slice(&p);
                }
                n += 1;
            }
            (record, n)
        };
        if n == 0 {
            return Ok(false);
        }
        let done = self.wal.append(&record, false).await;
        let mut s = self.state();
        match &done {
            Ok(_) => s.appended += n,
            Err(e) => {
                s.failed.get_or_insert_with(|| e.to_string());
            }
        }
        drop(s);
        self.queue.progress.notify_waiters();
        done.map(|_| true).map_err(DbError::from)
    }

    /// Waits until something is queued (the pump's idle wait).
    pub async fn pump_idle(&self) {
        self.queue.work.notified().await
    }

    /// Wakes the pump (to notice the store closing).
    pub fn wake_pump(&self) {
        self.queue.work.notify_one();
    }

    /// Whether nothing waits for the pump.
    pub fn is_drained(&self) -> bool {
        let s = self.state();
        s.pending.is_empty() || s.failed.is_some()
    }

    /// The WAL position after the last record appended (a raw [`Position`]). Call
    /// [`barrier`](Self::barrier) first to cover everything queued.
    pub fn wal_end(&self) -> u64 {
        self.wal.end().into_raw()
    }

    /// Makes every payload queued so far durable.
    pub async fn sync(&self) -> Result<(), DbError> {
        self.barrier().await?;
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
