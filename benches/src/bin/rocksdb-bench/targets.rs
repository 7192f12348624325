//! The storage targets db_bench runs on, what each needs, how each is made fresh before a run
//! and how its space use is read afterwards.

use std::path::{Path, PathBuf};
use std::process::Command;
use ziob_benches::zenfs_peer::{self, dev_name};

/// The options every plugin target's URI ends with: each db_bench process of the sequence
/// mounts the device anew, and `prefault=auto` faults the plugin's buffers in before
/// RocksDB opens the database instead of inside the first timed benchmark
/// (docs/ROCKSDB.md "Memory at mount", docs/ROCKSDB-BENCH.md section 3g).
pub const PLUGIN_OPTIONS: &str = "prefault=auto";

/// A place db_bench stores its database.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum TargetId {
    /// RocksDB's default file system on a directory of `--work-dir` (host).
    Local,
    /// The ZIOB plugin on an emulated zoned device file in `--work-dir`, buffer on (host).
    ZiobEmu,
    /// The same with `?buffer=off`: every write goes to the device file (host).
    ZiobEmuNobuf,
    /// The plugin on an emu device file read and written through the host page cache
    /// (`emu:…,direct=0`), buffer on: the equal-memory pairing with `local`, which reads
    /// through the page cache too (host).
    ZiobEmuPagecache,
    /// RocksDB on ext4 on the guest's conventional NVMe namespace (guest reference).
    Ext4,
    /// ZenFS on the guest's ZNS namespace (guest reference).
    Zenfs,
    /// The ZIOB plugin on the ZNS namespace through NVMe passthrough (`nvme:/dev/ngXnY`).
    ZiobNvme,
    /// The ZIOB plugin on the ZNS namespace's zoned block device (`zbd:/dev/nvmeXnY`).
    ZiobZbd,
}

impl TargetId {
    /// Every target, host ones first.
    pub const ALL: [TargetId; 8] = [
        TargetId::Local,
        TargetId::ZiobEmu,
        TargetId::ZiobEmuNobuf,
        TargetId::ZiobEmuPagecache,
        TargetId::Ext4,
        TargetId::Zenfs,
        TargetId::ZiobNvme,
        TargetId::ZiobZbd,
    ];

    /// The name used on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            TargetId::Local => "local",
            TargetId::ZiobEmu => "ziob-emu",
            TargetId::ZiobEmuNobuf => "ziob-emu-nobuf",
            TargetId::ZiobEmuPagecache => "ziob-emu-pagecache",
            TargetId::Ext4 => "ext4",
            TargetId::Zenfs => "zenfs",
            TargetId::ZiobNvme => "ziob-nvme",
            TargetId::ZiobZbd => "ziob-zbd",
        }
    }

    /// Whether it runs only in the QEMU guest (needs its NVMe namespaces).
    pub fn guest_only(self) -> bool {
        matches!(
            self,
            TargetId::Ext4 | TargetId::Zenfs | TargetId::ZiobNvme | TargetId::ZiobZbd
        )
    }

    /// Whether the others are compared against it (RocksDB's default file system, ZenFS).
    pub fn is_reference(self) -> bool {
        matches!(self, TargetId::Local | TargetId::Ext4 | TargetId::Zenfs)
    }
}

/// What the targets need, found on this machine.
#[derive(Debug, Clone)]
pub struct Machine {
    /// Running in the QEMU guest of `cargo xtask vm-run` (`ZIOB_GUEST=1`).
    pub in_guest: bool,
    /// `libziob_rocksdb.so`, if built.
    pub plugin: Option<PathBuf>,
    /// ZenFS install prefix (`cargo xtask zenfs-build`).
    pub zenfs_prefix: PathBuf,
    /// `ziob` CLI (creates the emu device file).
    pub ziob_cli: Option<PathBuf>,
    /// Host directory for `local` and the emu files.
    pub work_dir: PathBuf,
    /// Guest devices from the environment vm-run sets.
    pub zns_block: Option<String>,
    /// The ZNS namespace's NVMe generic char device.
    pub zns_char: Option<String>,
    /// The conventional namespace's block device.
    pub conv_block: Option<String>,
}

