//! kv-demo: an embedded, async LSM key-value store on one zoned device through ZIOB.
//!
//! ```
//! use kv_demo::{Db, Options, WriteBatch, WriteOptions};
//! use ziob::Runtime;
//! let rt = Runtime::builder().cores(1).build().unwrap();
//! futures::executor::block_on(async {
//!     let db = Db::open(rt.handle(), "mem:zones=64,zone_size=16M", Options::default())
//!         .await
//!         .unwrap();
//!     let w = WriteOptions::default();
//!     db.put(&b"apple"[..], &b"red"[..], &w).await.unwrap();
//!     let mut b = WriteBatch::new();
//!     b.put(&b"banana"[..], &b"yellow"[..]).unwrap();
//!     b.delete(&b"apple"[..]).unwrap();
//!     db.write(b, &WriteOptions { sync: true }).await.unwrap();
//!     assert_eq!(db.get(b"apple").await.unwrap(), None);
//!     let mut scan = db.scan(None, None, None).await.unwrap();
//!     assert_eq!(scan.next().await.unwrap().unwrap().0, &b"banana"[..]);
//!     db.close().await.unwrap();
//! });
//! ```
//!
//! - **API** ([`Db`]): `open` (creates an absent `emu:` device, formats a blank one, opens a
//!   store, refuses anything else with a typed [`DbError`] and never reformats it), `put`,
//!   `delete`, `write` (an atomic [`WriteBatch`], across shards too), `get`, `get_at` a
//!   [`Snapshot`], `scan` (`[start, end)`, forward, merged across shards), `flush`, `close`,
//!   `stats` (write and space amplification). Keys up to [`batch::KEY_BYTES_MAX`], values up
//!   to [`batch::VALUE_BYTES_MAX`] (and one WAL record); larger input is
//!   [`DbError::InvalidArgument`].
//! - **Sharded per core**: a key's shard is `xxh3(key) % shards` (default one per runtime
//!   core); each shard is an LSM tree ([`shard`]) whose WAL pump runs on its core and whose
//!   flush and compaction run as the runtime's background tasks on a core without a shard
//!   if the runtime has one, else on its own ([`shard::background_core`]); one sequence number for all shards makes snapshots
//!   consistent across them.
//! - **Durability**: each shard's [`wal`] is a zone log with group commit;
//!   [`WriteOptions::sync`] returns once the write is durable; non-sync writes are durable
//!   at the next sync write to their shard, flush or close (they live in process memory
//!   until then, like ZIOB's buffer; a sync write does not sync other shards' WALs). A `Db`
//!   dropped without `close` closes itself in the background. A batch spanning shards is logged whole to every involved shard's WAL, so it
//!   is recovered whole. Each shard's [`manifest`] records its tables; opening replays the
//!   WALs past the manifest's recovery point. Layout: [`store`].
//! - **Engine**: memtables ([`memtable`]) flushed in the background to L0 tables
//!   ([`sst`], [`table_file`]); leveled compaction ([`compaction`]); writers wait when
//!   flushes or compactions fall behind (at most 2 immutable memtables, 20 L0 tables per
//!   shard); a compaction pauses while a memtable waits for its flush and L0 is short
//!   ([`flush_first`]). Tables are `ziob-zonefs` files whose lifetime class is their
//!   level, so zones empty together; zonefs resets empty zones and collects mostly-dead
//!   ones.
//!
//! Byte layouts: `docs/format.md` ("kv-demo ..."); design: `docs/ARCHITECTURE.md`
//! ("`kv-demo/`").

pub mod batch;
pub mod bench;
pub mod compaction;
pub mod context;
pub mod db;
pub mod db_error;
pub mod durable;
pub mod error;
pub mod flush_first;
pub mod ikey;
pub mod iter;
pub mod manifest;
pub mod memtable;
mod open;
pub mod options;
pub mod placement;
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
