//! Command-line options of `ziob-bench`.

use clap::{Parser, ValueEnum};

/// What each task does in a loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Zone appends of `--bs` bytes (a full zone is flushed, reset and reused).
    Append,
    /// Writes at the zone's write pointer (each task owns its zones).
    Write,
    /// Random reads of `--bs` bytes from zones filled before the timed part.
    Randread,
    /// Append `--bs` bytes, then read them back; latency is the read's.
    Readafterwrite,
}

/// Benchmark ZIOB on a zoned device.
#[derive(Debug, Parser)]
#[command(name = "ziob-bench", version)]
pub struct Options {
    /// Device spec: `emu:PATH[,lat_us=N][,bw_mbps=N]`, `mem:...`, `nil:...`, `zbd:...`, `nvme:...`.
    /// A missing emu file is created with `--create-zones` zones of `--create-zone-size`.
    #[arg(
        long,
        default_value = "emu:/var/tmp/ziob-bench.zns,lat_us=20,bw_mbps=1000"
    )]
    pub dev: String,
    /// Workload.
    #[arg(long, value_enum, default_value = "append")]
    pub workload: Workload,
    /// Bytes per operation (K/M suffixes); a comma list runs each.
    #[arg(long, default_value = "4K", value_delimiter = ',')]
    pub bs: Vec<String>,
    /// Operations in flight per core (tasks per core).
    #[arg(long, default_value_t = 8)]
    pub qd: usize,
    /// Zones used (0..N); a comma list runs each.
    #[arg(long, default_value = "8", value_delimiter = ',')]
    pub zones: Vec<u32>,
    /// Runtime cores.
    #[arg(long, default_value_t = 1)]
    pub cores: usize,
    /// Stop after this many operations in total (instead of `--runtime`).
    #[arg(long)]
    pub ops: Option<u64>,
    /// Seconds per run.
    #[arg(long, default_value_t = 3.0)]
    pub runtime: f64,
    /// `on` (buffer), `off` (pass-through), or `on,off` for both in the same run.
    #[arg(long, default_value = "on,off", value_delimiter = ',')]
    pub ziob: Vec<String>,
    /// Buffer memory per core (default: ZIOB's default, 64M).
    #[arg(long)]
    pub buffer_size: Option<String>,
    /// Write-back unit (default: ZIOB's default, 512K).
    #[arg(long)]
    pub writeback_unit: Option<String>,
    /// Registered (fixed) buffers per core, each one write-back unit large: ZIOB's chunks
    /// come from them and write-back uses WRITE_FIXED (0 = none).
    #[arg(long, default_value_t = 0)]
    pub fixed_buffers: u32,
    /// Zones of a newly created emu device.
    #[arg(long, default_value_t = 64)]
    pub create_zones: u32,
    /// Zone size of a newly created emu device.
    #[arg(long, default_value = "64M")]
    pub create_zone_size: String,
    /// Repeat each configuration and report the median run.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}
