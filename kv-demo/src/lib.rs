//! kv-demo: an embedded LSM key-value store on ZIOB zones — **work in progress**.
//!
//! Built so far: the SSTable building blocks, each with its byte layout in `docs/format.md`
//! ("kv-demo SSTable blocks"):
//! - [`sst::block`]: data and index blocks — sorted entries, keys prefix-compressed against
//!   the previous key, with restart points every `restart_interval` entries for binary search;
//! - [`sst::bloom`]: the per-table bloom filter (bits per key chosen by the user).
//!
//! Not built yet: the table file (footer, index, block checksums), memtable, WAL on the zone
//! log, manifest, compaction, the `Db` API and the `kv-demo` benchmark binary.

pub mod error;
pub mod sst;
mod varint;

pub use error::{CorruptionError, Result};
