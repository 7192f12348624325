//! Running db_bench and kv-demo back to back: one process per mode, sync, value size and
//! run, each on a fresh store in the same file system, with identical db_bench flags.

use std::path::{Path, PathBuf};
use std::process::Command;

use ziob_benches::db_bench::{self, Output};
use ziob_benches::zenfs_peer;

use crate::options::{Mode, Options};

/// One benchmark's result in one process.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    /// Mode (column).
    pub mode: Mode,
    /// `--sync`.
    pub sync: bool,
    /// `--value_size`.
    pub value_size: u64,
    /// Run (0-based; `--seed=1000+run`).
    pub run: u32,
    /// Benchmark.
    pub bench: String,
    /// ops/sec of the result line.
    pub ops_per_sec: f64,
    /// `(found, of)` of read benchmarks.
    pub found: Option<(u64, u64)>,
}

/// The write counters of one process (`--statistics`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct WriteCounters {
    /// Mode.
    pub mode: Mode,
    /// `--sync`.
    pub sync: bool,
    /// `--value_size`.
    pub value_size: u64,
    /// Run.
    pub run: u32,
    /// User bytes written (RocksDB `rocksdb.bytes.written`, kv-demo `kvdemo.bytes.written`).
    pub user_bytes: u64,
    /// Flush + compaction bytes written, when counted.
    pub flush_compaction_bytes: Option<u64>,
    /// WAL bytes (RocksDB `rocksdb.wal.bytes`).
    pub wal_bytes: Option<u64>,
    /// Every byte the store wrote to its device (kv-demo `kvdemo.device.write.bytes`).
    pub device_bytes: Option<u64>,
}

impl WriteCounters {
    /// (flush + compaction bytes) / user bytes.
    pub fn write_amp(&self) -> Option<f64> {
        let fc = self.flush_compaction_bytes?;
        (self.user_bytes > 0).then(|| fc as f64 / self.user_bytes as f64)
    }

    /// All bytes the store wrote / user bytes: kv-demo's device bytes; RocksDB's flush +
    /// compaction + WAL bytes.
    pub fn total_write_amp(&self) -> Option<f64> {
        let total = match (self.device_bytes, self.wal_bytes) {
            (Some(d), _) => d,
            (None, Some(w)) => self.flush_compaction_bytes? + w,
            (None, None) => return None,
        };
        (self.user_bytes > 0).then(|| total as f64 / self.user_bytes as f64)
    }
}

/// A mode that did not run, and why.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Skipped {
    /// Mode.
    pub mode: Mode,
    /// Why.
    pub reason: String,
}

/// A process that failed (the mode's later runs are not attempted).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Failure {
    /// Mode.
    pub mode: Mode,
    /// What failed.
    pub error: String,
}

/// Everything measured.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Results {
    /// `--num` at sync 0 and at sync 1.
    pub num: (u64, u64),
    /// Runs.
    pub runs: u32,
    /// The flags every process got (plus `--num`, `--value_size`, `--seed`, `--sync`, and its
    /// own `--db` and mode flags).
    pub common_flags: Vec<String>,
    /// db_bench's version line.
    pub db_bench: String,
    /// The kv-demo binary.
    pub kv_demo: String,
    /// Modes that ran, with their extra flags.
    pub modes: Vec<(Mode, Vec<String>)>,
    /// Skipped modes.
    pub skipped: Vec<Skipped>,
    /// Failed modes.
    pub failures: Vec<Failure>,
    /// Every result line.
    pub samples: Vec<Sample>,
    /// Every process's write counters.
    pub writes: Vec<WriteCounters>,
}

/// The flags every process gets (`--benchmark_write_rate_limit` only when one is set).
pub fn common_flags(o: &Options) -> Vec<String> {
    let mut f = vec![
        format!("--benchmarks={}", o.bench_names().join(",")),
        "--key_size=16".into(),
        format!("--threads={}", o.threads),
        "--compression_type=none".into(),
        format!("--write_buffer_size={}", o.write_buffer_size),
        format!("--target_file_size_base={}", o.target_file_size),
        format!("--cache_size={}", o.cache_size),
        format!("--bloom_bits={}", o.bloom_bits),
        "--statistics".into(),
    ];
    if o.write_rate_limit > 0 {
        f.push(format!(
            "--benchmark_write_rate_limit={}",
            o.write_rate_limit
        ));
    }
    f
}

