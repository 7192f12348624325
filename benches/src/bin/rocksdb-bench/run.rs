//! Running the db_bench sequence on each target: identical flags everywhere, targets
//! interleaved (run 1 of every target, then run 2, …) so that drift of a shared machine hits
//! all of them alike.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::options::{Bench, Options};
use crate::parse::Output;
use crate::targets::{measure_space, resolve, Machine, Ready, Space, TargetId};
use ziob_benches::db_bench::version as db_bench_version;
pub use ziob_benches::db_bench::which;

/// One db_bench process's measurement.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    /// Target name.
    pub target: String,
    /// Value size in bytes.
    pub value_size: u64,
    /// Run index (0-based).
    pub run: u32,
    /// Benchmark name.
    pub bench: String,
    /// Operations per second (db_bench's result line).
    pub ops_per_sec: f64,
    /// Microseconds per operation.
    pub micros_per_op: f64,
    /// (flush + compaction bytes) / user bytes of this process (write benchmarks).
    pub write_amp: Option<f64>,
    /// User bytes written (`rocksdb.bytes.written`).
    pub user_bytes: u64,
    /// WAL bytes written.
    pub wal_bytes: u64,
    /// Live SST bytes (the `stats` run before readrandom).
    pub live_sst_bytes: Option<u64>,
    /// `(found, of)` of read benchmarks.
    pub found: Option<(u64, u64)>,
}

/// Space use of a target after the write benchmarks of one run.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SpaceSample {
    /// Target name.
    pub target: String,
    /// Value size in bytes.
    pub value_size: u64,
    /// Run index.
    pub run: u32,
    /// What was measured.
    pub space: Space,
}

/// A target that was not run, and why.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Skipped {
    /// Target name.
    pub target: String,
    /// Why.
    pub reason: String,
}

/// A target that failed (its later runs are not attempted).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Failure {
    /// Target name.
    pub target: String,
    /// What failed.
    pub error: String,
}

/// A target that ran.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct TargetInfo {
    /// Target name.
    pub target: String,
    /// `--fs_uri`, if any.
    pub fs_uri: Option<String>,
    /// `LD_PRELOAD`, if any.
    pub preload: Option<String>,
    /// What a completed write means.
    pub durability: String,
}

/// Everything one environment (host or guest) measured.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Results {
    /// `host` or `guest`.
    pub environment: String,
    /// `--num`.
    pub num: u64,
    /// Runs per target and value size.
    pub runs: u32,
    /// The db_bench flags every target got (without `--db`, `--fs_uri`, `--value_size`,
    /// `--seed`, `--use_existing_db`, `--benchmarks`).
    pub common_flags: Vec<String>,
    /// `db_bench --version`-like identification (first line of stderr).
    pub db_bench: String,
    /// Targets that ran.
    pub targets: Vec<TargetInfo>,
    /// Targets skipped, with reasons.
    pub skipped: Vec<Skipped>,
    /// Targets that failed.
    pub failures: Vec<Failure>,
    /// Every measurement.
    pub samples: Vec<Sample>,
    /// Space after the writes.
    pub space: Vec<SpaceSample>,
}

/// The flags every target gets.
pub fn common_flags(o: &Options, num: u64) -> Vec<String> {
    let mut flags = vec![
        format!("--num={num}"),
        "--key_size=16".into(),
        "--compression_type=none".into(),
        "--bloom_bits=10".into(),
        format!("--cache_size={}", o.cache_size),
        format!("--write_buffer_size={}", o.write_buffer_size),
        format!("--target_file_size_base={}", o.target_file_size_base),
        format!("--max_bytes_for_level_base={}", o.max_bytes_for_level_base),
        "--threads=1".into(),
        "--statistics".into(),
    ];
    if let Some(rate) = o.write_rate_limit {
        flags.push(format!("--benchmark_write_rate_limit={rate}"));
    }
    flags
}

/// The full argument list of one step.
pub fn step_args(common: &[String], t: &Ready, value_size: u64, run: u32, b: Bench) -> Vec<String> {
    let mut a = common.to_vec();
    a.push(format!("--db={}", t.db));
    if let Some(u) = &t.fs_uri {
        a.push(format!("--fs_uri={u}"));
    }
    a.push(format!("--value_size={value_size}"));
    a.push(format!("--seed={}", 1000 + u64::from(run)));
    a.push(format!("--use_existing_db={}", u8::from(!b.fresh())));
    a.push(format!("--benchmarks={}", b.benchmarks_flag()));
    a
}

