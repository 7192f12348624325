//! The `commitlog` workload: each task appends `--bs`-byte records to its zone and calls
//! `flush(zone)` after every `--flush-every` appends, the way a write-ahead log commits.
//! Append and flush latencies go to separate histograms; the device cache flushes the
//! buffer issued come from its stats (`ShardStats::device_flushes`).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;
use ziob::runtime::spawn;
use ziob::{Geometry, Runtime, ShardStats, Ziob};

use crate::options::{Options, Workload};
use crate::run::{local_zones, open_fresh, stats, sync_and_close, write_op, Latency, ZoneEpoch};
use crate::watchdog::Watchdog;

/// One commit-log configuration's result.
#[derive(Debug, Clone, Serialize)]
pub struct CommitlogResult {
    dev: String,
    workload: Workload,
    /// Bytes per record.
    bs: u64,
    /// Appends per task between two flushes of its zone.
    flush_every: u64,
    qd: usize,
    zones: u32,
    cores: usize,
    ziob: bool,
    /// Records appended.
    records: u64,
    secs: f64,
    records_per_sec: f64,
    bytes_per_sec: f64,
    append_lat_ns: Latency,
    flush_lat_ns: Latency,
    /// `flush` calls the tasks made.
    flush_calls: u64,
    /// Device cache flushes issued during the timed part (`ShardStats::device_flushes`):
    /// the tasks' flushes, shared or not, plus one per zone refilled (flushed before its
    /// reset).
    device_flushes: u64,
    /// Writes the device received (write-backs when buffered, every append otherwise).
    device_writes: u64,
    device_write_bytes: u64,
    zone_resets: u64,
    /// The buffer's stats after the timed part (buffered runs).
    buffer: Option<ShardStats>,
}

/// What one core measured.
struct CoreCounts {
    records: u64,
    flushes: u64,
    resets: u64,
    append: Histogram<u64>,
    flush: Histogram<u64>,
}

impl CoreCounts {
    fn new() -> CoreCounts {
        CoreCounts {
            records: 0,
            flushes: 0,
            resets: 0,
            append: Histogram::new(3).expect("valid"),
            flush: Histogram::new(3).expect("valid"),
        }
    }
}

/// Runs every `--bs` × `--flush-every` × `--zones` × `--ziob` combination (medians of
/// `--repeat`), printing a row each and the on/off ratios.
pub fn run_all(
    rt: &Runtime,
    opts: &Options,
    geometry: &Geometry,
    dog: &Watchdog,
) -> Result<Vec<CommitlogResult>, String> {
    let mut results = Vec::new();
    for &bs in &opts.bs {
        for &every in &opts.flush_every {
            for &zones in &opts.zones {
                for &mode in &opts.ziob {
                    let buffered = mode.buffered();
                    if !buffered {
                        if let Some(active) = geometry.max_active_zones {
                            if zones > active {
                                eprintln!("skipped: pass-through cannot write {zones} zones at once, the device allows {active} active zones");
                                continue;
                            }
                        }
                    }
                    let mut runs = Vec::new();
                    for _ in 0..opts.repeat {
                        let _armed = dog.guard(
                            format!(
                                "the run --workload commitlog --bs {bs} --flush-every {every} --zones {zones} --ziob {}",
                                if buffered { "on" } else { "off" }
                            ),
                            opts.timeout(),
                        );
                        runs.push(one_run(rt, opts, bs, every, zones, buffered)?);
                    }
                    runs.sort_by(|a, b| a.records_per_sec.total_cmp(&b.records_per_sec));
                    let median = runs.swap_remove(runs.len() / 2);
                    print_row(&median);
                    results.push(median);
                }
            }
        }
    }
    print_ratios(&results);
    Ok(results)
}

fn one_run(
    rt: &Runtime,
    opts: &Options,
    bs: u64,
    every: u64,
    zones: u32,
    buffered: bool,
) -> Result<CommitlogResult, String> {
    let z = open_fresh(rt, opts, buffered)?;
    let (cores, qd, deadline) = (opts.cores, opts.qd, opts.runtime);
    let ops_per_core = opts.ops.map(|n| n.div_ceil(cores as u64));
    let epochs = ZoneEpoch::for_zones(zones);
    let before = stats(rt, &z)?;
    let start = Instant::now();
    let zc = z.clone();
    let per_core = rt
        .run_on_all(move |core| {
            let (z, epochs) = (zc.clone(), epochs.clone());
            async move {
                run_core(
                    z,
                    core,
                    epochs,
                    zones,
                    bs,
                    every,
                    qd,
                    ops_per_core,
                    deadline,
                )
                .await
            }
        })
        .map_err(|e| e.to_string())?;
    let secs = start.elapsed().as_secs_f64();
    // Before the final sync, whose own device flush is not the workload's.
    let after = stats(rt, &z)?;
    sync_and_close(rt, z)?;
    let mut total = CoreCounts::new();
    for c in per_core {
        let c = c?;
        total.records += c.records;
        total.flushes += c.flushes;
        total.resets += c.resets;
        total.append.add(c.append).map_err(|e| e.to_string())?;
        total.flush.add(c.flush).map_err(|e| e.to_string())?;
    }
    let (device_writes, device_write_bytes) = if buffered {
        (
            after.writebacks - before.writebacks,
            after.writeback_bytes - before.writeback_bytes,
        )
    } else {
        (total.records, total.records * bs)
    };
    Ok(CommitlogResult {
        dev: opts.dev.clone(),
        workload: Workload::Commitlog,
        bs,
        flush_every: every,
        qd,
        zones,
        cores,
        ziob: buffered,
        records: total.records,
        secs,
        records_per_sec: total.records as f64 / secs,
        bytes_per_sec: (total.records * bs) as f64 / secs,
        append_lat_ns: Latency::of(&total.append),
        flush_lat_ns: Latency::of(&total.flush),
        flush_calls: total.flushes,
        device_flushes: after.device_flushes - before.device_flushes,
        device_writes,
        device_write_bytes,
        zone_resets: total.resets,
        buffer: buffered.then_some(after),
    })
}

