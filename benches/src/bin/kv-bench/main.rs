//! `kv-bench`: kv-demo against RocksDB's own `db_bench` (Debian rocksdb-tools 7.8.3) with the
//! same flags, back to back, in one run (issue 14, "Benchmark").
//!
//! ```text
//! kv-bench --num 1000000 --value-sizes 100 --runs 3 --out benches/results/<date>-kv-bench
//! kv-bench --guest --guest-num 20000 --runs 1 …      # + the QEMU guest's modes
//! ```
//! Host modes (columns): `rocksdb` (db_bench on a directory of `--work-dir`, buffered I/O),
//! `rocksdb-direct` (the same with direct reads and direct flush/compaction I/O: no page
//! cache, like kv-demo), `kv-demo` / `kv-demo-nobuf` (kv-demo on an `emu:` file in the same
//! directory, ZIOB buffer on / off) and `fjall` (kv-demo's driver on fjall; needs a kv-demo
//! built with `--features peers`). Guest modes (`--guest` boots `cargo xtask vm-run` and runs
//! this binary inside): `rocksdb-ext4` (ext4 on the conventional namespace),
//! `rocksdb-zenfs` (db_bench on ZenFS from `cargo xtask zenfs-build`, on the ZNS namespace),
//! `kv-demo-nvme` and `kv-demo-zbd` (the ZNS namespace). Every process runs the whole `--benchmarks` list on
//! a fresh store with `--statistics`; `--sync` 0 and 1 (`--sync-num` keys at 1). Prints
//! median ops/sec per benchmark, ratios kv-demo / db_bench (and / fjall, / ZIOB off) and
//! write amplification with each mode's durability. See docs/KV-BENCH.md.

mod guest;
mod options;
mod report;
mod run;

use clap::Parser;

use options::{Mode, Options};

fn main() {
    ziob::logging::init();
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
    let in_guest = std::env::var_os("ZIOB_GUEST").is_some();
    let guest_modes: Vec<Mode> = o.modes.iter().copied().filter(|m| m.guest_only()).collect();
    let mut host_opts = o.clone();
    if o.guest && !in_guest {
        // The guest modes run in the guest part; the host part does not list them as skipped.
        host_opts.modes.retain(|m| !m.guest_only());
    }
    let mut md = String::new();
    let mut failed = false;
    if !host_opts.modes.is_empty() {
        let res = run::run_all(&host_opts, o.out.as_deref());
        failed |= !res.failures.is_empty();
        if let Some(out) = &o.out {
            let _ = std::fs::write(
                out.join("results.json"),
                serde_json::to_string_pretty(&res).unwrap_or_default(),
            );
        }
        md.push_str(&format!(
            "## {}\n\n{}",
            if in_guest { "guest" } else { "host" },
            report::markdown(&res)
        ));
    }
    if o.guest && !in_guest && !guest_modes.is_empty() {
        let out = o.out.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("kv-bench-{}", std::process::id()))
        });
        match guest::run_in_guest(&o, &guest_modes, &out) {
            Ok(g) => {
                failed |= !g.failures.is_empty();
                md.push_str(&format!("\n## guest\n\n{}", report::markdown(&g)));
            }
            Err(e) => {
                eprintln!("kv-bench: guest part: {e}");
                md.push_str(&format!("\n## guest: not run ({e})\n"));
                failed = true;
            }
        }
    }
    // In the guest, the host part prints the tables (from results.json) once.
    if !in_guest {
        print!("{md}");
        if let Some(out) = &o.out {
            let _ = std::fs::write(out.join("summary.md"), &md);
        }
    }
    std::process::exit(i32::from(failed));
}
