//! `ziob stats`: drives data through the ZIOB buffer and prints its metrics: every core's
//! counters and gauges with their total, and the latency percentiles per operation kind.
//!
//! Each CLI command is a separate process, so a buffer's metrics only exist while a process
//! uses it (a long-running service publishes its own through the `metrics` facade, see
//! docs/METRICS.md): `stats` appends stdin to a zone through the buffer in `--bs` pieces,
//! flushes it, reads it back once and prints what every core's shard did. stdin is read up
//! to what fits in the zone (see [`crate::input`]).

use ziob::metrics::{MetricsSnapshot, OpKind, OpLatencies};
use ziob::{DmaBuf, ShardStats, Ziob, ZiobConfig};

use crate::access::{open, Access};
use crate::input::{read_stdin_within, Room};

/// Arguments of `ziob stats`.
#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    /// Device spec.
    pub dev: String,
    /// Zone to append stdin to.
    #[arg(long)]
    pub zone: u32,
    /// Bytes per append (K/M suffixes).
    #[arg(long, value_parser = crate::size, default_value = "4K")]
    pub bs: u64,
    /// Runtime cores (shards).
    #[arg(long, default_value_t = 1)]
    pub cores: usize,
    /// Also print each core's latency table (the JSON always has them).
    #[arg(long)]
    pub per_core: bool,
    /// Print JSON: `{"total": {...}, "shards": [{...}, ...]}`, each the stats fields with a
    /// `latency` object (per operation kind: count, sum_ns, p50_ns, p90_ns, p99_ns, p999_ns,
    /// max_ns).
    #[arg(long)]
    pub json: bool,
}

/// Runs `ziob stats`; returns the message of a failure.
pub fn run(args: StatsArgs) -> Result<(), String> {
    if args.bs == 0 {
        return Err("--bs must be positive".into());
    }
    let rt = ziob_backends::runtime_builder_for(&args.dev)
        .cores(args.cores)
        .build()
        .map_err(|e| e.to_string())?;
    let (dev, zone, bs) = (args.dev.clone(), args.zone, args.bs as usize);
    let snapshot = rt
        .block_on(move || async move {
            let device = open(&dev, Access::ReadWrite).await?;
            let z = Ziob::with_device(device, ZiobConfig::default()).await?;
            let info = z.report(zone, 1).await?[0];
            let start = info.write_pointer_bytes;
            // The buffer splits appends into pieces: only the capacity bounds the input.
            let data = match read_stdin_within(&Room::of(z.geometry(), &info, false)) {
                Ok(data) => data,
                Err(e) => {
                    z.close().await?;
                    return Ok(Err(e.to_string()));
                }
            };
            for piece in data.chunks(bs) {
                z.append(zone, DmaBuf::from_slice(piece)).await?;
            }
            z.flush(zone).await?;
            if !data.is_empty() {
                z.read(zone, start, data.len()).await?;
            }
            let metrics = z.metrics().await?;
            z.close().await?;
            Ok::<_, ziob::ZiobError>(Ok(metrics))
        })
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())??;
    let text = if args.json {
        serde_json::to_string_pretty(&snapshot).map_err(|e| e.to_string())? + "\n"
    } else {
        let mut text = format!(
            "{}\n{}",
            table(&snapshot),
            latency_table("latency (µs)", &snapshot.total().latency)
        );
        if args.per_core {
            for c in snapshot.cores() {
                let title = format!("core {} (µs)", c.stats.core);
                text += &format!("\n{}", latency_table(&title, &c.latency));
            }
        }
        text
    };
    print_out(&text)
}

/// Writes `text` to stdout; a reader that went away (`| head`) is not an error.
fn print_out(text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.to_string()),
        _ => Ok(()),
    }
}

