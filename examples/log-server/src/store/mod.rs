//! The storage behind the routes: the [`LogStore`] trait and its two implementations,
//! [`zone::ZoneStore`] (ZIOB's `ZoneLog` through a `ziob::Client`) and [`file::FileStore`]
//! (one plain file per log, `fdatasync` group commit), the peer of the load test.

pub mod commit;
pub mod file;
pub mod open_logs;
pub mod zone;

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use futures::Stream;
use serde::Serialize;

use crate::name::LogName;
use crate::position::Position;

/// A stream of records from a position on, following the log as it grows. It ends when the
/// store closes; an error ends it too (after yielding the error).
pub type RecordStream = Pin<Box<dyn Stream<Item = Result<(Position, Bytes), StoreError>> + Send>>;

/// When an append may answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Once the record is in the store (readable, survives a graceful shutdown, not a power
    /// loss or, for the zone store, a crash of the process).
    Buffered,
    /// Once the record is durable on the device (survives a power loss).
    Durable,
}

/// Records read from a log, and where to go on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadBatch {
    /// The records, in log order.
    pub records: Vec<(Position, Bytes)>,
    /// The position to read from next (the log's end when the batch reached it).
    pub next: Position,
}

/// A log's extent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LogInfo {
    /// The log's name.
    pub name: String,
    /// Position of its first record (after truncations).
    pub start: u64,
    /// The position the next append gets.
    pub end: u64,
}

/// What a store operation can fail with. Each variant maps to one HTTP status (see `api`).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The log does not exist (reads, tails and truncations do not create logs).
    #[error("log {0} does not exist")]
    NotFound(LogName),
    /// The position is before the log's start: those records were truncated.
    #[error("position {pos} of log {log} was truncated (the log starts at {start})")]
    Truncated {
        /// The log.
        log: LogName,
        /// The position asked for.
        pos: Position,
        /// The log's first position.
        start: Position,
    },
    /// The position is past the log's end.
    #[error("position {pos} is past the end of log {log} ({end})")]
    PastEnd {
        /// The log.
        log: LogName,
        /// The position asked for.
        pos: Position,
        /// The log's end.
        end: Position,
    },
    /// The position is inside the log but no record starts there.
    #[error("no record of log {log} starts at position {pos}")]
    NotARecord {
        /// The log.
        log: LogName,
        /// The position asked for.
        pos: Position,
    },
    /// The record is larger than the store takes.
    #[error("a record has at most {max_bytes} bytes, this one has {len}")]
    RecordTooLarge {
        /// The record's length in bytes.
        len: usize,
        /// The store's limit in bytes.
        max_bytes: usize,
    },
    /// The storage is full (for the zone store: no free zone; truncate logs).
    #[error("storage full: {0}")]
    NoSpace(String),
    /// The store is closing or closed.
    #[error("the store is shutting down")]
    Closed,
    /// The storage failed (I/O error, corrupt data, the runtime stopped, ...).
    #[error("storage error: {0}")]
    Storage(String),
}

impl StoreError {
    /// A storage error from anything displayable.
    pub fn storage(e: impl std::fmt::Display) -> Self {
        StoreError::Storage(e.to_string())
    }
}

/// A store of named logs of records. Every future is `Send` (the routes run on tokio's
/// multi-threaded runtime). Appends to a missing log create it; every other operation
/// answers [`StoreError::NotFound`] for one.
pub trait LogStore: Send + Sync + 'static {
    /// A short name for metrics and logs (`"ziob"`, `"file"`).
    fn kind(&self) -> &'static str;

    /// The largest record [`LogStore::append`] takes, in bytes.
    fn record_bytes_max(&self) -> usize;

    /// Appends one record; answers its position when `durability` is reached.
    fn append(
        &self,
        log: &LogName,
        record: Bytes,
        durability: Durability,
    ) -> impl Future<Output = Result<Position, StoreError>> + Send;

    /// Up to `max_records` records from `from` on (none when `from` is the end).
    fn read(
        &self,
        log: &LogName,
        from: Position,
        max_records: usize,
    ) -> impl Future<Output = Result<ReadBatch, StoreError>> + Send;

    /// The records from `from` on, waiting for new ones as they come.
    fn tail(
        &self,
        log: &LogName,
        from: Position,
    ) -> impl Future<Output = Result<RecordStream, StoreError>> + Send;

    /// Drops the records before `before` (a record's position or the end).
    fn truncate_before(
        &self,
        log: &LogName,
        before: Position,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// One log's extent.
    fn info(&self, log: &LogName) -> impl Future<Output = Result<LogInfo, StoreError>> + Send;

    /// Every log, by name.
    fn list(&self) -> impl Future<Output = Result<Vec<LogInfo>, StoreError>> + Send;

    /// Publishes the storage's own metrics through the `metrics` facade; `/metrics` calls it
    /// before each render. Nothing by default.
    fn publish_metrics(&self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Makes every acknowledged record durable and stops: later calls fail with
    /// [`StoreError::Closed`] and tails end.
    fn close(&self) -> impl Future<Output = Result<(), StoreError>> + Send;
}