fn tail(text: &str, lines: usize) -> String {
    let v: Vec<&str> = text.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// Runs one db_bench step; saves stdout/stderr under `raw` when given.
fn run_step(
    db_bench: &str,
    t: &Ready,
    args: &[String],
    raw: Option<&Path>,
    stem: &str,
) -> Result<Output, String> {
    let mut c = Command::new(db_bench);
    c.args(args);
    if let Some(p) = &t.preload {
        c.env("LD_PRELOAD", p);
    }
    let out = c.output().map_err(|e| format!("{db_bench}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(dir) = raw {
        let cmdline = format!(
            "{}{db_bench} {}\n",
            t.preload
                .as_ref()
                .map(|p| format!("LD_PRELOAD={} ", p.display()))
                .unwrap_or_default(),
            args.join(" ")
        );
        let _ = std::fs::write(dir.join(format!("{stem}.cmd")), cmdline);
        let _ = std::fs::write(dir.join(format!("{stem}.out")), stdout.as_bytes());
        let _ = std::fs::write(dir.join(format!("{stem}.err")), stderr.as_bytes());
    }
    if !out.status.success() {
        return Err(format!(
            "db_bench exited with {} (a missing plugin makes db_bench 7.8.3 crash): {}{}",
            out.status,
            tail(&stdout, 3),
            tail(&stderr, 5)
        ));
    }
    Ok(Output::parse(&stdout))
}

/// Runs the whole sequence once on one target.
fn run_sequence(
    o: &Options,
    common: &[String],
    t: &Ready,
    value_size: u64,
    run: u32,
    raw: Option<&Path>,
    res: &mut Results,
) -> Result<(), String> {
    for c in &t.prepare {
        ziob_benches::process::run_checked(c)?;
    }
    let outcome = (|| {
        for b in o.sequence() {
            let args = step_args(common, t, value_size, run, b);
            let stem = format!("{}-v{value_size}-r{run}-{}", t.id.name(), b.name());
            eprintln!("[rocksdb-bench] {stem}");
            let out = run_step(&o.db_bench, t, &args, raw, &stem)?;
            let r = out.result(b.name()).ok_or_else(|| {
                format!(
                    "{stem}: no `{} :` result line in db_bench's output",
                    b.name()
                )
            })?;
            res.samples.push(Sample {
                target: t.id.name().into(),
                value_size,
                run,
                bench: b.name().into(),
                ops_per_sec: r.ops_per_sec,
                micros_per_op: r.micros_per_op,
                write_amp: if b.writes() { out.write_amp() } else { None },
                user_bytes: out
                    .tickers
                    .get("rocksdb.bytes.written")
                    .copied()
                    .unwrap_or(0),
                wal_bytes: out.wal_bytes(),
                live_sst_bytes: out.live_sst_bytes,
                found: r.found,
            });
            let last_write = o
                .sequence()
                .into_iter()
                .rev()
                .find(|s| matches!(s, Bench::Fillseq | Bench::Fillrandom | Bench::Overwrite));
            if Some(b) == last_write {
                res.space.push(SpaceSample {
                    target: t.id.name().into(),
                    value_size,
                    run,
                    space: measure_space(&t.space),
                });
            }
        }
        Ok(())
    })();
    for c in &t.cleanup {
        if let Err(e) = ziob_benches::process::run_checked(c) {
            eprintln!("[rocksdb-bench] cleanup: {e}");
        }
    }
    outcome
}

/// Finds what the targets need on this machine.
pub fn machine(o: &Options) -> Machine {
    let in_guest = std::env::var_os("ZIOB_GUEST").is_some();
    let here = std::env::current_exe().ok();
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    let plugin = o.plugin.clone().or_else(|| {
        ["release", "debug"]
            .iter()
            .map(|p| target_dir.join(p).join("libziob_rocksdb.so"))
            .find(|p| p.is_file())
    });
    let ziob_cli = o.ziob_cli.clone().or_else(|| {
        here.as_ref()
            .and_then(|e| e.parent())
            .map(|d| d.join("ziob"))
            .filter(|p| p.is_file())
            .or_else(|| which("ziob"))
    });
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    Machine {
        in_guest,
        plugin,
        zenfs_prefix: o.zenfs_prefix.clone(),
        ziob_cli,
        work_dir: o.work_dir.clone(),
        zns_block: env("ZIOB_ZNS_BLOCK"),
        zns_char: env("ZIOB_ZNS_CHAR"),
        conv_block: env("ZIOB_CONV_BLOCK"),
    }
}

/// Runs every resolvable target of `targets` here; `raw` gets the raw output.
pub fn run_here(o: &Options, targets: &[TargetId], raw: Option<&Path>) -> Results {
    let m = machine(o);
    let num = o.num_here(m.in_guest);
    let common = common_flags(o, num);
    let mut res = Results {
        environment: if m.in_guest { "guest" } else { "host" }.into(),
        num,
        runs: o.runs,
        common_flags: common.clone(),
        ..Results::default()
    };
    let mut ready: Vec<Ready> = Vec::new();
    for &id in targets {
        if which(&o.db_bench).is_none() {
            res.skipped.push(Skipped {
                target: id.name().into(),
                reason: format!("`{}` not found (Debian package rocksdb-tools)", o.db_bench),
            });
            continue;
        }
        match resolve(id, &m) {
            Ok(t) => {
                res.targets.push(TargetInfo {
                    target: id.name().into(),
                    fs_uri: t.fs_uri.clone(),
                    preload: t.preload.as_ref().map(|p| p.display().to_string()),
                    durability: t.durability.into(),
                });
                ready.push(t);
            }
            Err(reason) => {
                if !(id.guest_only() && !m.in_guest && o.guest) {
                    eprintln!("[rocksdb-bench] skip {}: {reason}", id.name());
                }
                res.skipped.push(Skipped {
                    target: id.name().into(),
                    reason,
                });
            }
        }
    }
    if !ready.is_empty() {
        res.db_bench = db_bench_version(&o.db_bench);
    }
    let mut failed: Vec<TargetId> = Vec::new();
    for run in 0..o.runs {
        for &vs in &o.value_sizes {
            for t in &ready {
                if failed.contains(&t.id) {
                    continue;
                }
                if let Err(e) = run_sequence(o, &common, t, vs, run, raw, &mut res) {
                    eprintln!("[rocksdb-bench] {} failed: {e}", t.id.name());
                    res.failures.push(Failure {
                        target: t.id.name().into(),
                        error: e,
                    });
                    failed.push(t.id);
                }
            }
        }
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn every_target_gets_the_same_flags_but_its_own_place() {
        let o = Options::try_parse_from(["x", "--num", "5000"]).unwrap();
        let common = common_flags(&o, 5000);
        assert!(!common.iter().any(|f| f.contains("write_rate_limit")));
        let limited = Options::try_parse_from(["x", "--write-rate-limit", "8M"]).unwrap();
        assert!(common_flags(&limited, 5000)
            .contains(&"--benchmark_write_rate_limit=8388608".to_string()));
        let mut m = machine(&o);
        m.in_guest = true;
        m.plugin = Some("/p.so".into());
        m.zns_block = Some("/dev/nvme0n1".into());
        m.zns_char = Some("/dev/ng0n1".into());
        let a = step_args(
            &common,
            &resolve(TargetId::ZiobZbd, &m).unwrap(),
            100,
            0,
            Bench::Overwrite,
        );
        let b = step_args(
            &common,
            &resolve(TargetId::ZiobNvme, &m).unwrap(),
            100,
            0,
            Bench::Overwrite,
        );
        let shared = |v: &[String]| {
            v.iter()
                .filter(|x| !x.starts_with("--fs_uri") && !x.starts_with("--db="))
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(shared(&a), shared(&b));
        assert!(a.contains(&"--use_existing_db=1".to_string()));
        assert!(a.contains(&"--compression_type=none".to_string()));
        assert!(a.contains(&"--bloom_bits=10".to_string()));
        let f = step_args(
            &common,
            &resolve(TargetId::ZiobZbd, &m).unwrap(),
            1024,
            2,
            Bench::Fillrandom,
        );
        assert!(
            f.contains(&"--use_existing_db=0".to_string())
                && f.contains(&"--seed=1002".to_string())
        );
        assert!(f.contains(&"--value_size=1024".to_string()));
    }
}