/// Geometry of the emu device files (like the guest's ZNS namespace in docs/ROCKSDB-BENCH.md).
pub const EMU_ZONES: u32 = 256;
/// Zone size of the emu files.
pub const EMU_ZONE_SIZE: &str = "16M";
/// Zone capacity of the emu files.
pub const EMU_ZONE_CAPACITY: &str = "12M";
/// Open and active zone limits of the emu files.
pub const EMU_MAX_OPEN_ACTIVE: u32 = 14;

/// How a target's space use is read after the write benchmarks.
#[derive(Debug, Clone)]
pub enum SpaceProbe {
    /// Allocated bytes of every file under a directory.
    Dir(PathBuf),
    /// `zenfs df --zbd=<dev>`.
    ZenfsDf {
        /// The `zenfs` utility.
        bin: PathBuf,
        /// Device name (`nvme0n1`).
        dev: String,
    },
    /// `ziob fs df <spec> --json` (the ZIOB CLI's zone file system `df`, like `zenfs df`).
    ZiobDf {
        /// The `ziob` CLI.
        cli: PathBuf,
        /// Device spec (`emu:/var/tmp/x.zns`).
        spec: String,
    },
    /// No tool for this target.
    Unavailable(&'static str),
}

/// A target ready to be prepared and run.
#[derive(Debug, Clone)]
pub struct Ready {
    /// Which target.
    pub id: TargetId,
    /// `--fs_uri`, for plugin targets.
    pub fs_uri: Option<String>,
    /// `--db`.
    pub db: String,
    /// Shared object for `LD_PRELOAD`.
    pub preload: Option<PathBuf>,
    /// Commands making the target fresh before each run (program + args).
    pub prepare: Vec<Vec<String>>,
    /// Commands run after each run.
    pub cleanup: Vec<Vec<String>>,
    /// Where its space use is read.
    pub space: SpaceProbe,
    /// What a synced write means on it (for the report).
    pub durability: &'static str,
}

fn cmd(words: &[&str]) -> Vec<String> {
    words.iter().map(|s| s.to_string()).collect()
}

/// Resolves a target on `m`: the target, or why it is skipped.
pub fn resolve(id: TargetId, m: &Machine) -> Result<Ready, String> {
    if id.guest_only() && !m.in_guest {
        return Err("guest only (needs the QEMU guest's NVMe namespaces; add --guest)".into());
    }
    if !id.guest_only() && m.in_guest {
        return Err("host only (runs in the host part of the command)".into());
    }
    let plugin = || {
        m.plugin.clone().ok_or_else(|| {
            "no libziob_rocksdb.so (cargo build -p ziob-rocksdb --release, or --plugin PATH)"
                .to_string()
        })
    };
    let zns = || {
        m.zns_block
            .clone()
            .ok_or_else(|| "no ZNS block device (ZIOB_ZNS_BLOCK unset)".to_string())
    };
    let work = m.work_dir.display().to_string();
    let pid = std::process::id();
    match id {
        TargetId::Local => {
            let dir = format!("{work}/rocksdb-bench-{pid}-local");
            Ok(Ready {
                id,
                fs_uri: None,
                db: dir.clone(),
                preload: None,
                prepare: vec![cmd(&["rm", "-rf", &dir])],
                cleanup: vec![cmd(&["rm", "-rf", &dir])],
                space: SpaceProbe::Dir(dir.into()),
                durability: "RocksDB default: a write is in the OS page cache when it returns; \
                             fsync on WAL sync / SST close",
            })
        }
        TargetId::ZiobEmu | TargetId::ZiobEmuNobuf | TargetId::ZiobEmuPagecache => {
            let plugin = plugin()?;
            let cli = m.ziob_cli.clone().ok_or_else(|| {
                "no `ziob` CLI to create the emu file (cargo build -p ziob-cli, or --ziob-cli)"
                    .to_string()
            })?;
            let file = format!("{work}/rocksdb-bench-{pid}-{}.zns", id.name());
            let spec = format!("emu:{file}");
            let uri = match id {
                TargetId::ZiobEmuNobuf => format!("ziob://{spec}?buffer=off&{PLUGIN_OPTIONS}"),
                TargetId::ZiobEmuPagecache => format!("ziob://{spec},direct=0?{PLUGIN_OPTIONS}"),
                _ => format!("ziob://{spec}?{PLUGIN_OPTIONS}"),
            };
            let cli = cli.display().to_string();
            Ok(Ready {
                id,
                fs_uri: Some(uri),
                db: "/rocksdb-bench".into(),
                preload: Some(plugin),
                prepare: vec![
                    cmd(&["rm", "-f", &file]),
                    cmd(&[
                        &cli,
                        "create",
                        &spec,
                        "--zones",
                        &EMU_ZONES.to_string(),
                        "--zone-size",
                        EMU_ZONE_SIZE,
                        "--zone-capacity",
                        EMU_ZONE_CAPACITY,
                        "--max-open",
                        &EMU_MAX_OPEN_ACTIVE.to_string(),
                        "--max-active",
                        &EMU_MAX_OPEN_ACTIVE.to_string(),
                    ]),
                ],
                cleanup: vec![cmd(&["rm", "-f", &file])],
                space: SpaceProbe::ZiobDf {
                    cli: cli.clone().into(),
                    spec: spec.clone(),
                },
                durability: if id == TargetId::ZiobEmuNobuf {
                    "pass-through: every write goes to the device file before it returns"
                } else {
                    "ZIOB buffer: a write is in ZIOB's memory when it returns; Sync/Fsync return \
                     after the flush to the device file (and fdatasync of it)"
                },
            })
        }
        TargetId::Ext4 => {
            let conv = m.conv_block.clone().ok_or_else(|| {
                "no conventional namespace (ZIOB_CONV_BLOCK unset; --conv-size 0?)".to_string()
            })?;
            let mnt = "/tmp/rocksdb-bench-ext4".to_string();
            Ok(Ready {
                id,
                fs_uri: None,
                db: format!("{mnt}/db"),
                preload: None,
                prepare: vec![
                    cmd(&["mkdir", "-p", &mnt]),
                    cmd(&["mkfs.ext4", "-q", "-F", &conv]),
                    cmd(&["mount", "-t", "ext4", &conv, &mnt]),
                ],
                cleanup: vec![cmd(&["umount", &mnt])],
                space: SpaceProbe::Dir(format!("{mnt}/db").into()),
                durability:
                    "ext4 (data=ordered) through the page cache; fsync on WAL sync / SST close",
            })
        }
        TargetId::Zenfs => {
            let lib = m.zenfs_prefix.join("lib/libzenfs.so");
            let bin = m.zenfs_prefix.join("bin/zenfs");
            if !lib.is_file() || !bin.is_file() {
                return Err(format!(
                    "no ZenFS in {} (cargo xtask zenfs-build, docs/ROCKSDB-BENCH.md)",
                    m.zenfs_prefix.display()
                ));
            }
            let dev = dev_name(&zns()?);
            Ok(Ready {
                id,
                fs_uri: Some(format!("zenfs://dev:{dev}")),
                db: "/rocksdb-bench".into(),
                preload: Some(lib),
                prepare: zenfs_peer::prepare(&bin, &dev, "/tmp/rocksdb-bench-zenfs-aux"),
                cleanup: zenfs_peer::restore(&dev),
                space: SpaceProbe::ZenfsDf { bin, dev },
                durability:
                    "ZenFS: direct I/O to zones; WAL buffered in ZenFS, written on Sync/Fsync; \
                     no device cache flush (a volatile write cache may lose synced data)",
            })
        }
        TargetId::ZiobNvme | TargetId::ZiobZbd => {
            let plugin = plugin()?;
            let block = zns()?;
            let spec = if id == TargetId::ZiobNvme {
                format!(
                    "nvme:{}",
                    m.zns_char
                        .clone()
                        .ok_or_else(|| "no ZNS char device (ZIOB_ZNS_CHAR unset)".to_string())?
                )
            } else {
                format!("zbd:{block}")
            };
            Ok(Ready {
                id,
                fs_uri: Some(format!("ziob://{spec}?{PLUGIN_OPTIONS}")),
                db: "/rocksdb-bench".into(),
                preload: Some(plugin),
                prepare: vec![cmd(&["blkzone", "reset", &block])],
                cleanup: vec![],
                space: match &m.ziob_cli {
                    Some(cli) => SpaceProbe::ZiobDf {
                        cli: cli.clone(),
                        spec: spec.clone(),
                    },
                    None => SpaceProbe::Unavailable("no `ziob` CLI for `ziob fs df`"),
                },
                durability: "ZIOB buffer: a write is in ZIOB's memory when it returns; Sync/Fsync \
                             return after the flush to the zones",
            })
        }
    }
}

/// Space used by a target after the write benchmarks.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Space {
    /// Bytes the target occupies on its device (ZenFS: used + reclaimable).
    pub used_bytes: Option<u64>,
    /// The tool's own words (e.g. `zenfs df` output), or why there is none.
    pub detail: String,
}

