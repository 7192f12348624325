//! `nvme-bench`: the `nvme:` backend (NVMe passthrough through ZIOB's runtime) against fio's
//! `io_uring_cmd` engine on the same ZNS namespace, in the same run.
//!
//! Workloads (each on freshly reset zones where it writes):
//! - `write64k`: 64 KiB sequential writes at the write pointer, QD1, filling `--zones` zones
//!   (fio: `--zonemode=strided`, zone size = capacity, zone skip = zone size - capacity);
//! - `append64k`: 64 KiB Zone Appends over the same zones, QD1 and one task per zone up to the
//!   open limit (fio 3.33 has no append for `io_uring_cmd`: ZIOB only, compared to `write64k`);
//! - `randread4k`: 4 KiB random reads below the capacity of the written zones, QD1 and QD32.
//!
//! Latency is per op, submission to completion (fio: `lat_ns` percentiles). Under TCG the
//! absolute numbers mean little and vary 3–4× between runs: compare the ratios.
//!
//! ```sh
//! cargo build --release -p ziob-benches --bin nvme-bench
//! cargo xtask vm-run -- target/release/nvme-bench            # $ZIOB_ZNS_CHAR, fio included
//! ```

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use clap::Parser;
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::Value;
use ziob::backends::{
    open_device, runtime_builder_for, AnyDevice, ZoneAction, ZoneTarget, ZonedDevice,
};
use ziob::DmaBuf;
use ziob_benches::args::{positive, positive_seconds_f64};

/// Bytes per sequential write or append.
const SEQ_IO_BYTES: u64 = 64 * 1024;
/// Bytes per random read.
const RAND_IO_BYTES: u64 = 4096;

/// nvme: vs fio io_uring_cmd on one ZNS namespace.
#[derive(Parser, Debug)]
struct Args {
    /// Generic char device of the ZNS namespace (default: $ZIOB_ZNS_CHAR).
    #[arg(long)]
    dev: Option<String>,
    /// Zones written by the write and append workloads (and read by the random reads).
    #[arg(long, default_value_t = 4, value_parser = positive::<u32>)]
    zones: u32,
    /// Seconds per random-read measurement.
    #[arg(long, default_value = "3", value_parser = positive_seconds_f64)]
    secs: f64,
    /// Queue depths of the random-read workload.
    #[arg(long, value_delimiter = ',', default_value = "1,32", value_parser = positive::<u32>)]
    read_qd: Vec<u32>,
    /// Rounds: every workload runs ZIOB then fio this many times; the table shows medians
    /// (TCG throughput varies a lot between runs).
    #[arg(long, default_value_t = 3, value_parser = positive::<u32>)]
    rounds: u32,
    /// Skip fio.
    #[arg(long)]
    no_fio: bool,
    /// Print the results as JSON on stdout (the table goes to stderr).
    #[arg(long)]
    json: bool,
}

/// One measured workload of one runner.
#[derive(Debug, Clone, Serialize)]
struct Row {
    workload: String,
    runner: &'static str,
    qd: u32,
    ops: u64,
    iops: f64,
    mib_per_s: f64,
    lat_p50_us: f64,
    lat_p99_us: f64,
}

