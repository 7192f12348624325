//! `guest-bench`: ZIOB's `zbd:` backend against fio's io_uring engine on the same zoned block
//! device, inside the test guest:
//!
//! ```sh
//! cargo build --release -p ziob-benches --bin guest-bench
//! cargo xtask vm-run -- sh -c 'target/release/guest-bench --dev $ZIOB_ZNS_BLOCK'
//! ```
//!
//! Workloads (one core, `O_DIRECT`): 64 KiB sequential zone writes at QD1 over the first
//! `--zones` zones (ZIOB: `write` at the write pointer; fio: `--zonemode=zbd --rw=write`),
//! then 4 KiB random reads of that data at QD1 and QD32 (fio: `--rw=randread`). Every run
//! starts from a Reset All. Under TCG absolute numbers vary 3–4× between runs: read the
//! ZIOB/fio ratios, which come from the same guest. The nvme backend joins with its own rows.

use std::process::Command;
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::Value;
use ziob::{open_device, AnyDevice, DmaBuf, Runtime, ZoneAction, ZoneTarget, ZonedDevice};
use ziob_benches::args::positive;
use ziob_benches::rng::XorShift;

/// Command line of `guest-bench`.
#[derive(Parser, Debug, Clone)]
#[command(about = "zbd: backend vs fio io_uring on one zoned block device (run in the guest)")]
struct Opts {
    /// The zoned block device, e.g. /dev/nvme0n1 ($ZIOB_ZNS_BLOCK in the guest)
    #[arg(long)]
    dev: String,
    /// Zones written by the write workloads and read by the read workloads
    #[arg(long, default_value_t = 8, value_parser = positive::<u32>)]
    zones: u32,
    /// Seconds per random-read run
    #[arg(long, default_value_t = 3, value_parser = positive::<u64>)]
    secs: u64,
}

/// Bytes per sequential write.
const WRITE_BYTES: u64 = 64 * 1024;
/// Bytes per random read.
const READ_BYTES: u64 = 4096;

/// One result row: ops per second of ZIOB and of fio.
struct Row {
    name: String,
    ziob_ops_per_sec: f64,
    fio_ops_per_sec: f64,
}

fn fio(args: &[String]) -> Result<f64, String> {
    let mut words = vec!["fio".to_string()];
    words.extend_from_slice(args);
    words.push("--output-format=json".into());
    let stdout = ziob_benches::process::output_checked(&words)?;
    let v: Value = serde_json::from_str(&stdout).map_err(|e| format!("fio json: {e}"))?;
    let job = &v["jobs"][0];
    let iops =
        job["read"]["iops"].as_f64().unwrap_or(0.0) + job["write"]["iops"].as_f64().unwrap_or(0.0);
    if iops <= 0.0 {
        return Err(format!("fio reported no I/O for {args:?}"));
    }
    Ok(iops)
}

fn fio_common(o: &Opts, span_bytes: u64) -> Vec<String> {
    vec![
        "--name=guest-bench".into(),
        format!("--filename={}", o.dev),
        "--ioengine=io_uring".into(),
        "--direct=1".into(),
        "--zonemode=zbd".into(),
        "--offset=0".into(),
        format!("--size={span_bytes}"),
        "--numjobs=1".into(),
    ]
}

async fn reset_all(dev: &AnyDevice) {
    dev.zone_action(ZoneAction::Reset, ZoneTarget::All)
        .await
        .expect("reset all zones");
}

/// ZIOB: fills `zones` zones with 64 KiB writes at QD1; returns writes per second.
async fn ziob_writes(dev: &AnyDevice, zones: u32) -> f64 {
    reset_all(dev).await;
    let cap = dev.geometry().zone_capacity_bytes;
    let mut buf = DmaBuf::zeroed(WRITE_BYTES as usize);
    let start = Instant::now();
    let mut ops = 0u64;
    for zone in 0..zones {
        let mut off = 0;
        while off < cap {
            let (res, b) = dev.write(zone, off, buf).await;
            res.expect("zbd write");
            buf = b;
            off += WRITE_BYTES;
            ops += 1;
        }
    }
    ops as f64 / start.elapsed().as_secs_f64()
}

