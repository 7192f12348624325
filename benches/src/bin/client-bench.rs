//! `client-bench`: the cost of the cross-thread `ziob::Client` (issue #13). For each device:
//! the round trip of one 4 KiB append from a tokio task, from a plain thread (blocking form)
//! and from a task on the owning core; and append throughput with 1, 64 and 1024 concurrent
//! tokio tasks against the same number of tasks on the ZIOB cores. Medians of `--repeat`.
//!
//! ```text
//! client-bench --dev mem:zones=32,zone_size=8M --emu /var/tmp/client-bench.zns --json
//! ```

use std::time::Duration;

use clap::Parser;
use serde::Serialize;
use ziob::backends::EmuDevice;
use ziob::{Geometry, Runtime};
use ziob_benches::client_bench::{close, median, open};
use ziob_benches::client_round_trip::{self, RoundTrip};
use ziob_benches::client_throughput::{self, Throughput};

#[derive(Parser, Debug)]
#[command(about = "Round trip and throughput of ziob::Client against calls on the owning core")]
struct Options {
    /// A device spec to measure (repeat the option for several).
    #[arg(long, default_value = "mem:zones=32,zone_size=8M")]
    dev: Vec<String>,
    /// Also measure a fresh emu file created here (no latency model), deleted afterwards.
    #[arg(long)]
    emu: Option<std::path::PathBuf>,
    /// Zones of the emu file (and zones the tasks spread over).
    #[arg(long, default_value_t = 32)]
    zones: u32,
    /// Zone size of the emu file, in MiB.
    #[arg(long, default_value_t = 8)]
    zone_mib: u64,
    /// ZIOB cores.
    #[arg(long, default_value_t = 2)]
    cores: usize,
    /// Tokio worker threads.
    #[arg(long, default_value_t = 2)]
    tokio_workers: usize,
    /// Concurrent task counts for the throughput runs (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,64,1024")]
    tasks: Vec<usize>,
    /// Seconds per throughput run.
    #[arg(long, default_value_t = 2.0)]
    secs: f64,
    /// Measured round trips per kind and repeat.
    #[arg(long, default_value_t = 20_000)]
    round_trips: u64,
    /// Repeats of everything (medians are reported).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Print one JSON document instead of the table.
    #[arg(long)]
    json: bool,
}

/// Medians of one round-trip kind over the repeats.
#[derive(Debug, Serialize)]
struct RoundTripMedians {
    p50_ns: f64,
    p99_ns: f64,
}

/// One task count: both callers' repeats and medians.
#[derive(Debug, Serialize)]
struct ThroughputRow {
    tasks: usize,
    tokio_client: Vec<Throughput>,
    on_core: Vec<Throughput>,
    tokio_client_median_appends_per_sec: f64,
    on_core_median_appends_per_sec: f64,
    /// tokio-client median / on-core median.
    client_vs_on_core: f64,
    tokio_client_median_p99_ns: f64,
    on_core_median_p99_ns: f64,
}

/// Everything measured on one device.
#[derive(Debug, Serialize)]
struct DeviceReport {
    dev: String,
    cores: usize,
    tokio_workers: usize,
    zones: u32,
    record_bytes: usize,
    round_trips: Vec<RoundTrip>,
    round_trip_tokio_client: RoundTripMedians,
    round_trip_blocking_client: RoundTripMedians,
    round_trip_on_core: RoundTripMedians,
    throughput: Vec<ThroughputRow>,
}

fn medians(
    rts: &[RoundTrip],
    pick: impl Fn(&RoundTrip) -> ziob_benches::client_bench::Percentiles,
) -> RoundTripMedians {
    let p50: Vec<f64> = rts.iter().map(|r| pick(r).p50_ns as f64).collect();
    let p99: Vec<f64> = rts.iter().map(|r| pick(r).p99_ns as f64).collect();
    RoundTripMedians {
        p50_ns: median(&p50),
        p99_ns: median(&p99),
    }
}

