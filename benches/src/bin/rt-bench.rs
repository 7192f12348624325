//! `rt-bench`: NOP round trips and 4 KiB random reads through ZIOB, a plain io-uring loop,
//! fio and (feature `peers`) tokio-uring, monoio and glommio, in one run; and the cost of a
//! task switch (`yield`) in ZIOB next to a bare async-task loop (`async-task`).
//!
//! ```text
//! rt-bench [--file PATH] [--file-size 1G] [--duration-secs 3] [--qd 1,32]
//!          [--modes buffered,direct] [--workloads nop,randread,yield]
//!          [--runners ziob,ziob-fixed,plain,plain-fixed,fio,async-task] [--repeat 3] [--json]
//! ```
//! Repeats are interleaved (every runner of every configuration, then again), so slow drift
//! of a shared machine hits all runners alike. Medians and ratios are printed at the end.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use ziob_benches::report::{ConfigResult, Report, RunnerResult};
use ziob_benches::spec::{parse_size_bytes, Mode, RunSpec, Runner, Workload, BLOCK_SIZE_BYTES};
use ziob_benches::{bare_async_task, fio, plain_uring, testfile, ziob_rt};

#[derive(Parser, Debug)]
#[command(
    name = "rt-bench",
    about = "ZIOB runtime vs plain io-uring, fio and peer runtimes"
)]
struct Args {
    /// Test file (created and filled when missing). Default: `<tmp>/ziob-rt-bench-<size>.dat`.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Size of the test file (K/M/G/T binary suffixes).
    #[arg(long, default_value = "1G", value_parser = parse_size_bytes)]
    file_size: u64,
    /// Length of each measured window in seconds.
    #[arg(long, default_value_t = 3.0)]
    duration_secs: f64,
    /// Warm-up before each measured window in seconds.
    #[arg(long, default_value_t = 0.5)]
    warmup_secs: f64,
    /// Queue depths.
    #[arg(long, value_delimiter = ',', default_value = "1,32")]
    qd: Vec<usize>,
    /// File modes for randread.
    #[arg(long, value_delimiter = ',', default_value = "buffered,direct")]
    modes: Vec<Mode>,
    /// Workloads.
    #[arg(long, value_delimiter = ',', default_value = "nop,randread,yield")]
    workloads: Vec<Workload>,
    /// Runners (default: ziob,ziob-fixed,plain,plain-fixed,fio,async-task and, with feature
    /// `peers`, tokio-uring,monoio,glommio). Also: ziob-eager, ziob-fixed-eager, plain-eager,
    /// plain-fixed-eager, fio-fixed. Each runs the workloads it supports.
    #[arg(long, value_delimiter = ',')]
    runners: Option<Vec<Runner>>,
    /// Repeats of every measurement (medians are reported).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Print one JSON document on stdout instead of the table.
    #[arg(long)]
    json: bool,
}

fn default_runners() -> Vec<Runner> {
    let mut names = vec![
        "ziob",
        "ziob-fixed",
        "plain",
        "plain-fixed",
        "fio",
        "async-task",
    ];
    if cfg!(feature = "peers") {
        names.extend(["tokio-uring", "monoio", "glommio"]);
    }
    names.into_iter().map(|n| n.parse().unwrap()).collect()
}

fn run_one(spec: &RunSpec, runner: Runner, result: &mut RunnerResult) -> Result<(), String> {
    let sample = match runner {
        Runner::Ziob { fixed, eager } => {
            let (s, extra) = ziob_rt::run(spec, fixed, eager)?;
            result.ziob = Some(extra);
            s
        }
        Runner::Plain { fixed, eager } => plain_uring::run(spec, fixed, eager)?,
        Runner::Fio { fixed } => fio::run(spec, fixed)?,
        Runner::AsyncTask => bare_async_task::run(spec)?,
        peer => run_peer(spec, peer)?,
    };
    result.samples.push(sample);
    Ok(())
}

#[cfg(feature = "peers")]
fn run_peer(spec: &RunSpec, runner: Runner) -> Result<ziob_benches::meter::Sample, String> {
    ziob_benches::peers::run(spec, runner)
}

#[cfg(not(feature = "peers"))]
fn run_peer(_spec: &RunSpec, runner: Runner) -> Result<ziob_benches::meter::Sample, String> {
    Err(format!(
        "{runner} needs the `peers` feature (cargo run --release -p ziob-benches --features peers)"
    ))
}

fn main() {
    ziob::logging::init();
    let args = Args::parse();
    if let Err(e) = real_main(args) {
        eprintln!("rt-bench: {e}");
        std::process::exit(1);
    }
}

