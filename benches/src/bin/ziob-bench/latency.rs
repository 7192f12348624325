//! The `latency` workload: does an append or a read of buffered data ever wait for the
//! device? Each task, in a loop, reads back the `--bs` bytes it appended last (recently
//! appended data, not yet flushed unless a background flush just did), then appends
//! `--bs` bytes, pausing `--op-interval-us` between rounds. One phase runs with an idle buffer (no `flush` calls; the buffer's
//! own full-unit and idle write-back still run), the other with one task per core flushing
//! each of the core's zones every `--background-flush-ms`. Both phases run in the same
//! process on a freshly reset device; the report gives the p99 of the phase under write-back
//! over the idle phase's (the goal: within 10×). Meant for `emu:…,lat_us=1000`.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;
use ziob::runtime::spawn;
use ziob::{Runtime, Ziob};

use crate::options::{Options, Workload};
use crate::run::{local_zones, open_fresh, stats, sync_and_close, write_op, Latency, ZoneEpoch};
use crate::watchdog::Watchdog;

/// The goal of issue #12: p99 under write-back within this factor of the idle p99.
const P99_RATIO_GOAL: f64 = 10.0;

/// One phase (idle, or under background flushes).
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    /// Append + read-back pairs completed.
    ops: u64,
    secs: f64,
    appends_per_sec: f64,
    append_lat_ns: Latency,
    /// Reads of the data the task appended last.
    read_lat_ns: Latency,
    /// `flush` calls of the background flusher (0 in the idle phase).
    background_flushes: u64,
    /// Device cache flushes during the phase, from the stats.
    device_flushes: u64,
    /// Write-backs during the phase (buffered runs).
    writebacks: u64,
    /// Reads served from memory / needing the device, during the phase.
    read_hits: u64,
    read_misses: u64,
}

/// One configuration's result: both phases and their p99 ratios.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyResult {
    dev: String,
    workload: Workload,
    bs: u64,
    qd: usize,
    zones: u32,
    cores: usize,
    ziob: bool,
    background_flush_ms: u64,
    op_interval_us: u64,
    idle: Phase,
    under_writeback: Phase,
    /// Append p99 under write-back / idle append p99.
    append_p99_ratio: f64,
    /// Read p99 under write-back / idle read p99.
    read_p99_ratio: f64,
}

/// Runs every `--bs` × `--zones` × `--ziob` combination, each as an idle and a write-back
/// phase (the median of `--repeat` by the write-back phase's append p99).
pub fn run_all(rt: &Runtime, opts: &Options, dog: &Watchdog) -> Result<Vec<LatencyResult>, String> {
    let mut results = Vec::new();
    let period = Duration::from_millis(opts.background_flush_ms);
    for &bs in &opts.bs {
        for &zones in &opts.zones {
            for &mode in &opts.ziob {
                let buffered = mode.buffered();
                let mut runs = Vec::new();
                for _ in 0..opts.repeat {
                    let what = |phase: &str| {
                        format!(
                            "the run --workload latency --bs {bs} --zones {zones} --ziob {} ({phase})",
                            if buffered { "on" } else { "off" }
                        )
                    };
                    let idle = {
                        let _armed = dog.guard(what("idle"), opts.timeout());
                        phase(rt, opts, bs, zones, buffered, None)?
                    };
                    let busy = {
                        let _armed = dog.guard(what("under write-back"), opts.timeout());
                        phase(rt, opts, bs, zones, buffered, Some(period))?
                    };
                    let ratio = |a: u64, b: u64| a as f64 / b.max(1) as f64;
                    runs.push(LatencyResult {
                        dev: opts.dev.clone(),
                        workload: Workload::Latency,
                        bs,
                        qd: opts.qd,
                        zones,
                        cores: opts.cores,
                        ziob: buffered,
                        background_flush_ms: opts.background_flush_ms,
                        op_interval_us: opts.op_interval_us,
                        append_p99_ratio: ratio(busy.append_lat_ns.p99, idle.append_lat_ns.p99),
                        read_p99_ratio: ratio(busy.read_lat_ns.p99, idle.read_lat_ns.p99),
                        idle,
                        under_writeback: busy,
                    });
                }
                runs.sort_by_key(|r| r.under_writeback.append_lat_ns.p99);
                let median = runs.swap_remove(runs.len() / 2);
                print_row(&median);
                results.push(median);
            }
        }
    }
    Ok(results)
}

