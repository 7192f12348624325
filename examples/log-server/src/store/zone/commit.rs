//! The write path of one zone log, the same shape as the file store's: a writer task puts
//! every append queued in one `ZoneLog::append_batch` (one trip to the ZIOB core that owns
//! the zone, one buffer append), and a syncer task makes the ones that asked durable with
//! one `ZoneLog::sync` for all that were queued while the previous sync ran (group commit).
//!
//! ```text
//! append ──► writer: batch ─ append_batch ─► Buffered: answered
//!                                          └► Durable ──► syncer: batch ─ sync ─► answered
//! ```

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use ziob::zonelog::ZoneLog;

use super::map_error;
use crate::position::Position;
use crate::store::{Durability, StoreError};

/// Most bytes of records the writer puts in one `append_batch`.
const BATCH_BYTES_MAX: usize = 1 << 20;

/// Appends queued for a log's writer before `append` waits (backpressure).
pub const QUEUED_APPENDS_MAX: usize = 4096;

/// One queued append.
pub struct Append {
    /// The record.
    pub record: Bytes,
    /// When to answer.
    pub durability: Durability,
    /// Where the answer goes.
    pub reply: oneshot::Sender<Result<Position, StoreError>>,
}

/// An appended record waiting for the next sync.
struct SyncWaiter {
    pos: Position,
    reply: oneshot::Sender<Result<Position, StoreError>>,
}

/// Appends what is queued on `appends` to `log`, in batches. Ends when every sender is gone,
/// after the syncer has answered every append it was handed.
pub async fn write_loop(log: ZoneLog, mut appends: mpsc::Receiver<Append>) {
    let (sync_tx, sync_rx) = mpsc::unbounded_channel();
    let syncer = tokio::spawn(sync_loop(log.clone(), sync_rx));
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
        let records: Vec<&[u8]> = batch.iter().map(|a| &a.record[..]).collect();
        let appended = log.append_batch(&records).await;
        metrics::counter!("log_server_zone_append_batches_total").increment(1);
        match appended {
            Ok(positions) => {
                for (a, pos) in batch.drain(..).zip(positions) {
                    let pos = Position(pos.into_raw());
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
                // None of the batch is acknowledged (a prefix may have been appended).
                let e = map_error(e);
                if matches!(e, StoreError::Storage(_)) {
                    tracing::error!(log = log.name(), error = %e, "zone log append failed");
                }
                for a in batch.drain(..) {
                    let _ = a.reply.send(Err(same_error(&e)));
                }
            }
        }
    }
    drop(sync_tx);
    let _ = syncer.await;
}

/// Answers the waiters after a `ZoneLog::sync` that covers them: every waiter queued while
/// one sync runs shares the next one.
async fn sync_loop(log: ZoneLog, mut waiters: mpsc::UnboundedReceiver<SyncWaiter>) {
    let mut group = Vec::new();
    while waiters.recv_many(&mut group, usize::MAX).await > 0 {
        let synced = log.sync().await.map_err(map_error);
        metrics::counter!("log_server_zone_syncs_total").increment(1);
        metrics::histogram!("log_server_zone_group_commit_records").record(group.len() as f64);
        for w in group.drain(..) {
            let _ = w.reply.send(match &synced {
                Ok(()) => Ok(w.pos),
                Err(e) => Err(same_error(e)),
            });
        }
    }
}

/// A copy of `e` for each waiter of a batch.
fn same_error(e: &StoreError) -> StoreError {
    match e {
        StoreError::NotFound(n) => StoreError::NotFound(n.clone()),
        StoreError::RecordTooLarge { len, max_bytes } => StoreError::RecordTooLarge {
            len: *len,
            max_bytes: *max_bytes,
        },
        StoreError::NoSpace(m) => StoreError::NoSpace(m.clone()),
        StoreError::Closed => StoreError::Closed,
        other => StoreError::Storage(other.to_string()),
    }
}
