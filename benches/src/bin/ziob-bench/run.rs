//! Running the configurations and reporting them.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;
use ziob::backends::{DeviceSpec, EmuDevice};
use ziob::runtime::{core_id, spawn};
use ziob::{DmaBuf, Geometry, Runtime, ShardStats, Ziob, ZiobError, ZoneAction, ZoneTarget};

use crate::options::{Options, Workload};
use crate::validate;
use crate::watchdog::Watchdog;

/// One configuration's result.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    dev: String,
    workload: Workload,
    bs: u64,
    qd: usize,
    zones: u32,
    cores: usize,
    ziob: bool,
    ops: u64,
    secs: f64,
    iops: f64,
    bytes_per_sec: f64,
    lat_ns: Latency,
    /// Writes the device received (write-backs when buffered, every write otherwise).
    device_writes: u64,
    device_write_bytes: u64,
    zone_resets: u64,
    buffer: Option<ShardStats>,
}

/// Percentiles of one latency histogram, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct Latency {
    pub(crate) p50: u64,
    pub(crate) p90: u64,
    pub(crate) p99: u64,
    pub(crate) p999: u64,
    pub(crate) p9999: u64,
    pub(crate) max: u64,
}

impl Latency {
    /// The percentiles of `hist` (all zero when it is empty).
    pub(crate) fn of(hist: &Histogram<u64>) -> Latency {
        Latency {
            p50: hist.value_at_quantile(0.5),
            p90: hist.value_at_quantile(0.9),
            p99: hist.value_at_quantile(0.99),
            p999: hist.value_at_quantile(0.999),
            p9999: hist.value_at_quantile(0.9999),
            max: hist.max(),
        }
    }
}

/// What one core measured.
#[derive(Default)]
struct CoreResult {
    ops: u64,
    write_ops: u64,
    resets: u64,
    hist: Option<Histogram<u64>>,
}

/// A zone's refill epoch: even = usable, odd = being flushed and reset by one task; the
/// others wait for `refilled` instead of spinning (which would take the core from the
/// write-back they wait for).
pub(crate) struct ZoneEpoch {
    pub(crate) epoch: AtomicU64,
    refilled: event_listener::Event,
}

impl ZoneEpoch {
    /// Epochs of `zones` zones, all usable.
    pub(crate) fn for_zones(zones: u32) -> Arc<Vec<ZoneEpoch>> {
        Arc::new(
            (0..zones)
                .map(|_| ZoneEpoch {
                    epoch: AtomicU64::new(0),
                    refilled: event_listener::Event::new(),
                })
                .collect(),
        )
    }
}

struct Plan {
    /// Per zone, how often it was refilled.
    epochs: Arc<Vec<ZoneEpoch>>,
    workload: Workload,
    bs: u64,
    qd: usize,
    zones: u32,
    ops_per_core: Option<u64>,
    deadline: Duration,
}

pub fn main(opts: Options) -> Result<(), String> {
    let dog = Watchdog::start("ziob-bench").map_err(|e| format!("watchdog thread: {e}"))?;
    let limit = opts.timeout();
    // Everything is checked before the runtime (and its registered buffers) is built.
    let geometry = {
        let _armed = dog.guard("opening the device", limit);
        device_geometry(&opts)?
    };
    validate::check(&opts, &geometry)?;
    let mut rt = ziob::backends::runtime_builder_for(&opts.dev).cores(opts.cores);
    if opts.fixed_buffers > 0 {
        let unit = opts
            .writeback_unit
            .unwrap_or(ziob::WRITEBACK_UNIT_BYTES_DEFAULT);
        let unit =
            usize::try_from(unit).map_err(|_| format!("--writeback-unit {unit}: too large"))?;
        rt = rt.fixed_buffers(opts.fixed_buffers, unit);
    }
    let rt = rt.build().map_err(|e| e.to_string())?;
    let result = run_all(&rt, &opts, &geometry, &dog);
    let _armed = dog.guard("shutting the runtime down", limit);
    drop(rt);
    result
}