/// The core's `qd` tasks: task `t` logs to the core's zone `t mod zones`.
#[allow(clippy::too_many_arguments)]
async fn run_core(
    z: Ziob,
    core: usize,
    epochs: Arc<Vec<ZoneEpoch>>,
    zones: u32,
    bs: u64,
    every: u64,
    qd: usize,
    ops_per_core: Option<u64>,
    deadline: Duration,
) -> Result<CoreCounts, String> {
    let mine = local_zones(&z, core, zones);
    let counts = Rc::new(RefCell::new(CoreCounts::new()));
    let budget = Rc::new(RefCell::new(ops_per_core));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..qd {
        let zone = mine[t % mine.len()];
        let (z, epochs, counts, budget) =
            (z.clone(), epochs.clone(), counts.clone(), budget.clone());
        tasks.push(spawn(async move {
            let record = vec![(core * 31 + t) as u8; bs as usize];
            let mut since_flush = 0;
            loop {
                {
                    let mut b = budget.borrow_mut();
                    match b.as_mut() {
                        Some(0) => break,
                        Some(n) => *n -= 1,
                        None if start.elapsed() >= deadline => break,
                        None => {}
                    }
                }
                let t0 = Instant::now();
                let done = write_op(&z, &epochs, Workload::Append, zone, &record).await?;
                let ns = t0.elapsed().as_nanos() as u64;
                {
                    let mut c = counts.borrow_mut();
                    let _ = c.append.record(ns);
                    c.records += 1;
                    c.resets += done.resets;
                }
                since_flush += 1;
                if since_flush == every {
                    since_flush = 0;
                    let t0 = Instant::now();
                    z.flush(zone)
                        .await
                        .map_err(|e| format!("flush of zone {zone}: {e}"))?;
                    let ns = t0.elapsed().as_nanos() as u64;
                    let mut c = counts.borrow_mut();
                    let _ = c.flush.record(ns);
                    c.flushes += 1;
                }
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await?;
    }
    let out = std::mem::replace(&mut *counts.borrow_mut(), CoreCounts::new());
    Ok(out)
}

fn print_row(r: &CommitlogResult) {
    eprintln!(
        "commitlog bs {:>6} flush-every {:>4} zones {:>3} qd {:>3} cores {} ziob {:<3}  {:>9.0} rec/s {:>8.1} MB/s  append p50/p99/p99.9 {}/{}/{} ns  flush p50/p99 {}/{} ns  flush calls {} device flushes {}",
        r.bs,
        r.flush_every,
        r.zones,
        r.qd,
        r.cores,
        if r.ziob { "on" } else { "off" },
        r.records_per_sec,
        r.bytes_per_sec / 1e6,
        r.append_lat_ns.p50,
        r.append_lat_ns.p99,
        r.append_lat_ns.p999,
        r.flush_lat_ns.p50,
        r.flush_lat_ns.p99,
        r.flush_calls,
        r.device_flushes,
    );
}

/// Per configuration: the goals, throughput ≥ 2× the pass-through's and append
/// p99 below the pass-through's p50.
fn print_ratios(results: &[CommitlogResult]) {
    for on in results.iter().filter(|r| r.ziob) {
        let Some(off) = results.iter().find(|r| {
            !r.ziob && r.bs == on.bs && r.flush_every == on.flush_every && r.zones == on.zones
        }) else {
            continue;
        };
        let ratio = on.records_per_sec / off.records_per_sec;
        eprintln!(
            "ziob on vs off: commitlog bs {} flush-every {} zones {}: throughput {ratio:.2}x (goal >= 2x: {}), append p99 on {} ns vs p50 off {} ns (goal below: {}), device flushes {} vs {}",
            on.bs,
            on.flush_every,
            on.zones,
            if ratio >= 2.0 { "met" } else { "not met" },
            on.append_lat_ns.p99,
            off.append_lat_ns.p50,
            if on.append_lat_ns.p99 < off.append_lat_ns.p50 { "met" } else { "not met" },
            on.device_flushes,
            off.device_flushes,
        );
    }
}
