//! `ziob`: inspect and drive zoned devices from the shell.
//!
//! ```text
//! ziob create emu:PATH --zones N --zone-size S [--zone-capacity C] [--max-open K]
//!             [--max-active K] [--block-size B] [--max-append S]
//! ziob info DEV
//! ziob report DEV [--zone Z] [--json]
//! ziob reset|open|close|finish DEV (ZONE | --all)
//! ziob write DEV --zone Z [--pad]          data from stdin, at the write pointer
//! ziob append DEV --zone Z [--pad]         data from stdin; prints the offset it landed at
//! ziob read DEV --zone Z --offset O --length L   data to stdout
//! ziob stats DEV --zone Z [--bs S] [--cores N] [--per-core] [--json]   stdin through the
//!             buffer; prints its metrics
//! ziob fs mkfs DEV [--journal-zones N] [--force]   format a zone file system (ziob-zonefs)
//! ziob fs ls DEV [DIR] [-l] [--json]       files and directories (read-only)
//! ziob fs df DEV [--json]                  free / used / reclaimable, space amplification
//! ziob fs fsck DEV [-v]                    consistency check: exit 0 clean, 3 inconsistent
//! ```
//! `DEV` is a device spec (`emu:/path/dev.zns`, `mem:zones=8,zone_size=1M`, …). Zones are
//! numbered from 0; offsets and lengths are bytes within the zone; sizes take K/M/G suffixes.
//! A command that changes data or zone state exits 0 only once the change is durable.
//! `write` and `append` read stdin only up to what the zone takes (its remaining capacity,
//! for `append` also the zone append size limit): larger input is refused before anything is
//! written. `info`, `report`, `read` and `fs ls|df|fsck` ask only for read access
//! (`access.rs`); `fs ls|df|fsck` never write to the device (`filesystem/`).
//! Errors go to stderr with the API's wording; the exit code is 1 (2 for usage errors; `fs
//! fsck` exits 3 when the file system is inconsistent). Reference: docs/CLI.md.
//! The library's `tracing` events go to stderr too, filtered by `RUST_LOG` (default `warn`).

mod access;
mod commands;
mod filesystem;
mod input;
mod output;
mod stats;

use clap::{Args, Parser, Subcommand};
use ziob_backends::{parse_size_bytes, ZoneAction};

/// Inspect and drive ZIOB zoned devices, and zone file systems on them (`ziob fs`).
#[derive(Debug, Parser)]
#[command(name = "ziob", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// A size in bytes with an optional K/M/G/T suffix.
fn size(text: &str) -> Result<u64, String> {
    parse_size_bytes(text)
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create an emulated zoned device file (emu:PATH; the file must not exist).
    Create(CreateArgs),
    /// Print the device geometry and limits.
    Info {
        /// Device spec, e.g. emu:/tmp/dev.zns.
        dev: String,
    },
    /// Report zones (start, capacity, write pointer and state), like `blkzone report`.
    Report {
        /// Device spec.
        dev: String,
        /// Only this zone.
        #[arg(long)]
        zone: Option<u32>,
        /// Print JSON: one object per zone with index, start, capacity, write_pointer, state.
        #[arg(long)]
        json: bool,
    },
    /// Reset zones (write pointer to the zone start, state Empty).
    Reset(ActionArgs),
    /// Open zones explicitly.
    Open(ActionArgs),
    /// Close open zones.
    Close(ActionArgs),
    /// Finish zones (make them Full).
    Finish(ActionArgs),
    /// Write stdin at the zone's write pointer (refused whole if it does not fit).
    Write(DataArgs),
    /// Zone-append stdin; prints the byte offset within the zone where it landed.
    Append(DataArgs),
    /// Append stdin to a zone through the ZIOB buffer, flush, read back, and print the
    /// buffer's metrics: per-core counters and gauges, and latency percentiles per operation.
    Stats(stats::StatsArgs),
    /// Read bytes of a zone to stdout.
    Read {
        /// Device spec.
        dev: String,
        /// Zone index.
        #[arg(long)]
        zone: u32,
        /// Offset in bytes within the zone (a multiple of the block size).
        #[arg(long, value_parser = size)]
        offset: u64,
        /// Length in bytes (a multiple of the block size).
        #[arg(long, value_parser = size)]
        length: u64,
    },
    /// Zone file system commands (`ziob-zonefs`): mkfs, ls, df, fsck.
    Fs(filesystem::FsArgs),
}

#[derive(Debug, Args)]
struct CreateArgs {
    /// Device spec: emu:PATH.
    dev: String,
    /// Number of zones.
    #[arg(long)]
    zones: u32,
    /// Zone size (distance between zone starts).
    #[arg(long, value_parser = size)]
    zone_size: u64,
    /// Writable bytes per zone (default: the zone size).
    #[arg(long, value_parser = size)]
    zone_capacity: Option<u64>,
    /// Max open zones (default: no limit).
    #[arg(long)]
    max_open: Option<u32>,
    /// Max active zones (default: no limit).
    #[arg(long)]
    max_active: Option<u32>,
    /// Logical block size.
    #[arg(long, value_parser = size, default_value = "4096")]
    block_size: u64,
    /// Zone append size limit (default: 512K or the capacity if smaller).
    #[arg(long, value_parser = size)]
    max_append: Option<u64>,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["zone", "all"])))]
struct ActionArgs {
    /// Device spec.
    dev: String,
    /// Zone index.
    zone: Option<u32>,
    /// Every zone the action applies to.
    #[arg(long)]
    all: bool,
}

#[derive(Debug, Args)]
struct DataArgs {
    /// Device spec.
    dev: String,
    /// Zone index.
    #[arg(long)]
    zone: u32,
    /// Pad the input with zeros to a whole number of blocks.
    #[arg(long)]
    pad: bool,
}

fn main() {
    ziob::logging::init();
    let cli = Cli::parse();
    let cli = match cli.command {
        Command::Stats(args) => match stats::run(args) {
            Ok(()) => return,
            Err(e) => {
                eprintln!("ziob: {e}");
                std::process::exit(1);
            }
        },
        Command::Fs(args) => std::process::exit(filesystem::run(args)),
        command => Cli { command },
    };
    let request = match commands::Request::from_command(cli.command) {
        Ok(r) => r,
        Err(e) => fail(&e),
    };
    // nvme: specs need 128-byte SQEs (NVMe passthrough).
    let rt = match ziob_backends::runtime_builder_for(request.spec())
        .cores(1)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => fail(&commands::CliError::Runtime(e.to_string())),
    };
    match rt.block_on(move || commands::run(request)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => fail(&e),
        Err(e) => fail(&commands::CliError::Runtime(e.to_string())),
    }
}

fn fail(e: &commands::CliError) -> ! {
    eprintln!("ziob: {e}");
    std::process::exit(1);
}

impl Command {
    fn action(&self) -> Option<ZoneAction> {
        match self {
            Command::Reset(_) => Some(ZoneAction::Reset),
            Command::Open(_) => Some(ZoneAction::Open),
            Command::Close(_) => Some(ZoneAction::Close),
            Command::Finish(_) => Some(ZoneAction::Finish),
            _ => None,
        }
    }
}
