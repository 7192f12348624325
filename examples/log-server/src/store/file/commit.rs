//! The write path of one log file: a writer task that writes whatever appends are queued in
//! one `pwrite`, and a syncer task that makes them durable with one `fdatasync` for every
//! append that asked for it while the previous `fdatasync` ran (group commit).
//!
//! ```text
//! append ──► writer: batch ─ pwrite ─► Buffered: answered
//!                                     └► Durable ──► syncer: batch ─ fdatasync ─► answered
//! ```

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, watch};

use super::frame;
use crate::position::Position;
use crate::store::{Durability, StoreError};

/// Most bytes of records the writer puts in one `pwrite`.
const BATCH_BYTES_MAX: usize = 4 << 20;

/// One queued append.
pub struct Append {
    /// The record.
    pub record: Bytes,
    /// When to answer.
    pub durability: Durability,
    /// Where the answer goes.
    pub reply: oneshot::Sender<Result<Position, StoreError>>,
}

/// A written append waiting for the next `fdatasync`.
struct SyncWaiter {
    pos: Position,
    reply: oneshot::Sender<Result<Position, StoreError>>,
}

/// Writes the queued appends at `end` on, publishing each new end on `end_tx` once written
/// (records become readable then). Ends when every sender of `appends` is gone, after the
/// syncer has answered every append it was handed.
pub async fn write_loop(
    file: Arc<File>,
    mut appends: mpsc::Receiver<Append>,
    end_tx: watch::Sender<u64>,
    mut end: u64,
) {
    let (sync_tx, sync_rx) = mpsc::unbounded_channel();
    let syncer = tokio::spawn(sync_loop(file.clone(), sync_rx));
    let mut batch = Vec::new();
    while appends.recv_many(&mut batch, 1024).await > 0 {
        let mut bytes: usize = batch.iter().map(|a| a.record.len()).sum();
        while bytes < BATCH_BYTES_MAX {
            match appends.try_recv() {
                Ok(a) => {
                    bytes += a.record.len();
                    batch.push(a);
                }
                Err(_) => break,
            }
        }
        let mut buf = Vec::with_capacity(bytes + batch.len() * frame::HEADER_BYTES as usize);
        let mut positions = Vec::with_capacity(batch.len());
        for a in &batch {
            positions.push(Position(end + buf.len() as u64));
            frame::encode_into(&mut buf, &a.record);
        }
        let len = buf.len() as u64;
        let f = file.clone();
        let at = end;
        let written = tokio::task::spawn_blocking(move || f.write_all_at(&buf, at))
            .await
            .map_err(StoreError::storage)
            .and_then(|r| r.map_err(StoreError::storage));
        metrics::counter!("log_server_file_writes_total").increment(1);
        match written {
            Ok(()) => {
                end += len;
                end_tx.send_replace(end);
                for (a, pos) in batch.drain(..).zip(positions) {
                    match a.durability {
                        Durability::Buffered => {
                            let _ = a.reply.send(Ok(pos));
                        }
                        Durability::Durable => {
                            let waiter = SyncWaiter {
                                pos,
                                reply: a.reply,
                            };
                            if let Err(mpsc::error::SendError(w)) = sync_tx.send(waiter) {
                                let _ = w.reply.send(Err(StoreError::Closed));
                            }
                        }
                    }
                }
            }
            Err(e) => {
                // Nothing of the batch is acknowledged; the next batch overwrites from `end`.
                tracing::error!(error = %e, "log file write failed");
                for a in batch.drain(..) {
                    let _ = a.reply.send(Err(StoreError::Storage(e.to_string())));
                }
            }
        }
    }
    drop(sync_tx);
    let _ = syncer.await;
}

/// Answers the waiters after an `fdatasync` that covers them: every waiter queued while one
/// `fdatasync` runs shares the next one.
async fn sync_loop(file: Arc<File>, mut waiters: mpsc::UnboundedReceiver<SyncWaiter>) {
    let mut group = Vec::new();
    while waiters.recv_many(&mut group, usize::MAX).await > 0 {
        let f = file.clone();
        let synced = tokio::task::spawn_blocking(move || f.sync_data())
            .await
            .map_err(StoreError::storage)
            .and_then(|r| r.map_err(StoreError::storage));
        metrics::counter!("log_server_file_fdatasyncs_total").increment(1);
        metrics::histogram!("log_server_file_group_commit_records").record(group.len() as f64);
        for w in group.drain(..) {
            let answer = match &synced {
                Ok(()) => Ok(w.pos),
                Err(e) => Err(StoreError::Storage(e.to_string())),
            };
            let _ = w.reply.send(answer);
        }
    }
}
