//! `kv-demo`: RocksDB db_bench's benchmarks, flags and output on kv-demo's store (or fjall,
//! `--engine=fjall` with the `peers` feature). `kv-demo --help` lists the flags;
//! docs/KV-BENCH.md compares it with db_bench.

use std::io::Write;

use clap::Parser;
use kv_demo::bench::{memory, run_flags, Flags, Prefault};
use ziob::runtime::prefault;

/// mimalloc instead of glibc's malloc. A memtable's entries are allocated on the writer's
/// core and freed on another (the flush's) after the flush; glibc returns each such block to the
/// allocating thread's arena under that arena's lock, and in readwhilewriting at 1,000,000
/// keys that lock was where the shard's core spent most of its waits
/// (`perf record -e sched:sched_switch`). With mimalloc (remote frees without a lock) the
/// reader's rate doubled (21k → 42k reads/s, two alternated runs each;
/// `benches/results/2026-12-02-kv-rww-1m/`; without it: `cargo build --release -p kv-demo
/// --no-default-features`). It is also the allocator of `--engine=fjall` in this
/// binary; Debian's db_bench keeps glibc's. Feature `mimalloc` (default): the library
/// itself leaves the allocator to its user.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Makes mimalloc keep freed memory ([`prefault::keep_freed_memory`]): a memtable's
/// entries (16 MiB of them at the default write buffer) are freed after their flush while
/// the next memtable fills, and pages given back to the kernel were faulted in and zeroed
/// again (0.9 s of system time against 0.36–0.39 s when kept over a 100,000 × 1 KiB
/// fillseq, fillrandom, overwrite; overwrite 220k → 288k ops/s, peak RSS the same, ~380 MiB;
/// docs/KV-BENCH.md section 14).
#[cfg(feature = "mimalloc")]
fn keep_freed_memory() -> bool {
    prefault::keep_freed_memory()
}

/// Without mimalloc the allocator is the system's, which gives large freed blocks back.
#[cfg(not(feature = "mimalloc"))]
fn keep_freed_memory() -> bool {
    false
}

/// Faults in the memory `--prefault_memory` asks for (the configured buffers by default)
/// and says so in a header line on `out`: how much, how much stayed resident, how long.
/// Only when freed memory is `kept`: else the pages would go back to the kernel at once.
/// The store's allocations then reuse those pages; docs/KV-BENCH.md section 15 measures it.
fn prefault_memory(flags: &Flags, kept: bool, out: &mut dyn Write) -> std::io::Result<()> {
    // Bad flags are reported by `run_flags`; only a checked run prefaults.
    let Ok(cfg) = flags.check() else {
        return Ok(());
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let bytes = match flags.prefault_memory {
        Prefault::Auto => memory::budget(&cfg, cpus),
        Prefault::Bytes(n) => n,
    };
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    if bytes == 0 {
        return Ok(());
    }
    if !kept {
        return writeln!(
            out,
            "Prefault:   none (the allocator gives freed memory back: no mimalloc, or \
             MIMALLOC_PURGE_DELAY or MIMALLOC_RESET_DELAY set to a delay)"
        );
    }
    match prefault::prefault(bytes) {
        Some(p) => writeln!(
            out,
            "Prefault:   {:.1} MiB written in {} ms before the store opened, {} stayed \
             resident{} (--prefault_memory)",
            mib(p.bytes),
            p.took.as_millis(),
            p.resident_growth
                .map_or("an unknown amount".to_string(), |g| format!(
                    "{:.1} MiB",
                    mib(g)
                )),
            if p.capped_bytes > 0 {
                format!(
                    ", {:.1} MiB left out (half of the memory available)",
                    mib(p.capped_bytes)
                )
            } else {
                String::new()
            }
        ),
        None => writeln!(
            out,
            "Prefault:   none, the memory available is unknown or could not be allocated \
             (--prefault_memory)"
        ),
    }
}

fn main() {
    let kept = keep_freed_memory();
    ziob::logging::init();
    let flags = Flags::parse();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    // A closed stdout is reported by `run_flags` as well.
    let _ = prefault_memory(&flags, kept, &mut out);
    if let Err(e) = run_flags(&flags, &mut out) {
        eprintln!("kv-demo: {e}");
        std::process::exit(1);
    }
}

#[cfg(all(test, feature = "mimalloc"))]
mod tests {
    use super::{keep_freed_memory, prefault};

    fn resident_bytes() -> u64 {
        prefault::resident_bytes().unwrap()
    }

    /// What a store does after the prefault: many small allocations made and written on
    /// another thread (a writer's memtable entries on a runtime core).
    fn fill_on_a_thread(bytes: usize) -> Vec<Vec<u8>> {
        std::thread::spawn(move || (0..bytes / 1024).map(|i| vec![i as u8; 1024]).collect())
            .join()
            .unwrap()
    }

    /// With freed memory kept, a prefault of 96 MiB makes 48 MiB of 1 KiB entries written
    /// afterwards on another thread (as a store's memtable entries are) land on pages
    /// already resident; without it they are new pages. Each case runs in a child process
    /// of its own (a fresh heap). Linux only (`/proc`); skipped, saying so, with less than
    /// 1 GiB of memory available.
    #[cfg(target_os = "linux")]
    #[test]
    fn later_allocations_land_on_prefaulted_pages() {
        const FILL: usize = 48 << 20;
        if let Some(prefault) = std::env::var_os("KV_DEMO_PREFAULT_CHILD") {
            assert!(keep_freed_memory());
            if prefault == "1" {
                let p = prefault::prefault(96 << 20).unwrap();
                assert_eq!(p.bytes, 96 << 20, "capped: {p:?}");
                // The prefault's pages stay resident after the block is freed.
                let growth = p.resident_growth.expect("VmRSS");
                assert!(growth >= 90 << 20, "not faulted in: {p:?}");
            }
            let start = resident_bytes();
            let kept = fill_on_a_thread(FILL);
            let grown = resident_bytes().saturating_sub(start);
            println!("\ngrown {grown}");
            drop(kept);
            return;
        }
        let available = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                let line = m
                    .lines()
                    .find(|l| l.starts_with("MemAvailable:"))?
                    .to_string();
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
            .unwrap_or(0)
            * 1024;
        if available < 1 << 30 {
            eprintln!("skipped: {available} bytes of memory available, under 1 GiB");
            return;
        }
        let name = "tests::later_allocations_land_on_prefaulted_pages";
        let grown = |v: &str| -> u64 {
            let out =
                ziob::runtime::testing::rerun_test_in_child(name, &[("KV_DEMO_PREFAULT_CHILD", v)]);
            // libtest may print the test's name on the same line first.
            let at = out.find("grown ").expect("the child's measurement") + "grown ".len();
            out[at..]
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        let (cold, warm) = (grown("0"), grown("1"));
        assert!(
            cold >= (FILL as u64) * 3 / 4,
            "without a prefault: {cold} bytes"
        );
        assert!(warm <= (FILL as u64) / 4, "after a prefault: {warm} bytes");
    }
}