/// Runs every configuration, each under the watchdog.
fn run_all(
    rt: &Runtime,
    opts: &Options,
    geometry: &Geometry,
    dog: &Watchdog,
) -> Result<(), String> {
    let limit = opts.timeout();
    // The workloads with results of their own shape.
    match opts.workload {
        Workload::Commitlog => {
            return finish(opts, crate::commitlog::run_all(rt, opts, geometry, dog)?)
        }
        Workload::Latency => return finish(opts, crate::latency::run_all(rt, opts, dog)?),
        Workload::Manyzones => {
            return finish(opts, crate::manyzones::run_all(rt, opts, geometry, dog)?)
        }
        Workload::Append | Workload::Write | Workload::Randread | Workload::Readafterwrite => {}
    }
    let mut results = Vec::new();
    for &bs in &opts.bs {
        for &zones in &opts.zones {
            for &mode in &opts.ziob {
                let buffered = mode.buffered();
                if !buffered && opts.workload != Workload::Randread {
                    if let Some(active) = geometry.max_active_zones {
                        if zones > active {
                            eprintln!(
                                "skipped: pass-through cannot write {zones} zones at once, the device allows {active} active zones (the buffer lifts that limit)"
                            );
                            continue;
                        }
                    }
                }
                let mut runs = Vec::new();
                for _ in 0..opts.repeat {
                    let what = format!(
                        "the run --workload {} --bs {bs} --zones {zones} --ziob {}",
                        format!("{:?}", opts.workload).to_lowercase(),
                        if buffered { "on" } else { "off" }
                    );
                    let _armed = dog.guard(what, limit);
                    runs.push(one_run(rt, opts, bs, zones, buffered)?);
                }
                runs.sort_by(|a, b| a.iops.total_cmp(&b.iops));
                let median = runs[runs.len() / 2].clone();
                print_row(&median);
                results.push(median);
            }
        }
    }
    if opts.json {
        print_json(&results)?;
    }
    print_ratios(&results);
    Ok(())
}

/// Prints `results` as JSON when `--json` asks for it.
fn finish<T: Serialize>(opts: &Options, results: Vec<T>) -> Result<(), String> {
    if opts.json {
        print_json(&results)?;
    }
    Ok(())
}

/// Prints one JSON object per result (an array when several) on stdout.
pub(crate) fn print_json<T: Serialize>(results: &[T]) -> Result<(), String> {
    let out = if results.len() == 1 {
        serde_json::to_string_pretty(&results[0])
    } else {
        serde_json::to_string_pretty(&results)
    };
    println!("{}", out.map_err(|e| e.to_string())?);
    Ok(())
}

/// The device's geometry, read on a one-core runtime of its own (closed again before the
/// benchmark's runtime starts). A missing emu file is created first with the `--create-*`
/// geometry.
fn device_geometry(opts: &Options) -> Result<Geometry, String> {
    let rt = ziob::backends::runtime_builder_for(&opts.dev)
        .cores(1)
        .build()
        .map_err(|e| e.to_string())?;
    let spec = opts.dev.clone();
    let create = match DeviceSpec::parse(&opts.dev).map_err(|e| e.to_string())? {
        DeviceSpec::Emu { path, .. } if !path.exists() => {
            let mut g = Geometry::new(opts.create_zones, opts.create_zone_size);
            g.block_size_bytes = opts.create_block_size;
            eprintln!(
                "creating {} ({} zones of {} bytes)",
                path.display(),
                g.zone_count,
                g.zone_size_bytes
            );
            Some((path, g))
        }
        _ => None,
    };
    rt.block_on(move || async move {
        if let Some((path, g)) = create {
            EmuDevice::create(&path, &g).await?;
        }
        ziob::open_device(&spec)
            .await
            .map(|d| *ziob::ZonedDevice::geometry(&d))
    })
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())
}

