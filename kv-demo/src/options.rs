//! The store's settings: [`Options`] for [`Db::open`](crate::Db::open), [`WriteOptions`] per
//! write, and the engine's fixed tuning constants.

use crate::db_error::DbError;

/// L0 tables that trigger an L0 → L1 compaction.
pub const L0_COMPACTION_TRIGGER: usize = 4;
/// L0 tables from which a compaction no longer pauses for waiting flushes
/// ([`flush_first`](crate::flush_first)): twice the compaction trigger.
pub const L0_FLUSH_FIRST_MAX: usize = 2 * L0_COMPACTION_TRIGGER;
/// L0 tables at which writers of the shard wait for compaction.
pub const L0_STOP_WRITES: usize = 20;
/// Immutable memtables (waiting for their flush) at which writers of the shard wait.
pub const MAX_IMMUTABLE_MEMTABLES: usize = 2;
/// Levels of a shard's tree (L0 ..= L6).
pub const LEVELS: usize = 7;
/// Growth factor between the byte budgets of adjacent levels.
pub const LEVEL_MULTIPLIER: u64 = 10;
/// Entries a flush or compaction writes between two yields to the other tasks of its core.
/// The core also runs the shard's foreground work (reads, the WAL pump); a background job
/// that held it for a whole cooperative budget (64 units, about 1,000 entries: ~1 ms) made
/// every read that waited for the device wait that long again for the core.
pub const BACKGROUND_YIELD_EVERY: u64 = 16;
/// Entries of a flushed memtable freed between two yields (freeing one costs far less than
/// writing one; a whole 16 MiB memtable took milliseconds).
pub const MEMTABLE_FREE_PER_YIELD: u64 = 256;

/// How a store is opened. `Default` gives the values documented on each field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Shards (independent LSM trees, keys routed by hash); 0 = an existing store's own
    /// count, one per runtime core for a new store (default 0). Shard `i` runs on core
    /// `i % cores`; with fewer shards than runtime cores, ZIOB runs on every runtime core
    /// when `tables_on_background_core` places the tables there, else on the shards' cores
    /// only (`open::ziob_config`). A count other than an existing store's is refused.
    pub shards: usize,
    /// With more runtime cores than shards, ZIOB runs on every runtime core and the tables
    /// take zones of the first shard's background core (where flushes and compactions run),
    /// so their appends need no hop to a shard's core ([`placement::table_core`](
    /// crate::placement::table_core) says when the placement applies). Default `false`:
    /// it makes `O_DIRECT` fills ~1.3× as fast on the host but the guest's
    /// readwhilewriting 5–7× slower (docs/KV-BENCH.md section 17). The WAL and manifest take
    /// zones of the shard's core either way.
    pub tables_on_background_core: bool,
    /// Memtable size per shard in bytes before it is flushed to a table (default 16 MiB).
    pub write_buffer_bytes: usize,
    /// Compaction output tables are cut at this size in bytes (default 16 MiB).
    pub target_file_bytes: u64,
    /// Block cache size in bytes, shared by all shards; 0 = no cache (default 8 MiB).
    pub cache_bytes: u64,
    /// Bloom filter bits per key; 0 = no filter (default 10).
    pub bloom_bits_per_key: u32,
    /// ZIOB's zone write buffer on (`true`, default) or pass-through (`--ziob=off`).
    pub buffered: bool,
    /// ZIOB buffer budget per core in bytes; 0 = `ZiobConfig`'s default (default 0).
    pub buffer_bytes: u64,
    /// Zones of an `emu:` device created by `open` (default 64).
    pub emu_zones: u32,
    /// Zone size in bytes of an `emu:` device created by `open` (default 64 MiB).
    pub emu_zone_bytes: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            shards: 0,
            tables_on_background_core: false,
            write_buffer_bytes: 16 << 20,
            target_file_bytes: 16 << 20,
            cache_bytes: 8 << 20,
            bloom_bits_per_key: 10,
            buffered: true,
            buffer_bytes: 0,
            emu_zones: 64,
            emu_zone_bytes: 64 << 20,
        }
    }
}

impl Options {
    /// Checks the options: an [`DbError::InvalidArgument`] names the first bad one.
    pub fn validate(&self) -> Result<(), DbError> {
        let bad = |what: String| Err(DbError::InvalidArgument(what));
        if self.shards > 1024 {
            return bad(format!("shards = {} (at most 1024)", self.shards));
        }
        if self.write_buffer_bytes < 4096 {
            return bad(format!(
                "write_buffer_bytes = {} (at least 4096)",
                self.write_buffer_bytes
            ));
        }
        if self.target_file_bytes < 4096 {
            return bad(format!(
                "target_file_bytes = {} (at least 4096)",
                self.target_file_bytes
            ));
        }
        if self.bloom_bits_per_key > 64 {
            return bad(format!(
                "bloom_bits_per_key = {} (at most 64)",
                self.bloom_bits_per_key
            ));
        }
        Ok(())
    }

    /// The byte budget of level `level` (≥ 1): 4 × the write buffer for L1, ×10 per level.
    pub fn level_budget_bytes(&self, level: usize) -> u64 {
        let base = 4 * self.write_buffer_bytes as u64;
        (1..level).fold(base, |b, _| b.saturating_mul(LEVEL_MULTIPLIER))
    }
}

/// How one write is made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Durable when the call returns: the WAL records are synced to the device first
    /// (default `false`: the write survives a crash once a later sync or flush covers it).
    pub sync: bool,
}