/// The flags of one mode: db_bench gets kv-demo's leveled shape (L1 = 4 memtables, as
/// kv-demo's level base) and, for `rocksdb-direct`, direct I/O.
pub fn mode_flags(o: &Options, m: Mode) -> Vec<String> {
    match m {
        Mode::Rocksdb => vec![format!(
            "--max_bytes_for_level_base={}",
            4 * o.write_buffer_size
        )],
        Mode::RocksdbDirect => vec![
            format!("--max_bytes_for_level_base={}", 4 * o.write_buffer_size),
            "--use_direct_reads=1".into(),
            "--use_direct_io_for_flush_and_compaction=1".into(),
        ],
        Mode::RocksdbExt4 | Mode::RocksdbZenfs => vec![format!(
            "--max_bytes_for_level_base={}",
            4 * o.write_buffer_size
        )],
        Mode::KvDemo | Mode::KvDemoPagecache | Mode::KvDemoNvme | Mode::KvDemoZbd => {
            vec!["--ziob=on".into()]
        }
        Mode::KvDemoNobuf => vec!["--ziob=off".into()],
        Mode::Fjall => vec!["--engine=fjall".into()],
    }
}

/// Where a mode's store lives and what makes it fresh.
#[derive(Debug, Clone)]
pub struct Place {
    /// The `--db` value.
    pub db: String,
    /// Removed before and after each process (host modes).
    pub remove: Option<PathBuf>,
    /// Commands run before each process (guest modes).
    pub prepare: Vec<Vec<String>>,
    /// Commands run after each process.
    pub cleanup: Vec<Vec<String>>,
    /// Arguments the place adds (`--fs_uri=…`).
    pub args: Vec<String>,
    /// `LD_PRELOAD` of the process, if any (a file system plugin).
    pub preload: Option<PathBuf>,
}

fn cmd(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// Resolves where mode `m` runs here, or why it cannot.
pub fn place(o: &Options, m: Mode) -> Result<Place, String> {
    let in_guest = std::env::var_os("ZIOB_GUEST").is_some();
    if m.guest_only() != in_guest {
        return Err(if in_guest {
            "host only (runs in the host part of the command)".into()
        } else {
            "guest only (needs the QEMU guest's NVMe namespaces; add --guest)".into()
        });
    }
    let env = |k: &str| {
        std::env::var(k)
            .ok()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("{k} unset"))
    };
    let stem = format!("kv-bench-{}-{}", std::process::id(), m.name());
    let host = |p: PathBuf, db: String| Place {
        db,
        remove: Some(p),
        prepare: Vec::new(),
        cleanup: Vec::new(),
        args: Vec::new(),
        preload: None,
    };
    Ok(match m {
        Mode::KvDemo | Mode::KvDemoNobuf => {
            let p = o.work_dir.join(format!("{stem}.zns"));
            host(p.clone(), format!("emu:{}", p.display()))
        }
        Mode::KvDemoPagecache => {
            let p = o.work_dir.join(format!("{stem}.zns"));
            host(p.clone(), format!("emu:{},direct=0", p.display()))
        }
        Mode::Rocksdb | Mode::RocksdbDirect | Mode::Fjall => {
            let p = o.work_dir.join(stem);
            host(p.clone(), p.display().to_string())
        }
        Mode::RocksdbExt4 => {
            let conv = env("ZIOB_CONV_BLOCK")?;
            let mnt = "/tmp/kv-bench-ext4";
            Place {
                db: format!("{mnt}/db"),
                remove: None,
                prepare: vec![
                    cmd(&["mkdir", "-p", mnt]),
                    cmd(&["mkfs.ext4", "-q", "-F", &conv]),
                    cmd(&["mount", "-t", "ext4", &conv, mnt]),
                ],
                cleanup: vec![cmd(&["umount", mnt])],
                args: Vec::new(),
                preload: None,
            }
        }
        Mode::RocksdbZenfs => {
            let lib = o.zenfs_prefix.join("lib/libzenfs.so");
            let bin = o.zenfs_prefix.join("bin/zenfs");
            if !lib.is_file() || !bin.is_file() {
                return Err(format!(
                    "no ZenFS in {} (cargo xtask zenfs-build, docs/ROCKSDB-BENCH.md)",
                    o.zenfs_prefix.display()
                ));
            }
            let dev = zenfs_peer::dev_name(&env("ZIOB_ZNS_BLOCK")?);
            Place {
                db: "/kv-bench".into(),
                remove: None,
                prepare: zenfs_peer::prepare(&bin, &dev, "/tmp/kv-bench-zenfs-aux"),
                cleanup: zenfs_peer::restore(&dev),
                args: vec![format!("--fs_uri=zenfs://dev:{dev}")],
                preload: Some(lib),
            }
        }
        Mode::KvDemoNvme | Mode::KvDemoZbd => {
            let block = env("ZIOB_ZNS_BLOCK")?;
            let db = if m == Mode::KvDemoNvme {
                format!("nvme:{}", env("ZIOB_ZNS_CHAR")?)
            } else {
                format!("zbd:{block}")
            };
            Place {
                db,
                remove: None,
                prepare: vec![cmd(&["blkzone", "reset", &block])],
                cleanup: Vec::new(),
                args: Vec::new(),
                preload: None,
            }
        }
    })
}