fn real_main(args: Args) -> Result<(), String> {
    if args.file_size == 0 || !args.file_size.is_multiple_of(BLOCK_SIZE_BYTES) {
        return Err(format!(
            "--file-size must be a positive multiple of {BLOCK_SIZE_BYTES}"
        ));
    }
    if args.qd.iter().any(|&q| q == 0 || q > 4096) {
        return Err("--qd values must be between 1 and 4096".into());
    }
    if !args.duration_secs.is_finite()
        || args.duration_secs <= 0.0
        || !args.warmup_secs.is_finite()
        || args.warmup_secs < 0.0
    {
        return Err("--duration-secs must be > 0 and --warmup-secs >= 0".into());
    }
    // `Duration::from_secs_f64` panics on values it cannot hold (e.g. 1e30).
    if Duration::try_from_secs_f64(args.duration_secs).is_err()
        || Duration::try_from_secs_f64(args.warmup_secs).is_err()
    {
        return Err("--duration-secs and --warmup-secs are too long".into());
    }
    if args.repeat == 0 {
        return Err("--repeat must be at least 1".into());
    }
    let runners = args.runners.clone().unwrap_or_else(default_runners);
    let path = args
        .file
        .clone()
        .unwrap_or_else(|| testfile::default_path(args.file_size));
    let needs_file = args.workloads.contains(&Workload::Randread);
    if needs_file {
        eprintln!(
            "rt-bench: test file {} ({} MiB)",
            path.display(),
            args.file_size >> 20
        );
        if testfile::ensure(&path, args.file_size)
            .map_err(|e| format!("creating {}: {e}", path.display()))?
        {
            eprintln!("rt-bench: wrote the test file");
        }
    }

    // Configurations in a stable order: NOP per QD, then randread per mode and QD.
    let mut configs = Vec::new();
    for &w in &args.workloads {
        match w {
            Workload::Nop | Workload::Yield => {
                for &qd in &args.qd {
                    configs.push((w, None, qd));
                }
            }
            Workload::Randread => {
                for &m in &args.modes {
                    for &qd in &args.qd {
                        configs.push((w, Some(m), qd));
                    }
                }
            }
        }
    }
    let mut report = Report {
        tool: "rt-bench",
        settings: serde_json::json!({
            "file": path.display().to_string(),
            "file_size_bytes": args.file_size,
            "block_size_bytes": BLOCK_SIZE_BYTES,
            "duration_secs": args.duration_secs,
            "warmup_secs": args.warmup_secs,
            "qd": args.qd,
            "repeat": args.repeat,
            "runners": runners.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
            "cores": 1,
        }),
        machine: machine_info(),
        configs: configs
            .iter()
            .map(|&(workload, mode, qd)| ConfigResult {
                workload,
                mode,
                qd,
                plain_best: None,
                runners: runners
                    .iter()
                    .filter(|r| r.supports(workload))
                    .map(|&r| RunnerResult::new(r))
                    .collect(),
            })
            .collect(),
        submit_policy: Vec::new(),
        notes: not_measured(&args.workloads, &runners),
    };

    for rep in 0..args.repeat {
        let mut warmed = false;
        for c in report.configs.iter_mut() {
            let spec = RunSpec {
                workload: c.workload,
                mode: c.mode.unwrap_or(Mode::Buffered),
                qd: c.qd,
                path: path.clone(),
                file_size_bytes: args.file_size,
                warmup: Duration::from_secs_f64(args.warmup_secs),
                duration: Duration::from_secs_f64(args.duration_secs),
            };
            if c.mode == Some(Mode::Buffered) && !warmed {
                testfile::warm_page_cache(&path)
                    .map_err(|e| format!("warming {}: {e}", path.display()))?;
                warmed = true;
            }
            for r in c.runners.iter_mut() {
                let runner = r.runner;
                match run_one(&spec, runner, r) {
                    Ok(()) => {
                        let s = r.samples.last().expect("just pushed");
                        eprintln!(
                            "[{}/{}] {:<8} {:<8} qd{:<4} {:<17} {:>9.1}k IOPS {:>7.3} µs cpu/op",
                            rep + 1,
                            args.repeat,
                            spec.workload,
                            c.mode.map(|m| m.to_string()).unwrap_or_default(),
                            spec.qd,
                            runner.to_string(),
                            s.iops / 1e3,
                            s.cpu_ns_per_op / 1e3
                        );
                    }
                    Err(e) => {
                        eprintln!("[{}/{}] {runner}: FAILED: {e}", rep + 1, args.repeat);
                        r.errors.push(e);
                    }
                }
            }
        }
    }
    report.finish();
    if args.json {
        // The table goes to stderr so a run saved as JSON still shows its summary.
        eprint!("{}", report.table());
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", report.table());
    }
    Ok(())
}

/// One line per selected I/O runner without a NOP op, with the reason (yield rows are ZIOB and
/// async-task by design; async-task does no I/O).
fn not_measured(workloads: &[Workload], runners: &[Runner]) -> Vec<String> {
    let mut notes = Vec::new();
    for &w in workloads.iter().filter(|&&w| w == Workload::Nop) {
        for r in runners.iter().filter(|r| **r != Runner::AsyncTask) {
            if let Some(why) = r.unsupported_reason(w) {
                notes.push(format!("{w}: {r} not measured: {why}"));
            }
        }
    }
    notes
}

fn machine_info() -> serde_json::Value {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    serde_json::json!({ "kernel": kernel, "cpus": cpus })
}