fn row(
    workload: &str,
    runner: &'static str,
    qd: u32,
    bytes: u64,
    ops: u64,
    secs: f64,
    h: &Histogram<u64>,
) -> Row {
    Row {
        workload: workload.into(),
        runner,
        qd,
        ops,
        iops: ops as f64 / secs,
        mib_per_s: (ops * bytes) as f64 / secs / (1024.0 * 1024.0),
        lat_p50_us: h.value_at_quantile(0.5) as f64 / 1e3,
        lat_p99_us: h.value_at_quantile(0.99) as f64 / 1e3,
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds")
}

/// SplitMix64 for the random offsets.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

async fn reset_all(d: &AnyDevice) {
    d.zone_action(ZoneAction::Reset, ZoneTarget::All)
        .await
        .expect("reset all zones");
}

/// Fills `zones` zones with 64 KiB writes (QD1) or appends (`tasks` zones at a time).
async fn ziob_fill(
    d: &AnyDevice,
    zones: u32,
    append: bool,
    tasks: u32,
) -> (u64, f64, Histogram<u64>) {
    reset_all(d).await;
    let cap = d.geometry().zone_capacity_bytes;
    let hist = Rc::new(RefCell::new(histogram()));
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let d = d.clone();
            let hist = hist.clone();
            ziob_runtime::spawn(async move {
                let mut ops = 0u64;
                let mut buf = DmaBuf::from_slice(&vec![0xA5; SEQ_IO_BYTES as usize]);
                for z in (t..zones).step_by(tasks as usize) {
                    let mut at = 0;
                    while at + SEQ_IO_BYTES <= cap {
                        let t0 = Instant::now();
                        if append {
                            let (r, b) = d.append(z, buf).await;
                            buf = b;
                            r.unwrap_or_else(|e| panic!("append to zone {z}: {e}"));
                        } else {
                            let (r, b) = d.write(z, at, buf).await;
                            buf = b;
                            r.unwrap_or_else(|e| panic!("write to zone {z} at {at}: {e}"));
                        }
                        hist.borrow_mut()
                            .record(t0.elapsed().as_nanos() as u64)
                            .unwrap();
                        at += SEQ_IO_BYTES;
                        ops += 1;
                    }
                }
                ops
            })
        })
        .collect();
    let mut ops = 0;
    for h in handles {
        ops += h.await;
    }
    let secs = start.elapsed().as_secs_f64();
    let h = hist.borrow().clone();
    (ops, secs, h)
}

/// 4 KiB random reads below the capacity of the first `zones` zones, `qd` tasks, `secs`.
async fn ziob_randread(
    d: &AnyDevice,
    zones: u32,
    qd: u32,
    secs: f64,
) -> (u64, f64, Histogram<u64>) {
    let g = *d.geometry();
    let blocks = g.zone_capacity_bytes / RAND_IO_BYTES;
    let hist = Rc::new(RefCell::new(histogram()));
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let start = Instant::now();
    let handles: Vec<_> = (0..qd)
        .map(|t| {
            let d = d.clone();
            let hist = hist.clone();
            ziob_runtime::spawn(async move {
                let mut rng = Rng(0xBE7C_0000 + u64::from(t));
                let mut buf = DmaBuf::with_capacity(RAND_IO_BYTES as usize);
                let mut ops = 0u64;
                while Instant::now() < end {
                    let z = rng.below(u64::from(zones)) as u32;
                    let off = rng.below(blocks) * RAND_IO_BYTES;
                    let t0 = Instant::now();
                    let (r, b) = d.read(z, off, RAND_IO_BYTES as usize, buf).await;
                    buf = b;
                    r.unwrap_or_else(|e| panic!("read zone {z} at {off}: {e}"));
                    hist.borrow_mut()
                        .record(t0.elapsed().as_nanos() as u64)
                        .unwrap();
                    ops += 1;
                }
                ops
            })
        })
        .collect();
    let mut ops = 0;
    for h in handles {
        ops += h.await;
    }
    let secs = start.elapsed().as_secs_f64();
    let h = hist.borrow().clone();
    (ops, secs, h)
}