fn remove(p: &Path) {
    let _ = std::fs::remove_dir_all(p);
    let _ = std::fs::remove_file(p);
}

/// The full argument list of one process.
pub fn process_args(
    o: &Options,
    common: &[String],
    m: Mode,
    place: &Place,
    sync: bool,
    value_size: u64,
    run: u32,
) -> Vec<String> {
    let num = if sync { o.sync_num } else { o.num };
    let mut a = common.to_vec();
    a.push(format!("--num={num}"));
    a.push(format!("--value_size={value_size}"));
    a.push(format!("--seed={}", 1000 + u64::from(run)));
    a.push(format!("--sync={}", u8::from(sync)));
    a.push(format!("--db={}", place.db));
    a.extend(place.args.iter().cloned());
    a.extend(mode_flags(o, m));
    a
}

/// The kv-demo binary: `--kv-demo`, else next to this binary, else PATH.
pub fn find_kv_demo(o: &Options) -> Option<PathBuf> {
    o.kv_demo.clone().filter(|p| p.is_file()).or_else(|| {
        std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(|d| d.join("kv-demo")))
            .filter(|p| p.is_file())
            .or_else(|| db_bench::which("kv-demo"))
    })
}

/// Whether `kv_demo` was built with fjall (`--engine=fjall`): a one-key run says.
fn probe_fjall(kv_demo: &Path, o: &Options) -> Result<(), String> {
    let dir = o
        .work_dir
        .join(format!("kv-bench-{}-fjall-probe", std::process::id()));
    let out = Command::new(kv_demo)
        .args([
            "--engine=fjall",
            "--benchmarks=fillseq",
            "--num=1",
            &format!("--db={}", dir.display()),
        ])
        .output();
    remove(&dir);
    match out {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        Err(e) => Err(format!("{}: {e}", kv_demo.display())),
    }
}

/// Runs one process; keeps its command and output under `raw`.
fn run_process(
    program: &Path,
    args: &[String],
    preload: Option<&Path>,
    raw: Option<&Path>,
    stem: &str,
) -> Result<Output, String> {
    let mut c = Command::new(program);
    c.args(args);
    if let Some(p) = preload {
        c.env("LD_PRELOAD", p);
    }
    let out = c
        .output()
        .map_err(|e| format!("{}: {e}", program.display()))?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    if let Some(dir) = raw {
        let _ = std::fs::write(
            dir.join(format!("{stem}.cmd")),
            format!(
                "{}{} {}\n",
                preload
                    .map(|p| format!("LD_PRELOAD={} ", p.display()))
                    .unwrap_or_default(),
                program.display(),
                args.join(" ")
            ),
        );
        let _ = std::fs::write(dir.join(format!("{stem}.out")), stdout.as_bytes());
        let _ = std::fs::write(dir.join(format!("{stem}.err")), stderr.as_bytes());
    }
    if !out.status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        return Err(format!(
            "{} exited with {}: {}",
            program.display(),
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ));
    }
    Ok(Output::parse(&stdout))
}

