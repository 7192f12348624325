//! Command-line options of `ziob-bench`. Every value is checked when it is parsed (ranges,
//! sizes, durations); [`crate::validate`] checks them against the device before any run.

use std::time::Duration;

use clap::builder::RangedU64ValueParser;
use clap::{Parser, ValueEnum};
use ziob_benches::args::{positive, positive_seconds, positive_size};

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
    /// A commit log: each task appends `--bs`-byte records to its zone and calls `flush`
    /// every `--flush-every` appends; append and flush latencies are kept apart.
    Commitlog,
    /// Append, then read the just-appended (not yet durable) data back, once with an idle
    /// buffer and once with a task per core flushing its zones every `--background-flush-ms`;
    /// reports both phases' append and read percentiles and the p99 ratio.
    Latency,
    /// One tiny append (`--bs`, e.g. 11 bytes) to each of `--zones` zones in turn, round
    /// after round; reports how far it got (a refusal such as `BufferFull` is a result, not
    /// a failure) and memory used against the budget.
    Manyzones,
}

/// Whether a run goes through the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Through the ZIOB buffer.
    On,
    /// Pass-through: every operation goes to the device.
    Off,
}

impl Mode {
    /// Whether the run is buffered.
    pub fn buffered(self) -> bool {
        self == Mode::On
    }
}

/// Most tasks per core (`--qd`): each holds a `--bs` payload.
pub const QD_MAX: u64 = 65_536;

/// Added to `--runtime` for the default `--timeout`.
pub const TIMEOUT_MARGIN: Duration = Duration::from_secs(300);

/// Benchmark ZIOB on a zoned device.
#[derive(Debug, Parser)]
#[command(name = "ziob-bench", version)]
pub struct Options {
    /// Device spec: `emu:PATH[,lat_us=N][,bw_mbps=N][,discard=1][,direct=0][,zero_ahead=0][,write_behind=0]`,
    /// `mem:...`, `nil:...`, `zbd:...`, `nvme:...`,
    /// `spdk:...` (built with `--features spdk`, see docs/SPDK.md).
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
    #[arg(long, default_value = "4K", value_delimiter = ',', value_parser = positive_size)]
    pub bs: Vec<u64>,
    /// Operations in flight per core (tasks per core), 1 to 65536.
    #[arg(long, default_value_t = 8, value_parser = RangedU64ValueParser::<usize>::new().range(1..=QD_MAX))]
    pub qd: usize,
    /// Zones used (0..N); a comma list runs each.
    #[arg(long, default_value = "8", value_delimiter = ',', value_parser = positive::<u32>)]
    pub zones: Vec<u32>,
    /// Runtime cores.
    #[arg(long, default_value_t = 1, value_parser = positive::<usize>)]
    pub cores: usize,
    /// Stop after this many operations in total (instead of `--runtime`).
    #[arg(long, value_parser = positive::<u64>)]
    pub ops: Option<u64>,
    /// Seconds per run (fractions allowed).
    #[arg(long, default_value = "3", value_parser = positive_seconds)]
    pub runtime: Duration,
    /// Give up (exit status 3, with a message) when one run — setup, timed part, final sync
    /// and close — or opening the device takes longer than this many seconds, instead of
    /// hanging. Default: `--runtime` plus 300.
    #[arg(long, value_parser = positive_seconds)]
    pub timeout: Option<Duration>,
    /// `on` (buffer), `off` (pass-through), or `on,off` for both in the same run.
    #[arg(long, default_value = "on,off", value_delimiter = ',', value_enum)]
    pub ziob: Vec<Mode>,
    /// Buffer memory per core (default: ZIOB's default, 64M).
    #[arg(long, value_parser = positive_size)]
    pub buffer_size: Option<u64>,
    /// Write-back unit (default: ZIOB's default, 512K).
    #[arg(long, value_parser = positive_size)]
    pub writeback_unit: Option<u64>,
    /// Registered (fixed) buffers per core, each one write-back unit large: ZIOB's chunks
    /// come from them and write-back uses WRITE_FIXED (0 = none).
    #[arg(long, default_value_t = 0)]
    pub fixed_buffers: u32,
    /// Zones of a newly created emu device.
    #[arg(long, default_value_t = 64, value_parser = positive::<u32>)]
    pub create_zones: u32,
    /// Zone size of a newly created emu device.
    #[arg(long, default_value = "64M", value_parser = positive_size)]
    pub create_zone_size: u64,
    /// `commitlog`: appends per task between two `flush` calls of its zone; a comma list
    /// runs each.
    #[arg(long, default_value = "8", value_delimiter = ',', value_parser = positive::<u64>)]
    pub flush_every: Vec<u64>,
    /// `latency`: milliseconds between two rounds of the background flusher (one task per
    /// core flushing each of the core's zones) in the phase under write-back.
    #[arg(long, default_value_t = 5, value_parser = positive::<u64>)]
    pub background_flush_ms: u64,
    /// `latency`: microseconds each task sleeps between two append + read pairs (0 = back to
    /// back). Pacing keeps the idle phase free of full-unit write-back, so it measures an
    /// idle buffer.
    #[arg(long, default_value_t = 0)]
    pub op_interval_us: u64,
    /// Block size of a newly created emu device (512 lets pass-through append 512-byte
    /// records; an existing file keeps its own).
    #[arg(long, default_value = "4K", value_parser = positive_size)]
    pub create_block_size: u64,
    /// Repeat each configuration and report the median run.
    #[arg(long, default_value_t = 1, value_parser = positive::<usize>)]
    pub repeat: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl Options {
    /// The watchdog limit of one run: `--timeout`, or `--runtime` plus [`TIMEOUT_MARGIN`].
    pub fn timeout(&self) -> Duration {
        self.timeout
            .unwrap_or_else(|| self.runtime.saturating_add(TIMEOUT_MARGIN))
    }
}
