//! `ziob fs`: the zone file layer (`ziob-zonefs`) from the shell, like `zenfs`'s tool:
//! `mkfs` formats a device, `ls` lists files, `df` shows space, `fsck` checks consistency.
//!
//! `ls`, `df` and `fsck` open the device read-only (emu: `O_RDONLY` with a shared lock, see
//! `access.rs`) under a pass-through instance and mount the file system read-only
//! ([`ZoneFs::mount_read_only`](ziob_zonefs::ZoneFs::mount_read_only)): they never write to
//! the device. Such a mount sees what the journal holds: files up to their last `sync`.

mod args;
mod error;
mod instance;
mod render;

pub use args::FsArgs;
pub use error::FsCmdError;

use ziob::ZoneState;
use ziob_zonefs::{FsError, MkfsOptions, ZoneFs};

use args::FsCommand;
use instance::Instance;
use render::Entry;

/// Exit code of `fsck` when it found the file system inconsistent or unreadable.
pub const EXIT_INCONSISTENT: i32 = 3;

/// Runs `ziob fs ...`; returns the process exit code (errors are printed to stderr).
pub fn run(args: FsArgs) -> i32 {
    let spec = args.command.spec().to_string();
    let rt = match ziob_backends::runtime_builder_for(&spec).cores(1).build() {
        Ok(rt) => rt,
        Err(e) => return fail(&FsCmdError::Runtime(e.to_string())),
    };
    match rt.block_on(move || run_command(args.command)) {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => fail(&e),
        Err(e) => fail(&FsCmdError::Runtime(e.to_string())),
    }
}

fn fail(e: &FsCmdError) -> i32 {
    eprintln!("ziob: {e}");
    e.exit_code()
}

async fn run_command(command: FsCommand) -> Result<i32, FsCmdError> {
    match command {
        FsCommand::Mkfs {
            dev,
            journal_zones,
            force,
        } => {
            // Look first through a read-only instance: a refused mkfs writes nothing at all
            // (not even the emu zone table a read-write close rewrites).
            if !force {
                let inst = Instance::read_only(&dev).await?;
                let found = in_use(&inst).await;
                inst.abandon().await?;
                if let Some(found) = found? {
                    return Err(FsCmdError::InUse { dev, found });
                }
            }
            let inst = Instance::read_write(&dev).await?;
            let opts = MkfsOptions {
                journal_zones,
                force,
                ..MkfsOptions::default()
            };
            let res = ZoneFs::mkfs(inst.client(), opts).await;
            inst.close().await?;
            res.map_err(|e| FsCmdError::mkfs(e, &dev))?;
            render::print(&render::formatted(&dev, &inst.geometry(), journal_zones))?;
            Ok(0)
        }
        FsCommand::Ls {
            dev,
            dir,
            long,
            json,
        } => {
            let inst = Instance::read_only(&dev).await?;
            let res = list(&inst, &dir).await;
            inst.abandon().await?;
            let entries = res?;
            let text = if json {
                render::ls_json(&entries)
            } else {
                render::ls_text(&entries, long)
            };
            render::print(&text)?;
            Ok(0)
        }
        FsCommand::Df { dev, json } => {
            let inst = Instance::read_only(&dev).await?;
            let res = inst.mount().await;
            let usage = match &res {
                Ok(fs) => Some(fs.df().await),
                Err(_) => None,
            };
            inst.abandon().await?;
            res?;
            let usage = usage.expect("mounted");
            let text = if json {
                render::df_json(&usage)
            } else {
                render::df_text(&usage)
            };
            render::print(&text)?;
            Ok(0)
        }
        FsCommand::Fsck { dev, verbose } => {
            let inst = Instance::read_only(&dev).await?;
            let res = check(&inst).await;
            inst.abandon().await?;
            let report = match res {
                Ok(r) => r,
                Err(e) if e.is_inconsistency() => {
                    render::print(&format!("{dev}: not mountable: {e}\n"))?;
                    return Ok(EXIT_INCONSISTENT);
                }
                Err(e) => return Err(e),
            };
            render::print(&render::fsck_text(&dev, &report, verbose))?;
            Ok(if report.is_clean() {
                0
            } else {
                EXIT_INCONSISTENT
            })
        }
    }
}

/// The entries `ls` shows for `dir`: the files and subdirectories directly under it, or the
/// file itself when `dir` names a file.
async fn list(inst: &Instance, dir: &str) -> Result<Vec<Entry>, FsCmdError> {
    let fs = inst.mount().await?;
    let names = fs.list(dir).await?;
    let root = dir.trim_matches('/').is_empty();
    if names.is_empty() && !root {
        if fs.exists(dir).await? {
            return Ok(vec![Entry::file(dir, fs.stat(dir).await?)]);
        }
        return Err(FsCmdError::NoSuchPath(dir.to_string()));
    }
    let mut entries = Vec::new();
    for name in names {
        let path = if root {
            name.clone()
        } else {
            format!("{}/{name}", dir.trim_end_matches('/'))
        };
        // A flat namespace: one name may be a file and a directory (a prefix of other files).
        if fs.exists(&path).await? {
            entries.push(Entry::file(&name, fs.stat(&path).await?));
        }
        if !fs.list(&path).await?.is_empty() {
            entries.push(Entry::dir(&name));
        }
    }
    Ok(entries)
}

/// What `mkfs` without `--force` finds on the device, as [`ZoneFs::mkfs`] names it: `None`
/// when every zone is empty.
async fn in_use(inst: &Instance) -> Result<Option<String>, FsCmdError> {
    let zones = inst.client().report(0, inst.geometry().zone_count).await?;
    let Some(z) = zones.iter().find(|z| z.state != ZoneState::Empty) else {
        return Ok(None);
    };
    Ok(Some(match inst.mount().await {
        Err(FsCmdError::NotFormatted(_) | FsCmdError::Fs(FsError::Foreign { .. })) => {
            format!("data in zone {}", z.index)
        }
        _ => "a zone file system".to_string(),
    }))
}

/// Mounts read-only and checks.
async fn check(inst: &Instance) -> Result<ziob_zonefs::FsckReport, FsCmdError> {
    let fs = inst.mount().await?;
    Ok(fs.fsck().await?)
}
