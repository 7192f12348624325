//! `backend_bench`: one zoned device backend, raw (no ZIOB buffering), on one runtime core.
//! Meant to compare `spdk:`, `nvme:` and `zbd:` on the same QEMU ZNS namespace in one guest
//! run (see docs/SPDK.md for the command):
//!
//! - `write64k`: 64 KiB writes at the write pointer, QD1, zone after zone (`--zones` zones);
//! - `append64k_qd1` / `append64k_qd16`: 64 KiB zone appends to the next `--zones` zones;
//! - `randread4k_qd1` / `randread4k_qd32`: 4 KiB random reads of the written zones.
//!
//! Per workload: IOPS, latency mean/p50/p99/p99.9, CPU per I/O (process user+system time
//! divided by ops: for `spdk:` this includes the busy polling) and CPU utilisation. One JSON
//! object per line on stdout, a table on stderr.
//!
//! `backend_bench SPEC [--zones N] [--secs S]`

use std::time::{Duration, Instant};

use ziob_backends::{open_device, AnyDevice, ZoneAction, ZoneTarget, ZonedDevice};
use ziob_runtime::DmaBuf;

const WRITE_BYTES: usize = 64 * 1024;
const READ_BYTES: usize = 4096;

fn cpu_now() -> Duration {
    // SAFETY: getrusage fills the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

struct Stats {
    name: String,
    ops: u64,
    wall: Duration,
    cpu: Duration,
    lat_ns: Vec<u64>,
}

impl Stats {
    fn print(mut self, spec: &str) {
        self.lat_ns.sort_unstable();
        let pct = |p: f64| -> f64 {
            if self.lat_ns.is_empty() {
                return 0.0;
            }
            let i = ((self.lat_ns.len() as f64 - 1.0) * p).round() as usize;
            self.lat_ns[i] as f64 / 1000.0
        };
        let mean =
            self.lat_ns.iter().sum::<u64>() as f64 / self.lat_ns.len().max(1) as f64 / 1000.0;
        let iops = self.ops as f64 / self.wall.as_secs_f64();
        let cpu_us_per_io = self.cpu.as_secs_f64() * 1e6 / self.ops.max(1) as f64;
        let util = self.cpu.as_secs_f64() / self.wall.as_secs_f64();
        eprintln!(
            "{spec:<28} {:<16} {:>9.0} IOPS  lat us mean {:>8.1} p50 {:>8.1} p99 {:>8.1} p99.9 {:>8.1}  cpu/io {:>7.1} us  cpu {:>4.0}%",
            self.name, iops, mean, pct(0.5), pct(0.99), pct(0.999), cpu_us_per_io, util * 100.0
        );
        println!(
            "{{\"spec\":\"{spec}\",\"workload\":\"{}\",\"ops\":{},\"secs\":{:.3},\"iops\":{:.1},\"lat_us\":{{\"mean\":{:.2},\"p50\":{:.2},\"p99\":{:.2},\"p999\":{:.2}}},\"cpu_us_per_io\":{:.2},\"cpu_util\":{:.3}}}",
            self.name, self.ops, self.wall.as_secs_f64(), iops, mean, pct(0.5), pct(0.99), pct(0.999), cpu_us_per_io, util
        );
    }
}

async fn writes(d: &AnyDevice, zones: u32) -> Stats {
    let cap = d.geometry().zone_capacity_bytes;
    let per_zone = cap / WRITE_BYTES as u64;
    let mut buf = DmaBuf::from_slice(&vec![0x5a; WRITE_BYTES]);
    let mut lat = Vec::new();
    let (t0, c0) = (Instant::now(), cpu_now());
    for z in 0..zones {
        for i in 0..per_zone {
            let t = Instant::now();
            let (r, b) = d.write(z, i * WRITE_BYTES as u64, buf).await;
            r.expect("write");
            lat.push(t.elapsed().as_nanos() as u64);
            buf = b;
        }
    }
    Stats {
        name: "write64k_qd1".into(),
        ops: lat.len() as u64,
        wall: t0.elapsed(),
        cpu: cpu_now() - c0,
        lat_ns: lat,
    }
}

async fn appends(d: &AnyDevice, first: u32, zones: u32, qd: usize) -> Stats {
    let cap = d.geometry().zone_capacity_bytes;
    let per_zone = (cap / WRITE_BYTES as u64) as usize;
    let (t0, c0) = (Instant::now(), cpu_now());
    let mut lat = Vec::new();
    for z in first..first + zones {
        // `qd` tasks share the zone's appends.
        let tasks: Vec<_> = (0..qd)
            .map(|t| {
                let d = d.clone();
                let n = per_zone / qd + usize::from(t < per_zone % qd);
                ziob_runtime::spawn(async move {
                    let mut buf = DmaBuf::from_slice(&vec![0xa5; WRITE_BYTES]);
                    let mut lat = Vec::with_capacity(n);
                    for _ in 0..n {
                        let t = Instant::now();
                        let (r, b) = d.append(z, buf).await;
                        r.expect("append");
                        lat.push(t.elapsed().as_nanos() as u64);
                        buf = b;
                    }
                    lat
                })
            })
            .collect();
        for t in tasks {
            lat.extend(t.await);
        }
    }
    Stats {
        name: format!("append64k_qd{qd}"),
        ops: lat.len() as u64,
        wall: t0.elapsed(),
        cpu: cpu_now() - c0,
        lat_ns: lat,
    }
}

async fn randreads(d: &AnyDevice, zones: u32, qd: usize, secs: u64) -> Stats {
    let cap_blocks = d.geometry().zone_capacity_bytes / READ_BYTES as u64;
    let deadline = Instant::now() + Duration::from_secs(secs);
    let (t0, c0) = (Instant::now(), cpu_now());
    let tasks: Vec<_> = (0..qd)
        .map(|t| {
            let d = d.clone();
            ziob_runtime::spawn(async move {
                let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ ((t as u64 + 1) * 0x2545_f491_4f6c_dd1d);
                let mut buf = DmaBuf::with_capacity(READ_BYTES);
                let mut lat = Vec::new();
                while Instant::now() < deadline {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let z = (x % u64::from(zones)) as u32;
                    let off = ((x >> 20) % cap_blocks) * READ_BYTES as u64;
                    let t = Instant::now();
                    let (r, b) = d.read(z, off, READ_BYTES, buf).await;
                    r.expect("read");
                    lat.push(t.elapsed().as_nanos() as u64);
                    buf = b;
                }
                lat
            })
        })
        .collect();
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await);
    }
    Stats {
        name: format!("randread4k_qd{qd}"),
        ops: lat.len() as u64,
        wall: t0.elapsed(),
        cpu: cpu_now() - c0,
        lat_ns: lat,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let spec = args
        .first()
        .cloned()
        .expect("usage: backend_bench SPEC [--zones N] [--secs S]");
    let opt = |name: &str, default: u64| -> u64 {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map_or(default, |v| v.parse().expect("number"))
    };
    let zones = opt("--zones", 2) as u32;
    let secs = opt("--secs", 3);
    let rt = ziob_backends::runtime_builder_for(&spec)
        .cores(1)
        .build()
        .expect("runtime");
    let s = spec.clone();
    rt.block_on(move || async move {
        let t = Instant::now();
        let d = open_device(&s).await.expect("open");
        eprintln!("{s}: opened in {:?}: {:?}", t.elapsed(), d.geometry());
        assert!(
            d.geometry().zone_count >= 2 * zones,
            "need {} zones",
            2 * zones
        );
        d.zone_action(ZoneAction::Reset, ZoneTarget::All)
            .await
            .expect("reset all");
        writes(&d, zones).await.print(&s);
        randreads(&d, zones, 1, secs).await.print(&s);
        randreads(&d, zones, 32, secs).await.print(&s);
        appends(&d, zones, 1, 1).await.print(&s);
        appends(&d, zones + 1, 1, 16).await.print(&s);
        d.zone_action(ZoneAction::Reset, ZoneTarget::All)
            .await
            .expect("reset all");
    })
    .expect("bench");
}
