//! `kv-bench`: kv-demo against RocksDB's own `db_bench` (Debian rocksdb-tools 7.8.3) with the
//! same flags, back to back, in one run (issue 14, "Benchmark").
//!
//! ```text
//! kv-bench --num 1000000 --value-sizes 100 --runs 3 --out benches/results/<date>-kv-bench
//! ```
//! Modes (columns): `rocksdb` (db_bench on a directory of `--work-dir`, buffered I/O),
//! `rocksdb-direct` (the same with direct reads and direct flush/compaction I/O: no page
//! cache, like kv-demo), `kv-demo` / `kv-demo-nobuf` (kv-demo on an `emu:` file in the same
//! directory, ZIOB buffer on / off) and `fjall` (kv-demo's driver on fjall; needs a kv-demo
//! built with `--features peers`). Every process runs the whole `--benchmarks` list on a
//! fresh store with `--statistics`; `--sync` 0 and 1 (`--sync-num` keys at 1). Prints
//! median ops/sec per benchmark, ratios kv-demo / db_bench (and / fjall, / ZIOB off) and
//! write amplification with each mode's durability. See docs/KV-BENCH.md.

mod options;
mod report;
mod run;

use clap::Parser;

use options::Options;

fn main() {
    let o = Options::parse();
    if let Err(e) = o.check() {
        eprintln!("kv-bench: {e}");
        std::process::exit(2);
    }
    if let Some(out) = &o.out {
        if let Err(e) = std::fs::create_dir_all(out) {
            eprintln!("kv-bench: {}: {e}", out.display());
            std::process::exit(2);
        }
    }
    let res = run::run_all(&o, o.out.as_deref());
    let md = report::markdown(&res);
    print!("{md}");
    if let Some(out) = &o.out {
        let _ = std::fs::write(
            out.join("results.json"),
            serde_json::to_string_pretty(&res).unwrap_or_default(),
        );
        let _ = std::fs::write(out.join("summary.md"), &md);
    }
    std::process::exit(i32::from(!res.failures.is_empty()));
}
