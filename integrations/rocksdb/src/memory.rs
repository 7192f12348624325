//! `prefault=`: memory the plugin touches once when it mounts a device, before RocksDB's
//! first write, so that the kernel's first touch of those pages (a fault and a page zeroed,
//! 2 MiB at a time with transparent huge pages) is not paid by the writes. With a prefault
//! the plugin's allocator (mimalloc) keeps freed memory from then on, so the touched pages
//! serve its zone buffers, I/O buffers and read cache ([`ziob::runtime::prefault`]). Off
//! by default (`prefault=0`): it makes the process hold its peak memory.
//!
//! Why: on this project's VM, a db_bench process started right after another one that had
//! freed its memory ran 100,000 × 1 KiB fillseq through the plugin at 0.56–0.58× RocksDB on
//! ext4, a third of its CPU zeroing fresh pages; with a prefault it no longer depends on
//! what ran before (docs/ROCKSDB-BENCH.md section 3g).

use ziob::runtime::prefault::{prefault_less, Prefault, Prefaulted};
use ziob::runtime::BUFFER_CACHE_BYTES_DEFAULT;
use ziob::SHARD_BUDGET_BYTES_DEFAULT;

use crate::uri::FsUri;

/// Working memory counted besides the zone buffers, free I/O buffers and read cache: the
/// writers' gathering buffers and hand-overs, read buffers. Fitted, not derived: db_bench's
/// 100,000 × 1 KiB fillrandom with no prefault (one core, `MIMALLOC_SHOW_STATS=1`) peaked
/// at 152.0–164.6 MiB committed on a page-cache `emu:` file (no read cache) and at
/// 209.2–215.9 MiB on an `O_DIRECT` one (64 MiB read cache), 17–37 MiB over the rest of
/// [`budget`]. A mount that touches less than its budget (a small database, reads only)
/// ends up with more resident memory after a prefault of it.
pub const WORKING_BYTES: u64 = 24 << 20;

/// The memory a mount of `uri` configures: on each ZIOB core its zone buffer (with
/// `buffer=on`) and the runtime's cache of free I/O buffers (every write-back and read
/// takes its buffer there), the read cache (`cache=`), and [`WORKING_BYTES`].
pub fn budget(uri: &FsUri) -> u64 {
    let zone_buffer = if uri.buffered {
        SHARD_BUDGET_BYTES_DEFAULT
    } else {
        0
    };
    let per_core = zone_buffer.saturating_add(BUFFER_CACHE_BYTES_DEFAULT as u64);
    (uri.cores as u64)
        .saturating_mul(per_core)
        .saturating_add(uri.cache_bytes)
        .saturating_add(WORKING_BYTES)
}

/// What the mount of `uri` did about its memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefaulting {
    /// `prefault=0` (the default).
    Off,
    /// The allocator gives freed memory back (`MIMALLOC_PURGE_DELAY` or
    /// `MIMALLOC_RESET_DELAY` set to a delay ≥ 0): a prefault's pages would go back to the
    /// kernel after that delay, so none was made.
    NotKept,
    /// The memory available is unknown or the block could not be allocated.
    Failed,
    /// Done.
    Done(Prefaulted),
}

/// The bytes `uri` asks to prefault (`prefault=`; 0 = none). With `auto` the mount leaves
/// out what its read-cache warm-up reads meanwhile (see [`prefault_mounted`]).
pub fn prefault_bytes(uri: &FsUri) -> u64 {
    match uri.prefault {
        Prefault::Auto => budget(uri),
        Prefault::Bytes(n) => n,
    }
}

/// Prefaults `bytes` after a mount, less `less()` (re-read before each piece: what the read
/// cache's warm-up has faulted in meanwhile, or 0); `kept`: whether the allocator keeps
/// freed memory (asked for before the mount started the runtime's threads).
pub fn prefault_mounted(bytes: u64, kept: bool, less: impl Fn() -> u64) -> Prefaulting {
    if bytes == 0 {
        Prefaulting::Off
    } else if !kept {
        Prefaulting::NotKept
    } else {
        prefault_less(bytes, less).map_or(Prefaulting::Failed, Prefaulting::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_counts_zone_buffers_and_free_buffers_per_core_and_the_read_cache() {
        let mib = 1u64 << 20;
        let b = |u: &str| budget(&FsUri::parse(u).unwrap());
        // Page-cache emu: no read cache by default.
        assert_eq!(b("ziob://emu:/x,direct=0"), (64 + 64 + 24) * mib);
        // O_DIRECT emu: its read cache (`auto` by default, sized by the memory available).
        let auto = FsUri::parse("ziob://emu:/x").unwrap();
        assert!(auto.cache_auto);
        assert_eq!(budget(&auto), (64 + 64 + 24) * mib + auto.cache_bytes);
        assert_eq!(b("ziob://emu:/x?cache=64M"), (64 + 64 + 64 + 24) * mib);
        assert_eq!(
            b("ziob://emu:/x?cores=2&cache=8M"),
            (2 * (64 + 64) + 8 + 24) * mib
        );
        // No zone buffer: the free I/O buffers still count.
        assert_eq!(b("ziob://emu:/x,direct=0?buffer=off"), (64 + 24) * mib);
        let mut huge = FsUri::parse("ziob://emu:/x").unwrap();
        huge.cache_bytes = u64::MAX;
        assert_eq!(budget(&huge), u64::MAX);
    }
}
