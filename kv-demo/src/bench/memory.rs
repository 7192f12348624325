//! `--prefault_memory`: the `kv-demo` binary touches its configured buffers' worth of memory
//! once before the store opens, so that the kernel's first touch of each page (a fault and
//! a page zeroed, 2 MiB at a time with transparent huge pages) is paid at start, not inside
//! the timed benchmarks.
//!
//! It works through the binary's allocator: the memory is allocated, written and freed, and
//! mimalloc, told to keep freed memory (the binary's `keep_freed_memory`), hands the same
//! pages to the store's allocations. The binary does it only when that is so. On this VM
//! the first touch of memory that another process had just freed cost a 100,000 × 1 KiB
//! `O_DIRECT` fillseq most of its time (docs/KV-BENCH.md section 15).

use std::time::{Duration, Instant};

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

/// Bytes of `/proc/meminfo`'s field `name` (e.g. `MemAvailable`), if it is there.
fn meminfo_bytes(name: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.split(':').next() == Some(name))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// This process's resident bytes (`VmRSS` of `/proc/self/status`), if known.
pub fn resident_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// `bytes`, at most half of `available`.
fn capped_to(bytes: u64, available: u64) -> u64 {
    bytes.min(available / 2)
}

/// Bytes between two pages the prefault writes to (one byte each faults the page in).
const PAGE_BYTES: usize = 4096;

/// What a prefault did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefaulted {
    /// Bytes written.
    pub bytes: u64,
    /// Bytes asked for beyond half of the memory available: not written.
    pub capped_bytes: u64,
    /// How much the process's resident memory grew over the call (what stayed faulted in
    /// after the block was freed); `None` if `/proc/self/status` could not tell.
    pub resident_growth: Option<u64>,
    /// How long it took.
    pub took: Duration,
}

/// Allocates `bytes` (at most half of `MemAvailable`, so that a large request cannot
/// bring the out-of-memory killer), writes a byte in every page of them and frees them.
/// `None` when the memory available is unknown (no `/proc/meminfo`) or the allocation
/// failed: then nothing was touched.
pub fn prefault(bytes: u64) -> Option<Prefaulted> {
    let start = Instant::now();
    let take = capped_to(bytes, meminfo_bytes("MemAvailable")?);
    let before = resident_bytes();
    let len = usize::try_from(take).ok()?;
    let mut block: Vec<u8> = Vec::new();
    block.try_reserve_exact(len).ok()?;
    // One byte written per page faults it in (a whole huge page where the kernel gives
    // one); not zeroed by the allocator: memory fresh from the kernel is known to be zero
    // and `calloc` would skip it. The spare capacity is written, the length stays 0.
    for byte in block.spare_capacity_mut().iter_mut().step_by(PAGE_BYTES) {
        byte.write(1);
    }
    std::hint::black_box(&mut block);
    drop(block);
    let resident_growth = match (before, resident_bytes()) {
        (Some(b), Some(a)) => Some(a.saturating_sub(b)),
        _ => None,
    };
    Some(Prefaulted {
        bytes: take,
        capped_bytes: bytes - take,
        resident_growth,
        took: start.elapsed(),
    })
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

    #[test]
    fn a_prefault_takes_at_most_half_of_the_memory_available() {
        assert_eq!(capped_to(u64::MAX, 10 << 30), 5 << 30);
        assert_eq!(capped_to(1 << 20, 10 << 30), 1 << 20);
        assert!(meminfo_bytes("MemAvailable").is_some_and(|a| a > 0));
        let p = prefault(1 << 20).unwrap();
        assert_eq!((p.bytes, p.capped_bytes), (1 << 20, 0));
    }
}
