//! The small interface the benchmark driver codes against, implemented for kv-demo's `Db`
//! ([`super::kv_engine`]), for fjall (`super::fjall_engine`, feature `peers`) and, in
//! the tests, for an in-memory double.

use std::future::Future;

/// An engine's failure, with the engine named.
#[derive(Debug, thiserror::Error)]
#[error("{engine}: {source}")]
pub struct EngineError {
    /// The engine (`kv-demo`, `fjall`, ...).
    pub engine: &'static str,
    /// What failed.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl EngineError {
    /// Wraps `source` as a failure of `engine`.
    pub fn new(
        engine: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> EngineError {
        EngineError {
            engine,
            source: source.into(),
        }
    }
}

/// Where the benchmark's threads run.
#[derive(Debug, Clone)]
pub enum Placement {
    /// One OS thread per benchmark thread (as db_bench does), each blocking on the engine's
    /// futures.
    Threads,
    /// Tasks on a ZIOB runtime: benchmark thread `i` is a task on core `i % cores`; the
    /// driver yields to the core every few operations.
    Ziob(ziob::runtime::Handle),
}

/// Write counters of a store for write amplification, bytes since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// User bytes written (keys + values of puts, keys of deletes).
    pub user_bytes: u64,
    /// Bytes written by memtable flushes (new tables), when the engine counts them.
    pub flush_bytes: Option<u64>,
    /// Bytes written by compactions, when the engine counts them.
    pub compaction_bytes: Option<u64>,
    /// Every byte written to the device (WAL, tables, metadata, relocation), when known.
    pub device_bytes: Option<u64>,
}

impl EngineStats {
    /// The sum of two stores' counters (a counter unknown in either is unknown).
    pub fn plus(self, o: EngineStats) -> EngineStats {
        let add = |a: Option<u64>, b: Option<u64>| Some(a? + b?);
        EngineStats {
            user_bytes: self.user_bytes + o.user_bytes,
            flush_bytes: add(self.flush_bytes, o.flush_bytes),
            compaction_bytes: add(self.compaction_bytes, o.compaction_bytes),
            device_bytes: add(self.device_bytes, o.device_bytes),
        }
    }
}

/// A forward iterator over a store, in key order.
pub trait Cursor: Send {
    /// Calls `f` with the next entry's key and value; `None` at the end.
    fn next_with<R, F>(
        &mut self,
        f: F,
    ) -> impl Future<Output = Result<Option<R>, EngineError>> + Send
    where
        R: Send,
        F: FnOnce(&[u8], &[u8]) -> R + Send;
}

/// A key-value store the benchmark drives. Shared by all benchmark threads; the futures
/// are `Send` so that any thread may drive them.
pub trait Engine: Send + Sync + 'static {
    /// Its iterator.
    type Cursor: Cursor;

    /// Writes `key` = `value`; durable on return when `sync`.
    fn put(
        &self,
        key: &[u8],
        value: &[u8],
        sync: bool,
    ) -> impl Future<Output = Result<(), EngineError>> + Send;

    /// Deletes `key`; durable on return when `sync`.
    fn delete(
        &self,
        key: &[u8],
        sync: bool,
    ) -> impl Future<Output = Result<(), EngineError>> + Send;

    /// The length of `key`'s value, `None` when absent.
    fn get(&self, key: &[u8]) -> impl Future<Output = Result<Option<usize>, EngineError>> + Send;

    /// An iterator from the first key at or after `start` (the first key when `None`).
    fn cursor(
        &self,
        start: Option<&[u8]>,
    ) -> impl Future<Output = Result<Self::Cursor, EngineError>> + Send;

    /// Write counters since the store was opened.
    fn stats(&self) -> impl Future<Output = EngineStats> + Send;

    /// The store's shape right now (tables per level, memtables, stalls) for the log, when the
    /// engine can tell.
    fn shape(&self) -> impl Future<Output = Option<String>> + Send {
        async { None }
    }

    /// Where benchmark threads should run.
    fn placement(&self) -> Placement;
}

/// Opens, closes and destroys the store of one engine (the driver's view of `--db`).
pub trait EngineHost {
    /// The opened store.
    type Engine: Engine;

    /// Opens (creating when absent) the store.
    fn open(&mut self) -> Result<Self::Engine, EngineError>;

    /// Closes the store cleanly (everything written survives).
    fn close(&mut self, engine: Self::Engine) -> Result<(), EngineError>;

    /// Removes the (closed) store so that the next open starts empty, as db_bench's
    /// `DestroyDB`; refuses anything that is not this engine's store.
    fn destroy(&mut self) -> Result<(), EngineError>;

    /// What the header says about the store (`DB path: [..]`).
    fn describe(&self) -> String;
}
