//! The write path both stores share: per log, a writer task that puts whatever appends are
//! queued in one batch write, and a syncer task that makes the ones that asked durable with
//! one sync for every append queued while the previous sync ran (group commit). A store
//! supplies only the batch write and the sync ([`BatchWriter`], [`Syncer`]).
//!
//! ```text
//! append ──► writer: batch ─ write ─► Buffered: answered
//!                                   └► Durable ──► syncer: batch ─ sync ─► answered
//! ```

use std::future::Future;
use std::sync::Mutex;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::position::Position;
use crate::store::{Durability, StoreError};

/// Appends queued for a log's writer before `append` waits (backpressure).
pub const QUEUED_APPENDS_MAX: usize = 4096;

/// Writes one batch of records of a log (the writer task owns it).
pub trait BatchWriter: Send + 'static {
    /// What makes the written records durable (the syncer task owns it).
    type Syncer: Syncer;

    /// Most bytes of records the writer puts in one batch.
    const BATCH_BYTES_MAX: usize;

    /// Name of the counter of batch writes (counted whether they succeed or not).
    const WRITES_METRIC: &'static str;

    /// The syncer of the records this writer writes.
    fn syncer(&self) -> Self::Syncer;

    /// Writes `records` in order and answers each one's position; they are readable then.
    /// An error acknowledges none of them.
    fn write(
        &mut self,
        records: &[&[u8]],
    ) -> impl Future<Output = Result<Vec<Position>, StoreError>> + Send;
}

/// Makes every written record durable.
pub trait Syncer: Send + 'static {
    /// Name of the counter of syncs.
    const SYNCS_METRIC: &'static str;

    /// Name of the histogram of the appends one sync answers.
    const GROUP_METRIC: &'static str;

    /// Makes the records written so far durable.
    fn sync(&self) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// One queued append.
struct Append {
    record: Bytes,
    durability: Durability,
    reply: oneshot::Sender<Result<Position, StoreError>>,
}

/// A written append waiting for the next sync.
struct SyncWaiter {
    pos: Position,
    reply: oneshot::Sender<Result<Position, StoreError>>,
}

/// The append queue of one log and its writer task.
pub struct AppendQueue {
    /// `None` once closed.
    appends: Mutex<Option<mpsc::Sender<Append>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl AppendQueue {
    /// Starts the writer (and its syncer) of `writer` on tokio.
    pub fn spawn<W: BatchWriter>(writer: W) -> Self {
        let (tx, rx) = mpsc::channel(QUEUED_APPENDS_MAX);
        let writer = tokio::spawn(write_loop(writer, rx));
        AppendQueue {
            appends: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
        }
    }

    /// Queues one append and waits for its answer.
    pub async fn append(
        &self,
        record: Bytes,
        durability: Durability,
    ) -> Result<Position, StoreError> {
        let sender = self
            .appends
            .lock()
            .expect("appends lock")
            .clone()
            .ok_or(StoreError::Closed)?;
        let (reply, answer) = oneshot::channel();
        let append = Append {
            record,
            durability,
            reply,
        };
        sender.send(append).await.map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// Refuses new appends and waits until the queued ones are answered (an error when the
    /// writer task failed).
    pub async fn close(&self) -> Result<(), StoreError> {
        drop(self.appends.lock().expect("appends lock").take());
        let writer = self.writer.lock().expect("writer lock").take();
        if let Some(w) = writer {
            w.await.map_err(StoreError::storage)?;
        }
        Ok(())
    }
}

/// Writes the queued appends in batches. Ends when every sender of `appends` is gone, after
/// the syncer has answered every append it was handed.
async fn write_loop<W: BatchWriter>(mut writer: W, mut appends: mpsc::Receiver<Append>) {
    let (sync_tx, sync_rx) = mpsc::unbounded_channel();
    let syncer = tokio::spawn(sync_loop(writer.syncer(), sync_rx));
    let mut batch = Vec::new();
    while appends.recv_many(&mut batch, 1024).await > 0 {
        let mut bytes: usize = batch.iter().map(|a| a.record.len()).sum();
        while bytes < W::BATCH_BYTES_MAX {
            match appends.try_recv() {
                Ok(a) => {
                    bytes += a.record.len();
                    batch.push(a);
                }
                Err(_) => break,
            }
        }
        let records: Vec<&[u8]> = batch.iter().map(|a| &a.record[..]).collect();
        let written = writer.write(&records).await;
        metrics::counter!(W::WRITES_METRIC).increment(1);
        match written {
            Ok(positions) => {
                for (a, pos) in batch.drain(..).zip(positions) {
                    dispatch(a, pos, &sync_tx);
                }
            }
            Err(e) => {
                for a in batch.drain(..) {
                    let _ = a.reply.send(Err(same_error(&e)));
                }
            }
        }
    }
    drop(sync_tx);
    let _ = syncer.await;
}

/// Answers a written append now (`Buffered`) or hands it to the syncer (`Durable`).
fn dispatch(a: Append, pos: Position, sync_tx: &mpsc::UnboundedSender<SyncWaiter>) {
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

/// Answers the waiters after a sync that covers them: every waiter queued while one sync
/// runs shares the next one.
async fn sync_loop<S: Syncer>(syncer: S, mut waiters: mpsc::UnboundedReceiver<SyncWaiter>) {
    let mut group = Vec::new();
    while waiters.recv_many(&mut group, usize::MAX).await > 0 {
        let synced = syncer.sync().await;
        metrics::counter!(S::SYNCS_METRIC).increment(1);
        metrics::histogram!(S::GROUP_METRIC).record(group.len() as f64);
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
