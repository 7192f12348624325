//! The `manyzones` workload: tiny appends (`--bs`, e.g. 11 bytes) to zones 0, 1, 2, … of
//! `--zones` zones in turn, round after round, with the default buffer configuration (or
//! `--buffer-size` / `--writeback-unit`). One task issues the appends one at a time (each on
//! its zone's owner core). A refusal by the buffer (`BufferFull`) ends the run and is its
//! result — how many zones got data, with the error's message — not a failure of the
//! benchmark; any other error is. Memory used against the budget is read from the stats
//! right after the appends (`memory_used_bytes`, `memory_peak_bytes`, `memory_budget_bytes`).

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;
use ziob::{DmaBuf, Geometry, Runtime, ShardStats, ZiobError};

use crate::options::{Options, Workload};
use crate::run::{open_fresh, stats, sync_and_close, Latency};
use crate::watchdog::Watchdog;

/// One configuration's result.
#[derive(Debug, Clone, Serialize)]
pub struct ManyzonesResult {
    dev: String,
    workload: Workload,
    /// Bytes per append.
    bs: u64,
    /// Zones the run appends to.
    zones: u32,
    cores: usize,
    ziob: bool,
    /// Whether every planned append was accepted.
    completed: bool,
    /// Appends accepted.
    appends: u64,
    /// Full passes over the zones.
    rounds: u64,
    /// Distinct zones holding data.
    zones_written: u32,
    /// The zone whose append was refused, if one was.
    refused_at_zone: Option<u32>,
    /// The refusal's kind (`BufferFull`) and message, if one came.
    refusal_kind: Option<String>,
    refusal: Option<String>,
    secs: f64,
    appends_per_sec: f64,
    append_lat_ns: Latency,
    /// Bytes accepted and not yet on the device, right after the appends.
    dirty_bytes: u64,
    /// Memory charged against the budget right after the appends, over all cores.
    memory_used_bytes: u64,
    memory_peak_bytes: u64,
    memory_budget_bytes: u64,
    /// `memory_used_bytes` / `zones_written`.
    memory_per_zone_bytes: f64,
    /// The stats right after the appends (buffered runs).
    buffer: Option<ShardStats>,
}

/// How the appends ended.
struct Outcome {
    appends: u64,
    rounds: u64,
    zones_written: u32,
    refused: Option<(u32, String, String)>,
    hist: Histogram<u64>,
}

/// Runs every `--bs` × `--zones` × `--ziob` combination (median of `--repeat` by zones
/// written, then appends per second). Pass-through runs only when `--bs` is whole blocks.
pub fn run_all(
    rt: &Runtime,
    opts: &Options,
    geometry: &Geometry,
    dog: &Watchdog,
) -> Result<Vec<ManyzonesResult>, String> {
    let mut results = Vec::new();
    for &bs in &opts.bs {
        for &zones in &opts.zones {
            for &mode in &opts.ziob {
                let buffered = mode.buffered();
                if !buffered && bs % geometry.block_size_bytes != 0 {
                    eprintln!("skipped: --ziob off with --bs {bs}: pass-through appends whole {}-byte blocks only", geometry.block_size_bytes);
                    continue;
                }
                if !buffered && geometry.max_active_zones.is_some_and(|a| zones > a) {
                    eprintln!("skipped: --ziob off with --zones {zones}: the device allows fewer active zones");
                    continue;
                }
                let mut runs = Vec::new();
                for _ in 0..opts.repeat {
                    let _armed = dog.guard(
                        format!(
                            "the run --workload manyzones --bs {bs} --zones {zones} --ziob {}",
                            if buffered { "on" } else { "off" }
                        ),
                        opts.timeout(),
                    );
                    runs.push(one_run(rt, opts, bs, zones, buffered)?);
                }
                runs.sort_by(|a, b| {
                    a.zones_written
                        .cmp(&b.zones_written)
                        .then(a.appends_per_sec.total_cmp(&b.appends_per_sec))
                });
                let median = runs.swap_remove(runs.len() / 2);
                print_row(&median);
                results.push(median);
            }
        }
    }
    Ok(results)
}

