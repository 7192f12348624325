//! `--prefault_memory`: how much memory the `kv-demo` binary touches once before the store
//! opens ([`budget`]), so that the kernel's first touch of each page (a fault and a page
//! zeroed, 2 MiB at a time with transparent huge pages) is paid at start, not inside the
//! timed benchmarks. The touching itself is the runtime's
//! [`prefault`](ziob::runtime::prefault::prefault): the memory is allocated, written and
//! freed, and mimalloc, told to keep freed memory, hands the same pages to the store's
//! allocations. On this VM the first touch of memory that another process had just freed
//! cost a 100,000 × 1 KiB `O_DIRECT` fillseq most of its time (docs/KV-BENCH.md section 15).

use super::flags::{BenchConfig, EngineName};
use super::kv_engine::cores_and_shards;
use crate::options::MAX_IMMUTABLE_MEMTABLES;

/// Working memory counted besides the memtables, cache, ZIOB buffer and free I/O buffers:
/// table builders, their appends under way, compaction read-ahead, WAL and read buffers.
/// Fitted, not derived: the three fills at 100,000 × 1 KiB with one shard on one zone core
/// peaked at 248–264 MiB committed in two runs (`MIMALLOC_SHOW_STATS=1`, no prefault),
/// 64–80 MiB over the other parts of [`budget`] (docs/KV-BENCH.md section 21). It does not
/// grow with shards.
pub const WORKING_BYTES: u64 = 64 << 20;

/// The memory `cfg` configures on `cpus` CPUs: the memtables a kv-demo store may hold (the
/// active one and [`MAX_IMMUTABLE_MEMTABLES`]), the block cache, on each core that owns
/// zones ZIOB's buffer (kv-demo with `--ziob=on`) and the runtime's cache of free I/O
/// buffers (every write-back and read takes its buffer from there; ZIOB's chunks move
/// between the two, so some memory is counted twice), and [`WORKING_BYTES`]. For fjall the
/// memtables, cache and working memory (fjall's own memtable limit differs: an estimate).
/// With `--use_existing_db --shards=0` the shard count is the one a new store would get.
///
/// A run that touches less than this (few keys, small memtables) ends up with more
/// resident memory after a prefault of it.
pub fn budget(cfg: &BenchConfig, cpus: usize) -> u64 {
    let memtables = (MAX_IMMUTABLE_MEMTABLES as u64 + 1).saturating_mul(cfg.write_buffer_size);
    let zone_cores = match cfg.engine {
        EngineName::KvDemo => {
            let (cores, shards) = cores_and_shards(cfg, cpus);
            // Zones live on every core, or on the shards' cores when there are fewer
            // shards than cores and the tables stay off the background core
            // (`kv_demo::open::ziob_config`).
            let zone_cores = if cfg.tables_on_background_core {
                cores
            } else {
                shards.min(cores)
            };
            let ziob = if !cfg.ziob_buffered {
                0
            } else if cfg.ziob_buffer_size > 0 {
                cfg.ziob_buffer_size
            } else {
                ziob::SHARD_BUDGET_BYTES_DEFAULT
            };
            (zone_cores as u64).saturating_mul(
                ziob.saturating_add(ziob::runtime::BUFFER_CACHE_BYTES_DEFAULT as u64),
            )
        }
        _ => 0,
    };
    memtables
        .saturating_add(cfg.cache_size)
        .saturating_add(zone_cores)
        .saturating_add(WORKING_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::Flags;
    use clap::Parser;

    fn cfg(args: &[&str]) -> BenchConfig {
        Flags::try_parse_from(std::iter::once("kv-demo").chain(args.iter().copied()))
            .unwrap()
            .check()
            .unwrap()
    }

    #[test]
    fn the_budget_counts_memtables_cache_and_ziob_and_free_buffers_on_zone_cores() {
        let mib = 1u64 << 20;
        let base = [
            "--write_buffer_size=16M",
            "--cache_size=8M",
            "--benchmarks=fillseq",
        ];
        // One thread: one core, one shard.
        assert_eq!(budget(&cfg(&base), 2), (48 + 8 + 64 + 64 + 64) * mib);
        // Readwhilewriting adds a core for its writer, not a shard: ZIOB runs on the shard's
        // core alone, or on both with the tables on the second.
        let mut rww = base.to_vec();
        rww[2] = "--benchmarks=fillseq,readwhilewriting";
        assert_eq!(budget(&cfg(&rww), 2), (48 + 8 + 64 + 64 + 64) * mib);
        rww.push("--tables_on_background_core=on");
        assert_eq!(budget(&cfg(&rww), 2), (48 + 8 + 2 * (64 + 64) + 64) * mib);
        // Two shards on two cores: ZIOB on both, with the buffer size given.
        let mut two = base.to_vec();
        two.extend(["--cores=2", "--ziob_buffer_size=16M"]);
        assert_eq!(budget(&cfg(&two), 2), (48 + 8 + 2 * (16 + 64) + 64) * mib);
        // More shards than cores: ZIOB on every core.
        let mut more = base.to_vec();
        more.extend(["--cores=1", "--shards=4", "--ziob_buffer_size=16M"]);
        assert_eq!(budget(&cfg(&more), 2), (48 + 8 + (16 + 64) + 64) * mib);
        // No ZIOB buffer, no ZIOB memory; the zone core's free I/O buffers still count.
        let mut off = base.to_vec();
        off.push("--ziob=off");
        assert_eq!(budget(&cfg(&off), 2), (48 + 8 + 64 + 64) * mib);
        // Sizes past u64 saturate instead of wrapping.
        let mut huge = cfg(&base);
        huge.write_buffer_size = u64::MAX;
        assert_eq!(budget(&huge, 2), u64::MAX);
    }
}