/// Runs every mode that can run here.
pub fn run_all(o: &Options, raw: Option<&Path>) -> Results {
    let common = common_flags(o);
    let mut res = Results {
        num: (o.num, o.sync_num),
        runs: o.runs,
        common_flags: common.clone(),
        ..Results::default()
    };
    let db_bench_path = db_bench::which(&o.db_bench);
    let kv_demo = find_kv_demo(o);
    res.kv_demo = kv_demo
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let mut ready: Vec<(Mode, PathBuf, Place)> = Vec::new();
    for &m in &o.modes {
        let program = if m.is_db_bench() {
            db_bench_path
                .clone()
                .ok_or_else(|| format!("`{}` not found (Debian package rocksdb-tools)", o.db_bench))
        } else {
            kv_demo.clone().ok_or_else(|| {
                "no kv-demo binary (cargo build -p kv-demo --bin kv-demo, or --kv-demo PATH)".into()
            })
        };
        let program = place(o, m).and_then(|pl| {
            let p = program?;
            if m == Mode::Fjall {
                probe_fjall(&p, o)?;
            }
            Ok((p, pl))
        });
        match program {
            Ok((p, pl)) => {
                res.modes.push((m, mode_flags(o, m)));
                ready.push((m, p, pl));
            }
            Err(reason) => {
                eprintln!("[kv-bench] skip {}: {reason}", m.name());
                res.skipped.push(Skipped { mode: m, reason });
            }
        }
    }
    if let Some(p) = &db_bench_path {
        if ready.iter().any(|(m, _, _)| m.is_db_bench()) {
            res.db_bench = db_bench::version(&p.display().to_string());
        }
    }
    let mut failed: Vec<Mode> = Vec::new();
    for run in 0..o.runs {
        for &vs in &o.value_sizes {
            for &sync in &o.syncs {
                let sync = sync == 1;
                for (m, program, pl) in &ready {
                    if failed.contains(m) {
                        continue;
                    }
                    let stem = format!("{}-v{vs}-s{}-r{run}", m.name(), u8::from(sync));
                    eprintln!("[kv-bench] {stem}");
                    let args = process_args(o, &common, *m, pl, sync, vs, run);
                    if let Some(p) = &pl.remove {
                        remove(p);
                    }
                    let out = pl
                        .prepare
                        .iter()
                        .try_for_each(|c| ziob_benches::process::run_checked(c))
                        .and_then(|()| {
                            run_process(program, &args, pl.preload.as_deref(), raw, &stem)
                        });
                    for c in &pl.cleanup {
                        if let Err(e) = ziob_benches::process::run_checked(c) {
                            eprintln!("[kv-bench] cleanup: {e}");
                        }
                    }
                    if let Some(p) = &pl.remove {
                        remove(p);
                    }
                    match out {
                        Ok(out) => {
                            record(&mut res, o, *m, sync, vs, run, &out);
                            // Kept after every process, so that a run cut short (the
                            // guest's time limit) still leaves what it measured.
                            if let Some(dir) = raw {
                                let _ = std::fs::write(
                                    dir.join("results.json"),
                                    serde_json::to_string_pretty(&res).unwrap_or_default(),
                                );
                            }
                        }
                        Err(error) => {
                            eprintln!("[kv-bench] {} failed: {error}", m.name());
                            res.failures.push(Failure { mode: *m, error });
                            failed.push(*m);
                        }
                    }
                }
            }
        }
    }
    res
}

