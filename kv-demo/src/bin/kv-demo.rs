//! `kv-demo`: RocksDB db_bench's benchmarks, flags and output on kv-demo's store (or fjall,
//! `--engine=fjall` with the `peers` feature). `kv-demo --help` lists the flags;
//! docs/KV-BENCH.md compares it with db_bench.

use clap::Parser;
use kv_demo::bench::{run_flags, Flags};

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

fn main() {
    ziob::logging::init();
    let flags = Flags::parse();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if let Err(e) = run_flags(&flags, &mut out) {
        eprintln!("kv-demo: {e}");
        std::process::exit(1);
    }
}
