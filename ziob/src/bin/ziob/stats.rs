//! `ziob stats`: drives data through the ZIOB buffer and prints its per-core statistics.
//!
//! Each CLI command is a separate process, so a buffer's statistics only exist while a
//! process uses it: `stats` appends stdin to a zone through the buffer in `--bs` pieces,
//! flushes it, reads it back once and prints what every core's shard did. stdin is read up
//! to what fits in the zone (see [`crate::input`]).

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
    /// Print JSON: `{"total": {...}, "shards": [{...}, ...]}`.
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
    let shards = rt
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
            let stats = z.stats().await?;
            z.close().await?;
            Ok::<_, ziob::ZiobError>(Ok(stats))
        })
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())??;
    let total = ShardStats::total(&shards);
    if args.json {
        let v = serde_json::json!({ "total": total, "shards": shards });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", table(&shards, &total));
    }
    Ok(())
}

/// A table row: its label and how to read the counter.
type Row = (&'static str, fn(&ShardStats) -> u64);

fn table(shards: &[ShardStats], total: &ShardStats) -> String {
    let rows: [Row; 17] = [
        ("bytes written", |s| s.bytes_written),
        ("dirty bytes", |s| s.dirty_bytes),
        ("clean bytes (read cache)", |s| s.clean_bytes),
        ("memory used bytes", |s| s.memory_used_bytes),
        ("memory peak bytes", |s| s.memory_peak_bytes),
        ("memory budget bytes", |s| s.memory_budget_bytes),
        ("write-backs", |s| s.writebacks),
        ("write-back bytes", |s| s.writeback_bytes),
        ("write-back size p50", |s| s.writeback_size_p50_bytes),
        ("write-back size max", |s| s.writeback_size_max_bytes),
        ("write-back errors", |s| s.writeback_errors),
        ("read hits", |s| s.read_hits),
        ("read misses", |s| s.read_misses),
        ("device zone opens/closes", |s| {
            s.device_zone_opens * 1_000_000 + s.device_zone_closes
        }),
        ("device zone finishes", |s| s.device_zone_finishes),
        ("backpressure waits", |s| s.backpressure_waits),
        ("backpressure wait ns", |s| s.backpressure_wait_ns),
    ];
    let mut out = format!("{:<26}", "");
    for s in shards {
        out += &format!(" {:>14}", format!("core {}", s.core));
    }
    out += &format!(" {:>14}\n", "total");
    for (name, get) in rows {
        out += &format!("{name:<26}");
        for s in shards.iter().chain(std::iter::once(total)) {
            let v = get(s);
            let cell = if name == "device zone opens/closes" {
                format!("{}/{}", v / 1_000_000, v % 1_000_000)
            } else {
                v.to_string()
            };
            out += &format!(" {cell:>14}");
        }
        out.push('\n');
    }
    out
}