fn record(res: &mut Results, o: &Options, m: Mode, sync: bool, vs: u64, run: u32, out: &Output) {
    for name in o.bench_names() {
        if let Some(r) = out.result(&name) {
            res.samples.push(Sample {
                mode: m,
                sync,
                value_size: vs,
                run,
                bench: name,
                ops_per_sec: r.ops_per_sec,
                found: r.found,
            });
        }
    }
    let counters = if m.is_db_bench() {
        WriteCounters {
            mode: m,
            sync,
            value_size: vs,
            run,
            user_bytes: out.ticker("rocksdb.bytes.written"),
            flush_compaction_bytes: Some(
                out.ticker("rocksdb.flush.write.bytes") + out.ticker("rocksdb.compact.write.bytes"),
            ),
            wal_bytes: Some(out.wal_bytes()),
            device_bytes: None,
        }
    } else {
        let t = |k: &str| out.tickers.get(k).copied();
        WriteCounters {
            mode: m,
            sync,
            value_size: vs,
            run,
            user_bytes: out.ticker("kvdemo.bytes.written"),
            flush_compaction_bytes: match (
                t("kvdemo.flush.write.bytes"),
                t("kvdemo.compact.write.bytes"),
            ) {
                (Some(f), Some(c)) => Some(f + c),
                _ => None,
            },
            wal_bytes: None,
            device_bytes: t("kvdemo.device.write.bytes"),
        }
    };
    res.writes.push(counters);
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn every_mode_gets_the_same_workload_flags() {
        let o =
            Options::try_parse_from(["kv-bench", "--num", "5000", "--value-sizes", "100"]).unwrap();
        let common = common_flags(&o);
        let strip = |v: Vec<String>, m: Mode| -> Vec<String> {
            let own = mode_flags(&o, m);
            v.into_iter()
                .filter(|a| !a.starts_with("--db=") && !own.contains(a))
                .collect()
        };
        let pl = |m: Mode| place(&o, m).unwrap();
        let args =
            |m: Mode, sync: bool, run: u32| process_args(&o, &common, m, &pl(m), sync, 100, run);
        let base = strip(args(Mode::Rocksdb, false, 2), Mode::Rocksdb);
        for m in Mode::ALL.into_iter().filter(|m| !m.guest_only()) {
            assert_eq!(strip(args(m, false, 2), m), base, "{m:?}");
        }
        assert!(place(&o, Mode::KvDemoZbd).unwrap_err().contains("--guest"));
        for f in [
            "--num=5000",
            "--seed=1002",
            "--sync=0",
            "--compression_type=none",
            "--bloom_bits=10",
            "--write_buffer_size=16777216",
            "--cache_size=8388608",
            "--statistics",
        ] {
            assert!(base.contains(&f.to_string()), "{f}");
        }
        let direct = args(Mode::RocksdbDirect, true, 0);
        assert!(direct.contains(&"--use_direct_reads=1".to_string()));
        assert!(
            direct.contains(&"--num=20000".to_string()),
            "sync=1 uses --sync-num"
        );
        let kv = args(Mode::KvDemoNobuf, false, 0);
        assert!(kv
            .iter()
            .any(|a| a.starts_with("--db=emu:/var/tmp/kv-bench-")));
        assert!(kv.contains(&"--ziob=off".to_string()));
        // O_DIRECT unless the mode is the page-cache one.
        let db = |m: Mode| {
            args(m, false, 0)
                .into_iter()
                .find(|a| a.starts_with("--db=emu:"))
                .unwrap()
        };
        assert!(db(Mode::KvDemoPagecache).ends_with(".zns,direct=0"));
        for m in [Mode::KvDemo, Mode::KvDemoNobuf] {
            assert!(db(m).ends_with(".zns"), "{m:?}");
        }
    }

    #[test]
    fn a_write_rate_limit_goes_to_every_mode_and_none_by_default() {
        let flag = "--benchmark_write_rate_limit=1160000".to_string();
        let none = Options::try_parse_from(["kv-bench"]).unwrap();
        assert!(!common_flags(&none)
            .iter()
            .any(|a| a.starts_with("--benchmark_write_rate_limit")));
        let o = Options::try_parse_from(["kv-bench", "--write-rate-limit", "1160000"]).unwrap();
        let common = common_flags(&o);
        for m in Mode::ALL.into_iter().filter(|m| !m.guest_only()) {
            let args = process_args(&o, &common, m, &place(&o, m).unwrap(), false, 100, 0);
            assert!(args.contains(&flag), "{m:?}");
        }
        let g = crate::guest::guest_args(&o, &[Mode::KvDemoNvme], std::path::Path::new("/tmp/x"));
        let i = g.iter().position(|a| a == "--write-rate-limit").unwrap();
        assert_eq!(g[i + 1], "1160000");
    }

    #[test]
    fn write_amplification_from_the_counters() {
        let w = WriteCounters {
            mode: Mode::Rocksdb,
            sync: false,
            value_size: 100,
            run: 0,
            user_bytes: 1000,
            flush_compaction_bytes: Some(1500),
            wal_bytes: Some(1100),
            device_bytes: None,
        };
        assert_eq!(w.write_amp(), Some(1.5));
        assert_eq!(w.total_write_amp(), Some(2.6));
        let k = WriteCounters {
            mode: Mode::KvDemo,
            device_bytes: Some(3000),
            wal_bytes: None,
            ..w
        };
        assert_eq!(k.total_write_amp(), Some(3.0));
    }
}
