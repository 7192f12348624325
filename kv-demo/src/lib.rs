//! kv-demo: an embedded LSM key-value store on ZIOB zones — **work in progress**.
//!
//! Built so far (byte layouts in `docs/format.md`, "kv-demo SSTable blocks"):
//! - [`sst::block`]: data and index blocks — sorted entries, keys prefix-compressed against
//!   the previous key, with restart points every `restart_interval` entries for binary search;
//! - [`sst::bloom`]: the per-table bloom filter (bits per key chosen by the user);
//! - [`sst::table`]: the table file — data blocks, filter, index, footer, a CRC-32C per
//!   block — built in one sequential pass and read through any [`sst::table::TableSource`];
//! - [`sst::cache`]: the block cache shared by every table of a store, bounded in bytes;
//! - [`ikey`]: internal keys (user key + sequence number + kind, newest version first) and
//!   [`memtable`]: a shard's newest writes in that order, with snapshot lookups;
//! - [`batch`]: write batches (atomic groups of puts and deletes) and their WAL encoding,
//!   with the key and value limits;
//! - [`table_file`]: tables written to and read from `ziob-zonefs` files.
//!
//! Not built yet: the WAL on the zone log, manifest, flush and compaction, zone placement and
//! GC (through `ziob-zonefs`), sharding, the `Db` API and the `kv-demo` benchmark binary.

pub mod batch;
pub mod bench;
pub mod compaction;
pub mod db;
pub mod db_error;
pub mod durable;
pub mod error;
pub mod ikey;
pub mod iter;
pub mod manifest;
pub mod memtable;
mod open;
pub mod options;
pub mod shard;
pub mod snapshot;
pub mod sst;
pub mod store;
pub mod table_file;
pub mod table_writer;
mod varint;
pub mod version;
pub mod version_edit;
pub mod wal;

pub use batch::WriteBatch;
pub use db::{Db, DbStats};
pub use db_error::DbError;
pub use error::{CorruptionError, Result};
pub use iter::Scan;
pub use options::{Options, WriteOptions};
pub use snapshot::Snapshot;
