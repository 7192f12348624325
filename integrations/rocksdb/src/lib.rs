//! `ziob-rocksdb`: RocksDB on zones. Builds `libziob_rocksdb.so`, a RocksDB `FileSystem`
//! plugin registered for the URI scheme `ziob://<device spec>[?options]`, loaded into an
//! unmodified RocksDB application with `LD_PRELOAD` (e.g. `db_bench --fs_uri=ziob://emu:/var/tmp/db.zns`).
//!
//! Two halves:
//! - Rust ([`ffi`]): a C ABI (`include/ziob_rocksdb.h`) over the zone file layer
//!   [`ziob_zonefs`], through its blocking form (RocksDB calls come from its own threads). One
//!   ZIOB runtime, client and mounted file system per device per process ([`shared::SharedFs`]),
//!   created on first use. No panic crosses the ABI.
//! - C++ (`cpp/ziob_fs.cc`, compiled by `build.rs` against the system `librocksdb-dev`): a thin
//!   `rocksdb::FileSystem` that calls the C ABI, and the static initializer that registers the
//!   scheme in `ObjectLibrary::Default()`. Without `librocksdb-dev` the shim is skipped (a cargo
//!   warning) and the library holds only the C ABI.
//!
//! User guide: `docs/ROCKSDB.md`.

pub mod behind;
pub mod error;
pub mod ffi;
pub mod memory;
pub mod page_pool;
pub mod read_cache;
pub mod reader;
pub mod shared;
pub mod uri;
pub mod warm;

/// Why the C++ shim was not built (no `librocksdb-dev` headers found), or `None` if it was.
pub const SHIM_SKIPPED: Option<&str> = option_env!("ZIOB_ROCKSDB_SHIM_SKIPPED");

/// The plugin's own (Rust) allocations come from mimalloc; RocksDB's stay with the C
/// library's allocator (nothing is allocated on one side and freed on the other: messages go
/// back through `ziob_rocksdb_free_error`). With glibc's allocator, a RocksDB reader freeing
/// read-cache pages and buffers that other threads allocated waited on their arena locks
/// (`__lll_lock_wait_private` under `free` was the reader's most frequent wait in
/// readwhilewriting at 1 KiB values); mimalloc frees across threads without a lock. With
/// the read cache off (page-cache `emu:`, 1 KiB values) the two were within noise of each
/// other (docs/ROCKSDB-BENCH.md §3b).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