fn one_run(
    rt: &Runtime,
    opts: &Options,
    bs: u64,
    zones: u32,
    buffered: bool,
) -> Result<RunResult, String> {
    let z = open_fresh(rt, opts, buffered)?;
    let cores = opts.cores;
    if opts.workload == Workload::Randread {
        prefill(rt, &z, zones, bs)?;
    }
    let ops_per_core = opts.ops.map(|n| n.div_ceil(cores as u64));
    let deadline = opts.runtime;
    let (workload, qd) = (opts.workload, opts.qd);
    let before = stats(rt, &z)?;
    let start = Instant::now();
    let zc = z.clone();
    let epochs = ZoneEpoch::for_zones(zones);
    let per_core = rt
        .run_on_all(move |core| {
            let z = zc.clone();
            let plan = Plan {
                epochs: epochs.clone(),
                workload,
                bs,
                qd,
                zones,
                ops_per_core,
                deadline,
            };
            async move { run_core(z, core, cores, plan).await }
        })
        .map_err(|e| e.to_string())?;
    let secs = start.elapsed().as_secs_f64();
    final_sync(rt, &z)?;
    let after = stats(rt, &z)?;
    let mut hist = Histogram::<u64>::new(3).expect("valid");
    let (mut ops, mut write_ops, mut resets) = (0, 0, 0);
    for c in per_core {
        let c = c?;
        ops += c.ops;
        write_ops += c.write_ops;
        resets += c.resets;
        if let Some(h) = c.hist {
            hist.add(h).map_err(|e| e.to_string())?;
        }
    }
    let (device_writes, device_write_bytes) = if buffered {
        (
            after.writebacks - before.writebacks,
            after.writeback_bytes - before.writeback_bytes,
        )
    } else {
        (write_ops, write_ops * bs)
    };
    let bytes = if workload == Workload::Readafterwrite {
        ops * bs * 2
    } else {
        ops * bs
    };
    let closed = rt
        .block_on(move || async move { z.close().await })
        .map_err(|e| e.to_string())?;
    match closed {
        Ok(()) => {}
        // Reported above; the next run starts with every zone reset.
        Err(e) if e.kind() == Some(ziob::ErrorKind::TooManyActive) => {}
        Err(e) => return Err(e.to_string()),
    }
    Ok(RunResult {
        dev: opts.dev.clone(),
        workload,
        bs,
        qd,
        zones,
        cores,
        ziob: buffered,
        ops,
        secs,
        iops: ops as f64 / secs,
        bytes_per_sec: bytes as f64 / secs,
        lat_ns: Latency::of(&hist),
        device_writes,
        device_write_bytes,
        zone_resets: resets,
        buffer: buffered.then_some(after),
    })
}

/// Opens the device through ZIOB (`buffered` or pass-through) with every zone reset, so
/// every run sees the same device.
pub(crate) fn open_fresh(rt: &Runtime, opts: &Options, buffered: bool) -> Result<Ziob, String> {
    let config = validate::config(opts, buffered);
    let spec = opts.dev.clone();
    rt.block_on(move || async move {
        let z = Ziob::open(&spec, config).await?;
        z.zone_action(ZoneAction::Reset, ZoneTarget::All).await?;
        Ok::<_, ZiobError>(z)
    })
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())
}

/// Syncs and closes `z` after a run. Data left buffered because the device allows fewer
/// active zones than were written is noted, not an error (an application would finish or
/// reset zones); any other error is.
pub(crate) fn sync_and_close(rt: &Runtime, z: Ziob) -> Result<(), String> {
    final_sync(rt, &z)?;
    let closed = rt
        .block_on(move || async move { z.close().await })
        .map_err(|e| e.to_string())?;
    match closed {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == Some(ziob::ErrorKind::TooManyActive) => Ok(()),
        Err(e) => Err(format!("close: {e}")),
    }
}

/// Syncs `z` after a run. More zones partly written than the device may hold active is noted,
/// not an error: the data stays in the buffer (an application would finish or reset zones) and
/// the measurement stands; any other error is.
fn final_sync(rt: &Runtime, z: &Ziob) -> Result<(), String> {
    let zc = z.clone();
    let synced = rt
        .block_on(move || async move { zc.sync().await })
        .map_err(|e| e.to_string())?;
    match synced {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == Some(ziob::ErrorKind::TooManyActive) => {
            eprintln!("note: final sync left data buffered: {e}");
            Ok(())
        }
        Err(e) => Err(format!("final sync: {e}")),
    }
}

/// The shards' stats, summed.
pub(crate) fn stats(rt: &Runtime, z: &Ziob) -> Result<ShardStats, String> {
    let z = z.clone();
    rt.block_on(move || async move { z.stats().await })
        .map_err(|e| e.to_string())?
        .map(|s| ShardStats::total(&s))
        .map_err(|e| e.to_string())
}

