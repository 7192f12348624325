//! Which cores' zones a shard's logs and tables are taken from. A zone's appends, syncs and
//! buffered reads run on the ZIOB core that owns it ([`ziob::placement::owner_core`]); a
//! call from another core hops there and back. So a shard's WAL and manifest take zones of
//! the shard's own core, and with a background core of its own (more runtime cores than
//! shards) its tables take zones of that core: the flushes' and compactions' appends then
//! run beside the writers instead of queueing behind them on the shard's core.

use ziob::placement::resource_share;
use ziob::{Client, LogSpace};
use ziob_zonefs::{WriteLifetime, ZoneFs};

/// The zone lifetime class of a level's tables (a flush writes L0's): data of one level
/// dies together.
pub fn lifetime_of(level: usize) -> WriteLifetime {
    match level {
        0 => WriteLifetime::Short,
        1 => WriteLifetime::Medium,
        2 => WriteLifetime::Long,
        _ => WriteLifetime::Extreme,
    }
}

/// Every class [`lifetime_of`] gives, once.
pub const TABLE_CLASSES: [WriteLifetime; 4] = [
    WriteLifetime::Short,
    WriteLifetime::Medium,
    WriteLifetime::Long,
    WriteLifetime::Extreme,
];

/// The smallest share of the device's active-zone limit a core must have to take the
/// tables: one zone per table class and two more. Not a safety bound — the zone file
/// system keeps its active zones within the smallest core's share less the logs' (so no
/// core goes over its share wherever its zones lie) — but below it the file system has
/// fewer class slots than table classes, and classes share zones anyway.
pub const TABLE_CORE_ACTIVE_ZONES: u32 = TABLE_CLASSES.len() as u32 + 2;

/// The core shard `id` of `shards` runs its flushes and compactions on, on a runtime of
/// `cores` cores: a core that runs no shard if there is one (shards `i`, `i + k`, … of
/// `k` such cores share core `shards + i % k`), so they run beside the shard's reads and
/// writes rather than between them, as RocksDB's background threads do; else the shard's
/// own core (`id % cores`). They are background tasks there
/// ([`spawn_background`](ziob::runtime::spawn_background)): a benchmark thread placed on
/// that core goes first. Their I/O goes to the cores that own the zones (ZIOB's client):
/// with [`table_core`], the tables' zones are this core's (for the first shard).
pub fn background_core(id: usize, shards: usize, cores: usize) -> usize {
    let cores = cores.max(1);
    if cores > shards {
        shards + id % (cores - shards)
    } else {
        id % cores
    }
}

/// The ZIOB core whose zones shard `shard`'s logs (WAL, manifest) take: the core the shard
/// runs on (`shard % cores`; ZIOB's core `c` is the runtime's core `c`).
pub fn log_core(space: &LogSpace, shard: usize) -> usize {
    shard % space.client().cores().max(1)
}

/// The core the store's tables are placed on: the first shard's background core, when
/// it is not a shard's core (more `runtime_cores` than `shards`), ZIOB runs on it, and its
/// share of the device's active-zone limit holds [`TABLE_CORE_ACTIVE_ZONES`]. `None`: the
/// tables take the lowest free zones, whichever core owns them.
pub fn table_core(client: &Client, shards: usize, runtime_cores: usize) -> Option<usize> {
    if shards == 0 || runtime_cores <= shards {
        return None;
    }
    let core = background_core(0, shards, runtime_cores);
    let cores = client.cores();
    let limit = client.geometry().max_active_zones;
    let share = resource_share(limit, core, cores);
    (core < cores && share.is_none_or(|s| s >= TABLE_CORE_ACTIVE_ZONES)).then_some(core)
}

/// Places every table class of `fs` on `core` (`None`: no core preferred).
pub fn place_tables(fs: &ZoneFs, core: Option<usize>) {
    for class in TABLE_CLASSES {
        fs.place_class_on_core(class, core);
    }
}