/// A table row: its label and how to read the value.
type Row = (&'static str, fn(&ShardStats) -> String);

/// Counters and gauges: one column per core, then the total.
fn table(snapshot: &MetricsSnapshot) -> String {
    let rows: [Row; 31] = [
        ("bytes written", |s| s.bytes_written.to_string()),
        ("append bytes", |s| s.append_bytes.to_string()),
        ("read bytes", |s| s.read_bytes.to_string()),
        ("read hits", |s| s.read_hits.to_string()),
        ("read misses", |s| s.read_misses.to_string()),
        ("direct reads", |s| s.direct_reads.to_string()),
        ("direct read fallbacks", |s| {
            s.direct_read_fallbacks.to_string()
        }),
        ("dirty bytes", |s| s.dirty_bytes.to_string()),
        ("clean bytes (read cache)", |s| s.clean_bytes.to_string()),
        ("memory used bytes", |s| s.memory_used_bytes.to_string()),
        ("memory peak bytes", |s| s.memory_peak_bytes.to_string()),
        ("memory budget bytes", |s| s.memory_budget_bytes.to_string()),
        ("zones buffered", |s| s.zones_buffered.to_string()),
        ("zones waiting (resource)", |s| {
            s.zones_waiting_for_resource.to_string()
        }),
        ("calls in flight", |s| s.calls_in_flight.to_string()),
        ("calls in flight peak", |s| {
            s.calls_in_flight_peak.to_string()
        }),
        ("write-backs", |s| s.writebacks.to_string()),
        ("write-back bytes", |s| s.writeback_bytes.to_string()),
        ("write-backs in flight", |s| {
            s.device_writes_in_flight.to_string()
        }),
        ("write-back size p50", |s| {
            s.writeback_size_p50_bytes.to_string()
        }),
        ("write-back size max", |s| {
            s.writeback_size_max_bytes.to_string()
        }),
        ("write-back errors", |s| s.writeback_errors.to_string()),
        ("write-back retries", |s| s.writeback_retries.to_string()),
        ("device flushes", |s| s.device_flushes.to_string()),
        ("durable writes", |s| s.device_durable_writes.to_string()),
        ("device zone opens/closes", |s| {
            format!("{}/{}", s.device_zone_opens, s.device_zone_closes)
        }),
        ("device zone finishes", |s| {
            s.device_zone_finishes.to_string()
        }),
        ("device zone resets", |s| s.device_zone_resets.to_string()),
        ("backpressure waits", |s| s.backpressure_waits.to_string()),
        ("backpressure wait ns", |s| {
            s.backpressure_wait_ns.to_string()
        }),
        ("pressure pads", |s| s.pressure_pads.to_string()),
    ];
    let columns: Vec<&ShardStats> = snapshot
        .cores()
        .iter()
        .map(|c| &c.stats)
        .chain(std::iter::once(&snapshot.total().stats))
        .collect();
    let mut out = format!("{:<26}", "");
    for c in snapshot.cores() {
        out += &format!(" {:>14}", format!("core {}", c.stats.core));
    }
    out += &format!(" {:>14}\n", "total");
    for (name, get) in rows {
        out += &format!("{name:<26}");
        for s in &columns {
            out += &format!(" {:>14}", get(s));
        }
        out.push('\n');
    }
    out
}

/// Latency percentiles of every operation kind recorded, in microseconds, under `title`.
fn latency_table(title: &str, latency: &OpLatencies) -> String {
    let us = |ns: u64| format!("{:.1}", ns as f64 / 1_000.0);
    let mut out = format!(
        "{:<14} {:>8} {:>11} {:>11} {:>11} {:>11} {:>11}\n",
        title, "count", "p50", "p90", "p99", "p99.9", "max"
    );
    for op in OpKind::ALL.into_iter().filter(|&op| latency.count(op) > 0) {
        let s = latency.summary(op);
        out += &format!(
            "{:<14} {:>8} {:>11} {:>11} {:>11} {:>11} {:>11}\n",
            op.name(),
            s.count,
            us(s.p50_ns),
            us(s.p90_ns),
            us(s.p99_ns),
            us(s.p999_ns),
            us(s.max_ns)
        );
    }
    out
}