/// ZIOB: `qd` tasks reading random 4 KiB blocks of the first `zones` (Full) zones for `secs`.
async fn ziob_reads(dev: &AnyDevice, zones: u32, qd: u32, secs: u64) -> f64 {
    let cap_blocks = dev.geometry().zone_capacity_bytes / READ_BYTES;
    let deadline = Instant::now() + Duration::from_secs(secs);
    let start = Instant::now();
    let tasks: Vec<_> = (0..qd)
        .map(|t| {
            let dev = dev.clone();
            ziob::runtime::spawn(async move {
                let mut rng = XorShift::new(u64::from(t) + 1);
                let mut buf = DmaBuf::with_capacity(READ_BYTES as usize);
                let mut ops = 0u64;
                while Instant::now() < deadline {
                    let zone = (rng.next_u64() % u64::from(zones)) as u32;
                    let off = rng.block_index(cap_blocks) * READ_BYTES;
                    let (res, b) = dev.read(zone, off, READ_BYTES as usize, buf).await;
                    res.expect("zbd read");
                    buf = b;
                    ops += 1;
                }
                ops
            })
        })
        .collect();
    let mut ops = 0;
    for t in tasks {
        ops += t.await;
    }
    ops as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    ziob::logging::init();
    let o = Opts::parse();
    let rt = Runtime::builder().cores(1).build().expect("runtime");
    let spec = format!("zbd:{}", o.dev);
    let opts = o.clone();
    let (ziob_rows, span_bytes) = rt
        .block_on(move || async move {
            let dev = open_device(&spec).await.map_err(|e| e.to_string())?;
            let g = *dev.geometry();
            if opts.zones > g.zone_count {
                return Err(format!(
                    "--zones {}: the device has {} zones",
                    opts.zones, g.zone_count
                ));
            }
            eprintln!("guest-bench: {spec}: {g:?}");
            let w = ziob_writes(&dev, opts.zones).await;
            let r1 = ziob_reads(&dev, opts.zones, 1, opts.secs).await;
            let r32 = ziob_reads(&dev, opts.zones, 32, opts.secs).await;
            reset_all(&dev).await;
            Ok(([w, r1, r32], u64::from(opts.zones) * g.zone_size_bytes))
        })
        .expect("the benchmark panicked")
        .unwrap_or_else(|e: String| {
            eprintln!("guest-bench: {e}");
            std::process::exit(1)
        });
    let common = fio_common(&o, span_bytes);
    let with = |extra: &[String]| {
        let mut a = common.clone();
        a.extend_from_slice(extra);
        a
    };
    let fio_write = fio(&with(&[
        "--rw=write".into(),
        format!("--bs={WRITE_BYTES}"),
        "--iodepth=1".into(),
    ]))
    .expect("fio write");
    let fio_read = |qd: u32| {
        fio(&with(&[
            "--rw=randread".into(),
            format!("--bs={READ_BYTES}"),
            format!("--iodepth={qd}"),
            "--norandommap".into(),
            "--time_based".into(),
            format!("--runtime={}s", o.secs),
        ]))
        .expect("fio randread")
    };
    let rows = [
        Row {
            name: "seq write 64K QD1".into(),
            ziob_ops_per_sec: ziob_rows[0],
            fio_ops_per_sec: fio_write,
        },
        Row {
            name: "randread 4K QD1".into(),
            ziob_ops_per_sec: ziob_rows[1],
            fio_ops_per_sec: fio_read(1),
        },
        Row {
            name: "randread 4K QD32".into(),
            ziob_ops_per_sec: ziob_rows[2],
            fio_ops_per_sec: fio_read(32),
        },
    ];
    // fio leaves its zones written: leave the device as the next user expects it.
    let _ = Command::new("blkzone").args(["reset", &o.dev]).status();
    println!(
        "{:<20} {:>12} {:>12} {:>9}",
        "workload", "zbd ops/s", "fio ops/s", "zbd/fio"
    );
    for r in rows {
        println!(
            "{:<20} {:>12.0} {:>12.0} {:>9.2}",
            r.name,
            r.ziob_ops_per_sec,
            r.fio_ops_per_sec,
            r.ziob_ops_per_sec / r.fio_ops_per_sec
        );
    }
}