/// Fills the zones used by the random-read workload to capacity (whole blocks).
fn prefill(rt: &Runtime, z: &Ziob, zones: u32, bs: u64) -> Result<(), String> {
    let z = z.clone();
    rt.block_on(move || async move {
        let cap = z.geometry().zone_capacity_bytes;
        let chunk =
            (bs.max(128 << 10) / z.geometry().block_size_bytes) * z.geometry().block_size_bytes;
        for zone in 0..zones {
            let mut written = 0;
            while written < cap {
                let n = chunk.min(cap - written);
                z.append(zone, DmaBuf::zeroed(n as usize)).await?;
                written += n;
            }
        }
        z.sync().await
    })
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())
}

/// The zones this core's tasks use: the ones it owns, or all if it owns none.
pub(crate) fn local_zones(z: &Ziob, core: usize, zones: u32) -> Vec<u32> {
    let mine: Vec<u32> = (0..zones).filter(|&q| z.owner_core(q) == core).collect();
    if mine.is_empty() {
        (0..zones).collect()
    } else {
        mine
    }
}

async fn run_core(z: Ziob, core: usize, cores: usize, plan: Plan) -> Result<CoreResult, String> {
    assert_eq!(core_id(), core);
    let zones = local_zones(&z, core, plan.zones);
    let shared = Rc::new(RefCell::new(CoreResult {
        hist: Some(Histogram::new(3).expect("valid")),
        ..CoreResult::default()
    }));
    let start = Instant::now();
    let budget = Rc::new(RefCell::new(plan.ops_per_core));
    let mut tasks = Vec::new();
    for t in 0..plan.qd {
        let (z, shared, budget, zones) = (z.clone(), shared.clone(), budget.clone(), zones.clone());
        let epochs = plan.epochs.clone();
        let (workload, bs, deadline) = (plan.workload, plan.bs, plan.deadline);
        // The write workload gives each task its own zone: task t of core c.
        let own_zone = (core + cores * t) as u32;
        tasks.push(spawn(async move {
            let mut rng = (core as u64 + 1) * 0x9E37_79B9 + t as u64;
            let payload = vec![(core * 31 + t) as u8; bs as usize];
            let mut i = 0usize;
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
                i += 1;
                let zone = match workload {
                    Workload::Write => own_zone,
                    _ => zones[(t + i) % zones.len()],
                };
                let t0 = Instant::now();
                let (writes, resets) = match workload {
                    // Run by their own modules, never here.
                    Workload::Commitlog | Workload::Latency | Workload::Manyzones => {
                        return Err(format!("{workload:?} is not a loop workload"));
                    }
                    Workload::Append | Workload::Write => {
                        let done = write_op(&z, &epochs, workload, zone, &payload).await?;
                        (done.writes, done.resets)
                    }
                    Workload::Randread => {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        let slots = z.geometry().zone_capacity_bytes / bs;
                        let off = (rng % slots) * bs;
                        z.read(zone, off, bs as usize)
                            .await
                            .map_err(|e| e.to_string())?;
                        (0, 0)
                    }
                    Workload::Readafterwrite => {
                        let done = write_op(&z, &epochs, Workload::Append, zone, &payload).await?;
                        let (w, r) = (done.writes, done.resets);
                        let t1 = Instant::now();
                        let data = z
                            .read(zone, done.offset, bs as usize)
                            .await
                            .map_err(|e| e.to_string())?;
                        // Another task may have refilled (reset) the zone in between.
                        let same_fill =
                            epochs[zone as usize].epoch.load(Ordering::Acquire) == done.epoch;
                        if same_fill && data[..] != payload[..] {
                            return Err(format!("read-after-write mismatch in zone {zone}"));
                        }
                        let mut s = shared.borrow_mut();
                        let _ = s
                            .hist
                            .as_mut()
                            .expect("set")
                            .record(t1.elapsed().as_nanos() as u64);
                        s.ops += 1;
                        s.write_ops += w;
                        s.resets += r;
                        continue;
                    }
                };
                let ns = t0.elapsed().as_nanos() as u64;
                let mut s = shared.borrow_mut();
                let _ = s.hist.as_mut().expect("set").record(ns);
                s.ops += 1;
                s.write_ops += writes;
                s.resets += resets;
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await?;
    }
    let r = std::mem::take(&mut *shared.borrow_mut());
    Ok(r)
}

/// What [`write_op`] did.
pub(crate) struct WriteDone {
    /// Device-visible write ops (1).
    writes: u64,
    /// Zone resets this call made.
    pub(crate) resets: u64,
    /// Where the data landed.
    pub(crate) offset: u64,
    /// The zone's refill epoch the data belongs to.
    pub(crate) epoch: u64,
}

/// One append or write; a zone that is full is flushed, reset and the op retried.
///
/// Exactly one task refills a full zone: the one that wins the zone's epoch (even → odd)
/// for the fill it saw. It first flushes the zone, so the buffered run pays for writing its
/// data back like the pass-through run pays per write, and the reset never discards data
/// appended after another task's refill.
pub(crate) async fn write_op(
    z: &Ziob,
    epochs: &[ZoneEpoch],
    workload: Workload,
    zone: u32,
    payload: &[u8],
) -> Result<WriteDone, String> {
    let mut resets = 0;
    let ZoneEpoch { epoch, refilled } = &epochs[zone as usize];
    loop {
        let seen = epoch.load(Ordering::Acquire);
        if seen % 2 == 1 {
            let listener = refilled.listen();
            if epoch.load(Ordering::Acquire) == seen {
                listener.await;
            }
            continue;
        }
        let res = match workload {
            Workload::Write => {
                let wp = z.report(zone, 1).await.map_err(|e| e.to_string())?[0].write_pointer_bytes;
                z.write_at(zone, wp, DmaBuf::from_slice(payload))
                    .await
                    .map(|()| wp)
            }
            _ => z.append(zone, DmaBuf::from_slice(payload)).await,
        };
        match res {
            Ok(offset) => {
                return Ok(WriteDone {
                    writes: 1,
                    resets,
                    offset,
                    epoch: seen,
                })
            }
            Err(e)
                if matches!(
                    e.kind(),
                    Some(ziob::ErrorKind::ZoneFull) | Some(ziob::ErrorKind::BoundaryError)
                ) =>
            {
                if epoch
                    .compare_exchange(seen, seen + 1, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    continue; // another task refills this zone
                }
                // The active limit may refuse the flush; the reset frees the zone anyway.
                let flushed = z.flush(zone).await;
                let reset = z
                    .zone_action(ZoneAction::Reset, ZoneTarget::One(zone))
                    .await;
                epoch.store(seen + 2, Ordering::Release);
                refilled.notify(usize::MAX);
                match (flushed, reset) {
                    (_, Err(e)) => return Err(e.to_string()),
                    (Err(e), _) if e.kind() != Some(ziob::ErrorKind::TooManyActive) => {
                        return Err(e.to_string())
                    }
                    _ => {}
                }
                resets += 1;
            }
            Err(e)
                if matches!(e.kind(), Some(ziob::ErrorKind::InvalidWrite))
                    && workload == Workload::Write =>
            {
                return Err(format!("write to zone {zone} raced: {e}"));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn print_row(r: &RunResult) {
    eprintln!(
        "{:<15} bs {:>6} zones {:>3} qd {:>3} cores {} ziob {:<3}  {:>10.0} IOPS {:>9.1} MB/s  p50 {:>8} ns  p99 {:>9} ns  device writes {:>8} ({:.1} KiB avg)",
        format!("{:?}", r.workload).to_lowercase(),
        r.bs,
        r.zones,
        r.qd,
        r.cores,
        if r.ziob { "on" } else { "off" },
        r.iops,
        r.bytes_per_sec / 1e6,
        r.lat_ns.p50,
        r.lat_ns.p99,
        r.device_writes,
        if r.device_writes > 0 { r.device_write_bytes as f64 / r.device_writes as f64 / 1024.0 } else { 0.0 },
    );
}

fn print_ratios(results: &[RunResult]) {
    for on in results.iter().filter(|r| r.ziob) {
        if let Some(off) = results
            .iter()
            .find(|r| !r.ziob && r.bs == on.bs && r.zones == on.zones && r.workload == on.workload)
        {
            eprintln!(
                "ziob on vs off: {:?} bs {} zones {}: throughput {:.2}x, p50 latency {:.1}x lower, device writes per op {:.0}x fewer",
                on.workload,
                on.bs,
                on.zones,
                on.iops / off.iops,
                off.lat_ns.p50 as f64 / on.lat_ns.p50.max(1) as f64,
                off.device_writes as f64 / on.device_writes.max(1) as f64 * (on.ops as f64 / off.ops.max(1) as f64),
            );
        }
    }
}