/// fio `io_uring_cmd` on `dev`; returns the row for `direction` (`read` or `write`).
fn fio(
    dev: &str,
    workload: &str,
    qd: u32,
    bytes: u64,
    extra: &[String],
    direction: &str,
) -> Result<Row, String> {
    let mut args = vec![
        format!("--name={workload}"),
        format!("--filename={dev}"),
        "--ioengine=io_uring_cmd".into(),
        "--cmd_type=nvme".into(),
        format!("--bs={bytes}"),
        format!("--iodepth={qd}"),
        "--lat_percentiles=1".into(),
        "--numjobs=1".into(),
        "--output-format=json".into(),
    ];
    args.extend_from_slice(extra);
    let mut words = vec!["fio".to_string()];
    words.extend(args);
    let stdout = ziob_benches::process::output_checked(&words)?;
    let start = stdout.find('{').ok_or("fio printed no JSON")?;
    let v: Value = serde_json::from_str(&stdout[start..]).map_err(|e| format!("fio JSON: {e}"))?;
    let s = &v["jobs"][0][direction];
    let f = |x: &Value, what: &str| {
        x.as_f64()
            .ok_or_else(|| format!("fio JSON: no {direction}.{what}"))
    };
    let ops = f(&s["total_ios"], "total_ios")? as u64;
    let secs = f(&s["runtime"], "runtime")? / 1e3;
    if ops == 0 || secs <= 0.0 {
        return Err(format!("fio {workload}: no {direction} completed"));
    }
    let pct = &s["lat_ns"]["percentile"];
    Ok(Row {
        workload: workload.into(),
        runner: "fio",
        qd,
        ops,
        iops: ops as f64 / secs,
        mib_per_s: (ops * bytes) as f64 / secs / (1024.0 * 1024.0),
        lat_p50_us: f(&pct["50.000000"], "lat_ns.percentile.50")? / 1e3,
        lat_p99_us: f(&pct["99.000000"], "lat_ns.percentile.99")? / 1e3,
    })
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// One row per (workload, QD, runner) with the median of each column over the rounds.
fn medians(rows: &[Row]) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::new();
    for r in rows {
        if out
            .iter()
            .any(|o| o.workload == r.workload && o.qd == r.qd && o.runner == r.runner)
        {
            continue;
        }
        let same: Vec<&Row> = rows
            .iter()
            .filter(|o| o.workload == r.workload && o.qd == r.qd && o.runner == r.runner)
            .collect();
        let m = |f: fn(&Row) -> f64| median(same.iter().map(|r| f(r)).collect());
        out.push(Row {
            ops: median(same.iter().map(|r| r.ops as f64).collect()) as u64,
            iops: m(|r| r.iops),
            mib_per_s: m(|r| r.mib_per_s),
            lat_p50_us: m(|r| r.lat_p50_us),
            lat_p99_us: m(|r| r.lat_p99_us),
            ..r.clone()
        });
    }
    out
}

fn table(rows: &[Row]) -> String {
    let mut s = format!(
        "{:<11} {:>3} {:<5} {:>9} {:>9} {:>9} {:>10} {:>10}  {}\n",
        "workload", "qd", "runner", "ops", "IOPS", "MiB/s", "p50 µs", "p99 µs", "ziob/fio IOPS"
    );
    for r in rows {
        let peer = rows
            .iter()
            .find(|p| p.runner == "fio" && p.workload == r.workload && p.qd == r.qd);
        let ratio = match (r.runner, peer) {
            ("ziob", Some(p)) => format!("{:.2}", r.iops / p.iops),
            _ => String::new(),
        };
        s += &format!(
            "{:<11} {:>3} {:<5} {:>9} {:>9.0} {:>9.1} {:>10.1} {:>10.1}  {}\n",
            r.workload,
            r.qd,
            r.runner,
            r.ops,
            r.iops,
            r.mib_per_s,
            r.lat_p50_us,
            r.lat_p99_us,
            ratio
        );
    }
    let iops = |w: &str, qd: u32| {
        rows.iter()
            .find(|r| r.runner == "ziob" && r.workload == w && r.qd == qd)
            .map(|r| r.iops)
    };
    if let (Some(a), Some(w)) = (iops("append64k", 1), iops("write64k", 1)) {
        s += &format!("ziob append64k / write64k at QD1: {:.2}\n", a / w);
    }
    s
}