/// One phase on a freshly reset device; `background` is the flusher's period, if any.
fn phase(
    rt: &Runtime,
    opts: &Options,
    bs: u64,
    zones: u32,
    buffered: bool,
    background: Option<Duration>,
) -> Result<Phase, String> {
    let z = open_fresh(rt, opts, buffered)?;
    let (cores, qd, deadline) = (opts.cores, opts.qd, opts.runtime);
    let ops_per_core = opts.ops.map(|n| n.div_ceil(cores as u64));
    let epochs = ZoneEpoch::for_zones(zones);
    let interval = (opts.op_interval_us > 0).then(|| Duration::from_micros(opts.op_interval_us));
    let before = stats(rt, &z)?;
    let start = Instant::now();
    let zc = z.clone();
    let per_core = rt
        .run_on_all(move |core| {
            let (z, epochs) = (zc.clone(), epochs.clone());
            let plan = CorePlan {
                zones,
                bs,
                qd,
                ops_per_core,
                deadline,
                background,
                interval,
            };
            async move { run_core(z, core, epochs, plan).await }
        })
        .map_err(|e| e.to_string())?;
    let secs = start.elapsed().as_secs_f64();
    let after = stats(rt, &z)?;
    sync_and_close(rt, z)?;
    let mut append = Histogram::<u64>::new(3).expect("valid");
    let mut read = Histogram::<u64>::new(3).expect("valid");
    let (mut ops, mut flushes) = (0, 0);
    for c in per_core {
        let c = c?;
        ops += c.ops;
        flushes += c.flushes;
        append.add(c.append).map_err(|e| e.to_string())?;
        read.add(c.read).map_err(|e| e.to_string())?;
    }
    Ok(Phase {
        ops,
        secs,
        appends_per_sec: ops as f64 / secs,
        append_lat_ns: Latency::of(&append),
        read_lat_ns: Latency::of(&read),
        background_flushes: flushes,
        device_flushes: after.device_flushes - before.device_flushes,
        writebacks: after.writebacks - before.writebacks,
        read_hits: after.read_hits - before.read_hits,
        read_misses: after.read_misses - before.read_misses,
    })
}

struct CorePlan {
    zones: u32,
    bs: u64,
    qd: usize,
    ops_per_core: Option<u64>,
    deadline: Duration,
    background: Option<Duration>,
    /// Pause between two pairs of one task.
    interval: Option<Duration>,
}

struct CoreCounts {
    ops: u64,
    flushes: u64,
    append: Histogram<u64>,
    read: Histogram<u64>,
}