fn allocated_bytes(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let md = e.metadata()?;
        total += if md.is_dir() {
            allocated_bytes(&e.path())?
        } else {
            md.blocks() * 512
        };
    }
    Ok(total)
}

/// `Used` + `Reclaimable` of `zenfs df` output, in bytes (it prints MiB).
pub fn parse_zenfs_df(text: &str) -> Option<u64> {
    let get = |key: &str| {
        text.lines().find_map(|l| {
            let v = l.strip_prefix(key)?.trim().strip_suffix("MB")?.trim();
            v.parse::<u64>().ok()
        })
    };
    Some((get("Used:")? + get("Reclaimable:")?) << 20)
}

/// `used_bytes + reclaimable_bytes`, `space_amplification` and
/// `space_amplification_full_zones` (counted as `zenfs df` counts it; `None` from a CLI
/// without it) of `ziob fs df --json`.
pub fn parse_ziob_df(json: &str) -> Option<(u64, f64, Option<f64>)> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    Some((
        v["used_bytes"].as_u64()? + v["reclaimable_bytes"].as_u64()?,
        v["space_amplification"].as_f64()?,
        v["space_amplification_full_zones"].as_f64(),
    ))
}

/// Reads the space use of a target.
pub fn measure_space(probe: &SpaceProbe) -> Space {
    match probe {
        SpaceProbe::Dir(d) => match allocated_bytes(d) {
            Ok(b) => Space {
                used_bytes: Some(b),
                detail: format!("allocated blocks under {}", d.display()),
            },
            Err(e) => Space {
                used_bytes: None,
                detail: format!("{}: {e}", d.display()),
            },
        },
        SpaceProbe::ZenfsDf { bin, dev } => match Command::new(bin)
            .arg("df")
            .arg(format!("--zbd={dev}"))
            .output()
        {
            Ok(o) => {
                let text = String::from_utf8_lossy(&o.stdout).to_string()
                    + &String::from_utf8_lossy(&o.stderr);
                Space {
                    used_bytes: parse_zenfs_df(&text),
                    detail: text.trim().replace('\n', "; "),
                }
            }
            Err(e) => Space {
                used_bytes: None,
                detail: format!("{}: {e}", bin.display()),
            },
        },
        SpaceProbe::ZiobDf { cli, spec } => {
            match Command::new(cli)
                .args(["fs", "df", spec, "--json"])
                .output()
            {
                Ok(o) => {
                    let text = String::from_utf8_lossy(&o.stdout).to_string();
                    match parse_ziob_df(&text) {
                        Some((used, amp, amp_full)) => Space {
                            used_bytes: Some(used),
                            detail: format!(
                                "ziob fs df: used+reclaimable {used} B, space amplification {amp:.2}{}",
                                amp_full.map_or(String::new(), |a| format!(
                                    " ({a:.2} counting full zones only, as zenfs df does)"
                                ))
                            ),
                        },
                        None => Space {
                            used_bytes: None,
                            detail: format!(
                                "`{} fs df {spec} --json` gave no figures ({}): {}",
                                cli.display(),
                                o.status,
                                String::from_utf8_lossy(&o.stderr)
                                    .lines()
                                    .next()
                                    .unwrap_or_default()
                                    .trim()
                            ),
                        },
                    }
                }
                Err(e) => Space {
                    used_bytes: None,
                    detail: format!("{}: {e}", cli.display()),
                },
            }
        }
        SpaceProbe::Unavailable(why) => Space {
            used_bytes: None,
            detail: why.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(in_guest: bool) -> Machine {
        Machine {
            in_guest,
            plugin: None,
            zenfs_prefix: "/nonexistent-zenfs".into(),
            ziob_cli: None,
            work_dir: "/var/tmp".into(),
            zns_block: Some("/dev/nvme0n1".into()),
            zns_char: Some("/dev/ng0n1".into()),
            conv_block: Some("/dev/nvme0n2".into()),
        }
    }

    #[test]
    fn every_missing_piece_is_a_stated_skip() {
        let host = machine(false);
        assert!(resolve(TargetId::Local, &host).is_ok());
        for id in [
            TargetId::ZiobEmu,
            TargetId::ZiobEmuNobuf,
            TargetId::ZiobEmuPagecache,
        ] {
            let e = resolve(id, &host).unwrap_err();
            assert!(e.contains("libziob_rocksdb.so"), "{e}");
        }
        for id in [
            TargetId::Zenfs,
            TargetId::Ext4,
            TargetId::ZiobNvme,
            TargetId::ZiobZbd,
        ] {
            assert!(resolve(id, &host).unwrap_err().contains("guest only"));
        }
        let guest = machine(true);
        assert!(resolve(TargetId::Local, &guest)
            .unwrap_err()
            .contains("host only"));
        assert!(resolve(TargetId::Zenfs, &guest)
            .unwrap_err()
            .contains("zenfs-build"));
        let ext4 = resolve(TargetId::Ext4, &guest).unwrap();
        assert!(ext4
            .prepare
            .iter()
            .any(|c| c[0] == "mkfs.ext4" && c.contains(&"/dev/nvme0n2".to_string())));
    }

    #[test]
    fn plugin_targets_name_the_uri_scheme_and_buffer_mode() {
        let mut m = machine(false);
        m.plugin = Some("/x/libziob_rocksdb.so".into());
        m.ziob_cli = Some("/x/ziob".into());
        let on = resolve(TargetId::ZiobEmu, &m).unwrap();
        let off = resolve(TargetId::ZiobEmuNobuf, &m).unwrap();
        assert!(on
            .fs_uri
            .as_deref()
            .unwrap()
            .starts_with("ziob://emu:/var/tmp/"));
        assert!(!on.fs_uri.as_deref().unwrap().contains("buffer=off"));
        assert!(off
            .fs_uri
            .as_deref()
            .unwrap()
            .ends_with("?buffer=off&prefault=auto"));
        let cached = resolve(TargetId::ZiobEmuPagecache, &m).unwrap();
        let uri = cached.fs_uri.as_deref().unwrap();
        assert!(uri.starts_with("ziob://emu:/var/tmp/"), "{uri}");
        assert!(uri.ends_with(".zns,direct=0?prefault=auto"), "{uri}");
        assert_ne!(
            cached.cleanup, on.cleanup,
            "each target has its own emu file"
        );
        m.in_guest = true;
        assert_eq!(
            resolve(TargetId::ZiobNvme, &m).unwrap().fs_uri.unwrap(),
            "ziob://nvme:/dev/ng0n1?prefault=auto"
        );
        assert_eq!(
            resolve(TargetId::ZiobZbd, &m).unwrap().fs_uri.unwrap(),
            "ziob://zbd:/dev/nvme0n1?prefault=auto"
        );
    }

    #[test]
    fn zenfs_df_used_plus_reclaimable() {
        let t = "Free: 1469 MB\nUsed: 18 MB\nReclaimable: 3 MB\nSpace amplification: 16%\n";
        assert_eq!(parse_zenfs_df(t), Some(21 << 20));
        assert_eq!(parse_zenfs_df("Free: 1 MB"), None);
    }

    #[test]
    fn ziob_df_json_used_plus_reclaimable() {
        let j = r#"{"total_bytes": 100, "free_bytes": 50, "used_bytes": 40, "reclaimable_bytes": 10, "space_amplification": 1.25, "data_zones": 8, "free_zones": 4}"#;
        assert_eq!(parse_ziob_df(j), Some((50, 1.25, None)));
        let j = r#"{"used_bytes": 40, "reclaimable_bytes": 10, "reclaimable_in_full_zones_bytes": 4, "space_amplification": 1.25, "space_amplification_full_zones": 1.1}"#;
        assert_eq!(parse_ziob_df(j), Some((50, 1.25, Some(1.1))));
        assert_eq!(parse_ziob_df("error: no fs subcommand"), None);
    }

    #[test]
    fn dir_space_counts_allocated_blocks_recursively() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/a"), vec![1u8; 100_000]).unwrap();
        let s = measure_space(&SpaceProbe::Dir(d.path().into()));
        assert!(s.used_bytes.unwrap() >= 100_000, "{s:?}");
    }
}