fn one_run(
    rt: &Runtime,
    opts: &Options,
    bs: u64,
    zones: u32,
    buffered: bool,
) -> Result<ManyzonesResult, String> {
    let z = open_fresh(rt, opts, buffered)?;
    let (ops, deadline) = (opts.ops, opts.runtime);
    let start = Instant::now();
    let zc = z.clone();
    let outcome = rt
        .block_on(move || async move { append_round_robin(&zc, zones, bs, ops, deadline).await })
        .map_err(|e| e.to_string())??;
    let secs = start.elapsed().as_secs_f64();
    let after = stats(rt, &z)?;
    sync_and_close(rt, z)?;
    let (zone, kind, message) = match outcome.refused {
        Some((z, k, m)) => (Some(z), Some(k), Some(m)),
        None => (None, None, None),
    };
    Ok(ManyzonesResult {
        dev: opts.dev.clone(),
        workload: Workload::Manyzones,
        bs,
        zones,
        cores: opts.cores,
        ziob: buffered,
        completed: zone.is_none(),
        appends: outcome.appends,
        rounds: outcome.rounds,
        zones_written: outcome.zones_written,
        refused_at_zone: zone,
        refusal_kind: kind,
        refusal: message,
        secs,
        appends_per_sec: outcome.appends as f64 / secs,
        append_lat_ns: Latency::of(&outcome.hist),
        dirty_bytes: after.dirty_bytes,
        memory_used_bytes: after.memory_used_bytes,
        memory_peak_bytes: after.memory_peak_bytes,
        memory_budget_bytes: after.memory_budget_bytes,
        memory_per_zone_bytes: after.memory_used_bytes as f64
            / f64::from(outcome.zones_written.max(1)),
        buffer: buffered.then_some(after),
    })
}

/// Appends `bs` bytes to zones 0..`zones` in turn: `ops` appends in all, or (without
/// `ops`) at least one full pass and then more passes until `deadline`. Stops at the first
/// `BufferFull`.
async fn append_round_robin(
    z: &ziob::Ziob,
    zones: u32,
    bs: u64,
    ops: Option<u64>,
    deadline: Duration,
) -> Result<Outcome, String> {
    let mut out = Outcome {
        appends: 0,
        rounds: 0,
        zones_written: 0,
        refused: None,
        hist: Histogram::new(3).expect("valid"),
    };
    let payload = vec![0x5a_u8; bs as usize];
    let start = Instant::now();
    'rounds: loop {
        for zone in 0..zones {
            if ops.is_some_and(|n| out.appends >= n) {
                break 'rounds;
            }
            let t0 = Instant::now();
            match z.append(zone, DmaBuf::from_slice(&payload)).await {
                Ok(_) => {
                    let _ = out.hist.record(t0.elapsed().as_nanos() as u64);
                    out.appends += 1;
                    if out.rounds == 0 {
                        out.zones_written = zone + 1;
                    }
                }
                Err(e @ ZiobError::BufferFull { .. }) => {
                    out.refused = Some((zone, "BufferFull".into(), e.to_string()));
                    break 'rounds;
                }
                Err(e) => return Err(format!("append to zone {zone}: {e}")),
            }
        }
        out.rounds += 1;
        if ops.is_none() && start.elapsed() >= deadline {
            break;
        }
    }
    Ok(out)
}

fn print_row(r: &ManyzonesResult) {
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    eprintln!(
        "manyzones bs {} zones {} cores {} ziob {}: {} ({} appends, {} rounds, {} zones written, {:.0} appends/s, append p50/p99 {}/{} ns); memory used {:.1} MiB of {:.1} MiB budget (peak {:.1} MiB, {:.0} B per zone written), {} B dirty",
        r.bs,
        r.zones,
        r.cores,
        if r.ziob { "on" } else { "off" },
        match (&r.refused_at_zone, &r.refusal) {
            (Some(zone), Some(msg)) => format!("refused at zone {zone}: {msg}"),
            _ => "completed".to_string(),
        },
        r.appends,
        r.rounds,
        r.zones_written,
        r.appends_per_sec,
        r.append_lat_ns.p50,
        r.append_lat_ns.p99,
        mib(r.memory_used_bytes),
        mib(r.memory_budget_bytes),
        mib(r.memory_peak_bytes),
        r.memory_per_zone_bytes,
        r.dirty_bytes,
    );
}
