//! `kv-demo`: RocksDB db_bench's benchmarks, flags and output on kv-demo's store (or fjall,
//! `--engine=fjall` with the `peers` feature). `kv-demo --help` lists the flags;
//! docs/KV-BENCH.md compares it with db_bench.

use clap::Parser;
use kv_demo::bench::{run_flags, Flags};

fn main() {
    let flags = Flags::parse();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if let Err(e) = run_flags(&flags, &mut out) {
        eprintln!("kv-demo: {e}");
        std::process::exit(1);
    }
}