fn measure(
    rt: &Runtime,
    trt: &tokio::runtime::Runtime,
    dev: &str,
    o: &Options,
) -> Result<DeviceReport, String> {
    let client = open(rt, dev)?;
    let zones = o.zones.min(client.geometry().zone_count);
    let mut round_trips = Vec::new();
    for _ in 0..o.repeat {
        // Zone 1: owned by core 1 (when there are two cores), not the core of `with_ziob`'s
        // first pick.
        round_trips.push(client_round_trip::measure(
            trt,
            &client,
            1 % zones,
            o.round_trips,
        )?);
    }
    let window = Duration::from_secs_f64(o.secs);
    let mut throughput = Vec::new();
    for &tasks in &o.tasks {
        let (mut tc, mut oc) = (Vec::new(), Vec::new());
        for _ in 0..o.repeat {
            tc.push(client_throughput::tokio_client(
                trt, &client, tasks, zones, window,
            )?);
            oc.push(client_throughput::on_core(&client, tasks, zones, window)?);
        }
        let m = |v: &[Throughput], f: &dyn Fn(&Throughput) -> f64| {
            median(&v.iter().map(f).collect::<Vec<_>>())
        };
        let tcm = m(&tc, &|t| t.appends_per_sec);
        let ocm = m(&oc, &|t| t.appends_per_sec);
        throughput.push(ThroughputRow {
            tasks,
            tokio_client_median_appends_per_sec: tcm,
            on_core_median_appends_per_sec: ocm,
            client_vs_on_core: tcm / ocm,
            tokio_client_median_p99_ns: m(&tc, &|t| t.latency.p99_ns as f64),
            on_core_median_p99_ns: m(&oc, &|t| t.latency.p99_ns as f64),
            tokio_client: tc,
            on_core: oc,
        });
    }
    close(client)?;
    Ok(DeviceReport {
        dev: dev.to_string(),
        cores: o.cores,
        tokio_workers: o.tokio_workers,
        zones,
        record_bytes: ziob_benches::client_bench::RECORD_BYTES,
        round_trip_tokio_client: medians(&round_trips, |r| r.tokio_client),
        round_trip_blocking_client: medians(&round_trips, |r| r.blocking_client),
        round_trip_on_core: medians(&round_trips, |r| r.on_core),
        round_trips,
        throughput,
    })
}

fn print_table(r: &DeviceReport) {
    println!(
        "{} ({} ZIOB cores, {} tokio workers, 4 KiB appends, medians)",
        r.dev, r.cores, r.tokio_workers
    );
    println!("  round trip      p50 us    p99 us");
    for (name, m) in [
        ("tokio client", &r.round_trip_tokio_client),
        ("blocking", &r.round_trip_blocking_client),
        ("on core", &r.round_trip_on_core),
    ] {
        println!(
            "  {name:<14} {:>7.1}   {:>7.1}",
            m.p50_ns / 1e3,
            m.p99_ns / 1e3
        );
    }
    println!("  tasks   client app/s   on-core app/s   ratio   client p99 us   on-core p99 us");
    for t in &r.throughput {
        println!(
            "  {:>5}   {:>12.0}   {:>13.0}   {:>5.2}   {:>13.1}   {:>14.1}",
            t.tasks,
            t.tokio_client_median_appends_per_sec,
            t.on_core_median_appends_per_sec,
            t.client_vs_on_core,
            t.tokio_client_median_p99_ns / 1e3,
            t.on_core_median_p99_ns / 1e3
        );
    }
}

fn run(o: &Options) -> Result<Vec<DeviceReport>, String> {
    let rt = Runtime::builder()
        .cores(o.cores)
        .build()
        .map_err(|e| e.to_string())?;
    let trt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(o.tokio_workers)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut devs = o.dev.clone();
    if let Some(path) = &o.emu {
        let p = path.clone();
        let g = Geometry::new(o.zones, o.zone_mib << 20);
        rt.block_on(move || async move { EmuDevice::create(&p, &g).await.map(drop) })
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        devs.push(format!("emu:{}", path.display()));
    }
    let mut reports = Vec::new();
    for dev in &devs {
        let r = measure(&rt, &trt, dev, o);
        match r {
            Ok(r) => {
                if !o.json {
                    print_table(&r);
                }
                reports.push(r);
            }
            Err(e) => return Err(format!("{dev}: {e}")),
        }
    }
    Ok(reports)
}

fn main() {
    ziob::logging::init();
    let o = Options::parse();
    let res = run(&o);
    if let Some(path) = &o.emu {
        let _ = std::fs::remove_file(path);
    }
    match res {
        Ok(reports) => {
            if o.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&reports).expect("serialisable")
                );
            }
        }
        Err(e) => {
            eprintln!("client-bench: {e}");
            std::process::exit(1);
        }
    }
}