async fn run_core(
    z: Ziob,
    core: usize,
    epochs: Arc<Vec<ZoneEpoch>>,
    plan: CorePlan,
) -> Result<CoreCounts, String> {
    let mine = local_zones(&z, core, plan.zones);
    let counts = Rc::new(RefCell::new(CoreCounts {
        ops: 0,
        flushes: 0,
        append: Histogram::new(3).expect("valid"),
        read: Histogram::new(3).expect("valid"),
    }));
    let budget = Rc::new(Cell::new(plan.ops_per_core));
    let done = Rc::new(Cell::new(false));
    let start = Instant::now();
    let flusher = plan.background.map(|period| {
        let (z, mine, counts, done) = (z.clone(), mine.clone(), counts.clone(), done.clone());
        spawn(async move {
            while !done.get() {
                ziob::runtime::sleep(period)
                    .await
                    .map_err(|e| format!("background flusher's sleep: {e}"))?;
                if done.get() {
                    break;
                }
                for &zone in &mine {
                    z.flush(zone)
                        .await
                        .map_err(|e| format!("background flush of zone {zone}: {e}"))?;
                    counts.borrow_mut().flushes += 1;
                }
            }
            Ok::<(), String>(())
        })
    });
    let mut tasks = Vec::new();
    for t in 0..plan.qd {
        let (z, epochs, counts, budget) =
            (z.clone(), epochs.clone(), counts.clone(), budget.clone());
        let (bs, deadline, interval) = (plan.bs, plan.deadline, plan.interval);
        let mine = mine.clone();
        tasks.push(spawn(async move {
            let payload = vec![(core * 31 + t) as u8; bs as usize];
            let mut i = 0usize;
            let mut last: Option<(u32, u64, u64)> = None;
            loop {
                match budget.get() {
                    Some(0) => break,
                    Some(n) => budget.set(Some(n - 1)),
                    None if start.elapsed() >= deadline => break,
                    None => {}
                }
                if let Some(pause) = interval {
                    ziob::runtime::sleep(pause)
                        .await
                        .map_err(|e| format!("pause between ops: {e}"))?;
                }
                i += 1;
                let zone = mine[(t + i) % mine.len()];
                // First read back what this task appended last (after the pause, so a
                // background flush may have started on it since), then append.
                if let Some((pz, off, epoch)) = last {
                    let t1 = Instant::now();
                    let data = z
                        .read(pz, off, bs as usize)
                        .await
                        .map_err(|e| format!("read of zone {pz} at {off}: {e}"))?;
                    let read_ns = t1.elapsed().as_nanos() as u64;
                    // Another task may have refilled (reset) the zone in between.
                    if epochs[pz as usize].epoch.load(Ordering::Acquire) == epoch
                        && data[..] != payload[..]
                    {
                        return Err(format!("read-after-append mismatch in zone {pz}"));
                    }
                    let _ = counts.borrow_mut().read.record(read_ns);
                }
                let t0 = Instant::now();
                let w = write_op(&z, &epochs, Workload::Append, zone, &payload).await?;
                let append_ns = t0.elapsed().as_nanos() as u64;
                last = Some((zone, w.offset, w.epoch));
                let mut c = counts.borrow_mut();
                let _ = c.append.record(append_ns);
                c.ops += 1;
            }
            Ok::<(), String>(())
        }));
    }
    let mut first_err = None;
    for t in tasks {
        if let Err(e) = t.await {
            first_err.get_or_insert(e);
        }
    }
    done.set(true);
    if let Some(f) = flusher {
        if let Err(e) = f.await {
            first_err.get_or_insert(e);
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    let mut c = counts.borrow_mut();
    Ok(CoreCounts {
        ops: c.ops,
        flushes: c.flushes,
        append: std::mem::replace(&mut c.append, Histogram::new(3).expect("valid")),
        read: std::mem::replace(&mut c.read, Histogram::new(3).expect("valid")),
    })
}

fn print_row(r: &LatencyResult) {
    let p = |ph: &Phase| {
        format!(
            "append p50/p99/p99.9 {}/{}/{} ns, read {}/{}/{} ns, {:.0} ops/s, {} write-backs",
            ph.append_lat_ns.p50,
            ph.append_lat_ns.p99,
            ph.append_lat_ns.p999,
            ph.read_lat_ns.p50,
            ph.read_lat_ns.p99,
            ph.read_lat_ns.p999,
            ph.appends_per_sec,
            ph.writebacks
        )
    };
    let goal = |x: f64| {
        if x <= P99_RATIO_GOAL {
            "met"
        } else {
            "not met"
        }
    };
    eprintln!(
        "latency bs {} zones {} qd {} cores {} ziob {}\n  idle:             {}\n  under write-back: {} ({} background flushes every {} ms)\n  p99 under write-back / idle: append {:.1}x (goal <= {P99_RATIO_GOAL}x: {}), read {:.1}x ({})",
        r.bs,
        r.zones,
        r.qd,
        r.cores,
        if r.ziob { "on" } else { "off" },
        p(&r.idle),
        p(&r.under_writeback),
        r.under_writeback.background_flushes,
        r.background_flush_ms,
        r.append_p99_ratio,
        goal(r.append_p99_ratio),
        r.read_p99_ratio,
        goal(r.read_p99_ratio),
    );
}