fn main() {
    ziob::logging::init();
    let args = Args::parse();
    let dev = args
        .dev
        .clone()
        .or_else(|| std::env::var("ZIOB_ZNS_CHAR").ok())
        .unwrap_or_else(|| {
            eprintln!("nvme-bench: no device: pass --dev /dev/ngXnY or run in the guest (cargo xtask vm-run)");
            std::process::exit(2)
        });
    let spec = format!("nvme:{dev}");
    let rt = runtime_builder_for(&spec)
        .cores(1)
        .build()
        .expect("runtime");
    let (zones, secs, no_fio) = (args.zones, args.secs, args.no_fio);
    let read_qds = args.read_qd.clone();
    let rounds = args.rounds;
    let rows = rt
        .block_on(move || async move {
            let d = open_device(&spec).await.map_err(|e| e.to_string())?;
            let g = *d.geometry();
            if zones > g.zone_count {
                return Err(format!(
                    "--zones {zones}: the device has {} zones",
                    g.zone_count
                ));
            }
            eprintln!("nvme-bench: {spec}: {g:?}");
            let mut rows = Vec::new();
            let fio_run = |workload: &str, qd: u32, bytes: u64, extra: Vec<String>, dir: &str| {
                if no_fio {
                    return None;
                }
                fio(&dev, workload, qd, bytes, &extra, dir)
                    .map_err(|e| eprintln!("nvme-bench: {e}"))
                    .ok()
            };
            // fio's view of the zones: write `capacity` bytes per zone, then skip to the next.
            let strided = vec![
                "--zonemode=strided".to_string(),
                format!("--zonesize={}", g.zone_capacity_bytes),
                format!("--zoneskip={}", g.zone_size_bytes - g.zone_capacity_bytes),
                "--offset=0".into(),
                format!("--size={}", u64::from(zones) * g.zone_size_bytes),
            ];

            for round in 0..rounds {
                eprintln!("nvme-bench: round {}/{rounds}", round + 1);
                let (ops, s, h) = ziob_fill(&d, zones, false, 1).await;
                rows.push(row("write64k", "ziob", 1, SEQ_IO_BYTES, ops, s, &h));
                reset_all(&d).await;
                let mut extra = strided.clone();
                extra.push("--rw=write".into());
                extra.push(format!(
                    "--io_size={}",
                    u64::from(zones) * g.zone_capacity_bytes
                ));
                rows.extend(fio_run("write64k", 1, SEQ_IO_BYTES, extra, "write"));

                let (ops, s, h) = ziob_fill(&d, zones, true, 1).await;
                rows.push(row("append64k", "ziob", 1, SEQ_IO_BYTES, ops, s, &h));
                let tasks = g.max_open_zones.unwrap_or(4).min(zones).max(1);
                let (ops, s, h) = ziob_fill(&d, zones, true, tasks).await;
                rows.push(row("append64k", "ziob", tasks, SEQ_IO_BYTES, ops, s, &h));

                // The zones are written (by the last fill): random reads over their data.
                for &qd in &read_qds {
                    let (ops, s, h) = ziob_randread(&d, zones, qd, secs).await;
                    rows.push(row("randread4k", "ziob", qd, RAND_IO_BYTES, ops, s, &h));
                    let mut extra = strided.clone();
                    extra.extend([
                        "--rw=randread".to_string(),
                        "--norandommap".into(),
                        "--time_based".into(),
                        format!("--runtime={}ms", (secs * 1e3) as u64),
                    ]);
                    rows.extend(fio_run("randread4k", qd, RAND_IO_BYTES, extra, "read"));
                }
            }
            reset_all(&d).await;
            Ok(rows)
        })
        .expect("benchmark panicked")
        .unwrap_or_else(|e| {
            eprintln!("nvme-bench: {e}");
            std::process::exit(1)
        });
    let med = medians(&rows);
    eprintln!("medians of {} round(s):", args.rounds);
    eprint!("{}", table(&med));
    if args.json {
        let all = serde_json::json!({ "rounds": rows, "medians": med });
        println!("{}", serde_json::to_string_pretty(&all).expect("json"));
    }
}
