//! The arguments of `ziob fs`.

use clap::{Args, Subcommand};
use ziob_zonefs::JOURNAL_ZONES_RANGE;

/// Arguments of `ziob fs`.
#[derive(Debug, Args)]
pub struct FsArgs {
    #[command(subcommand)]
    pub command: FsCommand,
}

/// A `ziob fs` subcommand.
#[derive(Debug, Subcommand)]
pub enum FsCommand {
    /// Format a device with a zone file system (every zone is reset).
    ///
    /// Refuses a device that holds data (a file system or anything else) unless --force; a
    /// refused mkfs writes nothing.
    Mkfs {
        /// Device spec, e.g. emu:/var/tmp/fs.zns.
        dev: String,
        /// Zones reserved for the metadata journal (zones 0..N).
        #[arg(long, default_value_t = 2, value_parser = journal_zones)]
        journal_zones: u32,
        /// Format even if the device holds data: everything on it is erased.
        #[arg(long)]
        force: bool,
    },
    /// List files and directories (read-only).
    ///
    /// Lists what is directly under DIR (default: the root), directories with a trailing `/`;
    /// a file as DIR lists that file. Shows what the journal holds: files up to their last
    /// sync. Never writes to the device.
    Ls {
        /// Device spec.
        dev: String,
        /// Directory (or file) to list.
        #[arg(default_value = "/")]
        dir: String,
        /// Long listing: size in bytes, lifetime class and extent count of each file.
        #[arg(short, long)]
        long: bool,
        /// Print JSON: one object per entry with name, type ("file" or "dir") and, for files,
        /// size, lifetime and extents.
        #[arg(long)]
        json: bool,
    },
    /// Show free, used and reclaimable space and space amplification (read-only).
    ///
    /// Like `zenfs df`, over the data zones: free (writable), used (bytes in files),
    /// reclaimable (written or given up in zones that still hold live data) and space
    /// amplification ((used + reclaimable) / used). Never writes to the device.
    Df {
        /// Device spec.
        dev: String,
        /// Print JSON (bytes; space_amplification as a ratio).
        #[arg(long)]
        json: bool,
    },
    /// Check the file system's consistency (read-only): exit 0 clean, 3 inconsistent.
    ///
    /// Checks every file's extents against the zones' write pointers and each other, the
    /// live bytes per zone and the journal. Exit status 0 when clean; 3 when inconsistent or
    /// not mountable (the problems on stdout); 1 when it cannot check (no file system,
    /// device error). Never writes to the device.
    Fsck {
        /// Device spec.
        dev: String,
        /// Also print every data zone's state, write pointer and live bytes.
        #[arg(short, long)]
        verbose: bool,
    },
}

impl FsCommand {
    /// The device spec the command is about.
    pub fn spec(&self) -> &str {
        match self {
            FsCommand::Mkfs { dev, .. }
            | FsCommand::Ls { dev, .. }
            | FsCommand::Df { dev, .. }
            | FsCommand::Fsck { dev, .. } => dev,
        }
    }
}

/// `--journal-zones`: a number in [`JOURNAL_ZONES_RANGE`].
fn journal_zones(text: &str) -> Result<u32, String> {
    let n: u32 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if !JOURNAL_ZONES_RANGE.contains(&n) {
        return Err(format!(
            "{n} is out of range: {}..={} journal zones",
            JOURNAL_ZONES_RANGE.start(),
            JOURNAL_ZONES_RANGE.end()
        ));
    }
    Ok(n)
}
