//! `rocksdb-bench`: RocksDB's own `db_bench` (Debian rocksdb-tools 7.8.3) with identical flags
//! on each storage target, ratios against the reference targets in one run (issue #15).
//!
//! ```text
//! rocksdb-bench --runs 3 --out benches/results/2026-12-01-rocksdb            # host targets
//! rocksdb-bench --runs 3 --guest --guest-num 50000 --out benches/results/…    # + QEMU guest
//! ```
//! Host targets: `local` (RocksDB's default file system on `--work-dir`), `ziob-emu` and
//! `ziob-emu-nobuf` (the `libziob_rocksdb.so` plugin on an emu device file, ZIOB buffer on /
//! off), `ziob-emu-pagecache` (buffer on, the emu file through the host page cache like
//! `local`'s files). Guest targets (`--guest` boots `cargo xtask vm-run` and runs this
//! binary inside): `ziob-nvme`, `ziob-zbd` (the plugin on the ZNS namespace), `zenfs`
//! (ZenFS from `cargo xtask zenfs-build`, after mq-deadline and `zenfs mkfs`) and `ext4`
//! (on the conventional namespace). Each benchmark of fillseq, fillrandom, overwrite,
//! readrandom, readseq, readwhilewriting is one db_bench process (so `--statistics` is per
//! benchmark: write amplification = (flush + compaction bytes) / user bytes); space is read
//! after the writes. Targets that cannot run are skipped with the reason. Prints Markdown
//! tables (median ops/sec, ratios, write amplification, space) and, with `--out`, keeps every
//! db_bench output and results.json. See docs/ROCKSDB-BENCH.md.

mod guest;
mod options;
mod parse;
mod report;
mod run;
mod targets;

use clap::Parser;

use options::Options;
use targets::TargetId;

fn main() {
    ziob::logging::init();
    let o = Options::parse();
    if let Err(e) = o.check() {
        eprintln!("rocksdb-bench: {e}");
        std::process::exit(2);
    }
    if let Some(out) = &o.out {
        if let Err(e) = std::fs::create_dir_all(out) {
            eprintln!("rocksdb-bench: {}: {e}", out.display());
            std::process::exit(2);
        }
    }
    let in_guest = std::env::var_os("ZIOB_GUEST").is_some();
    let mut all = Vec::new();
    let host = run::run_here(&o, &o.targets, o.out.as_deref());
    let mut failed = !host.failures.is_empty();
    if let Some(out) = &o.out {
        let _ = std::fs::write(
            out.join("results.json"),
            serde_json::to_string_pretty(&host).unwrap_or_default(),
        );
    }
    all.push(host);
    let guest_targets: Vec<TargetId> = o
        .targets
        .iter()
        .copied()
        .filter(|t| t.guest_only())
        .collect();
    if o.guest && !in_guest && !guest_targets.is_empty() {
        let out = o.out.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("rocksdb-bench-{}", std::process::id()))
        });
        match guest::run_in_guest(&o, &guest_targets, &out) {
            Ok(g) => {
                failed |= !g.failures.is_empty();
                all.push(g);
            }
            Err(e) => {
                eprintln!("rocksdb-bench: guest part: {e}");
                failed = true;
            }
        }
    }
    let mut md = String::new();
    for r in &all {
        let host_targets_asked = o.targets.iter().any(|t| !t.guest_only());
        if r.environment == "host"
            && r.samples.is_empty()
            && r.failures.is_empty()
            && o.guest
            && !in_guest
        {
            // The guest section says what ran; here only why the host targets did not.
            if host_targets_asked {
                md.push_str(&format!(
                    "## host: nothing ran ({})\n\n",
                    r.skipped
                        .iter()
                        .filter(|s| TargetId::ALL
                            .iter()
                            .any(|t| t.name() == s.target && !t.guest_only()))
                        .map(|s| format!("{}: {}", s.target, s.reason))
                        .collect::<Vec<_>>()
                        .join("; ")
                ));
            }
            continue;
        }
        md.push_str(&report::markdown(r));
    }
    print!("{md}");
    if let Some(out) = &o.out {
        if !in_guest {
            let _ = std::fs::write(out.join("summary.md"), &md);
        }
    }
    std::process::exit(i32::from(failed));
}
