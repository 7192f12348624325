//! `fsck`: checks the mounted state against itself, the device's zones and the journal on the
//! device, and says what it found ([`FsckReport`]).

use std::collections::BTreeMap;

use ziob::{Client, ZoneInfo, ZoneState};

use crate::error::Result;
use crate::journal::{read_zone, Journal, ZoneRead};
use crate::layout::Layout;
use crate::records::Extent;
use crate::tree::Tree;
use crate::zones::{ZoneTable, ZoneUse};

/// One data zone as `fsck` saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneCheck {
    /// The zone index.
    pub zone: u32,
    /// What the file system uses it for.
    pub usage: ZoneUse,
    /// The zone's state on the device.
    pub state: ZoneState,
    /// The device's write pointer (bytes from the zone start).
    pub write_pointer: u64,
    /// Live bytes the zone table tracks.
    pub tracked_live: u64,
    /// Live bytes recomputed from the files' extents (those inside the zone's written bytes).
    pub live: u64,
}

/// Something wrong that `fsck` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsckProblem {
    /// An extent outside the data zones or past a zone's capacity.
    ExtentOutOfBounds {
        /// The file.
        path: String,
        /// The extent.
        extent: Extent,
    },
    /// An extent that ends past its zone's write pointer (its bytes were never written, or
    /// the zone was reset under it).
    ExtentBeyondWritePointer {
        /// The file.
        path: String,
        /// The extent.
        extent: Extent,
        /// The zone's write pointer.
        write_pointer: u64,
    },
    /// Two extents share bytes of a zone.
    OverlappingExtents {
        /// The zone.
        zone: u32,
        /// One file and its extent.
        first: (String, Extent),
        /// The other file and its extent.
        second: (String, Extent),
    },
    /// The zone table's live bytes for a zone differ from the files' extents in it.
    LiveBytesMismatch {
        /// The zone.
        zone: u32,
        /// What the table says.
        tracked: u64,
        /// What the extents add up to.
        recomputed: u64,
    },
    /// The table says the zone is free but the device has data in it.
    FreeZoneNotEmpty {
        /// The zone.
        zone: u32,
        /// Its state on the device.
        state: ZoneState,
    },
    /// A written data zone that no file uses (reported on read-write mounts only: a
    /// read-write mount resets such zones, a read-only one finds them after a crash, holding
    /// data that was never synced). On a mount with deletes in flight, a zone whose reset is
    /// about to happen shows here too, and so does one whose emptying call was dropped before
    /// its reset (until the next garbage collection takes it).
    UnreferencedZone {
        /// The zone.
        zone: u32,
        /// Its write pointer.
        write_pointer: u64,
    },
    /// The journal on the device cannot be read back, or does not describe the mounted
    /// state.
    Journal {
        /// What is wrong.
        reason: String,
    },
}

/// What [`ZoneFs::fsck`](crate::ZoneFs::fsck) found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsckReport {
    /// Files.
    pub files: usize,
    /// Extents over all files (synced or not).
    pub extents: usize,
    /// Bytes in files.
    pub live_bytes: u64,
    /// The current journal zone.
    pub journal_zone: u32,
    /// Its generation (superblock).
    pub generation: u64,
    /// Delta records replayed from it after its snapshot.
    pub deltas_replayed: usize,
    /// Why replay of the journal zone stopped before its end, if it did (a torn tail after a
    /// crash is expected on a read-only mount; a read-write mount rolls past it).
    pub journal_cut: Option<String>,
    /// Files the mount cut to the data on the device (a crash between a sync's journal write
    /// and its cache flush: [`MountReport::files_cut`](crate::MountReport::files_cut)). Not
    /// a problem: what a crash may leave, repaired in memory by every mount (and for good by
    /// a read-write one, whose journal roll records it).
    pub files_cut: Vec<crate::FileCut>,
    /// Every data zone.
    pub zones: Vec<ZoneCheck>,
    /// What is wrong; empty when the file system is consistent.
    pub problems: Vec<FsckProblem>,
}

impl FsckReport {
    /// True when no problem was found.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks `tree` and `zones` against the device and the journal zone `journal.current`.
/// `read_only`: unreferenced written zones are expected (a read-write mount resets them), so
/// they are reported only on a read-write mount.
pub async fn check(
    client: &Client,
    layout: &Layout,
    tree: &Tree,
    zones: &ZoneTable,
    journal: &Journal,
    read_only: bool,
    files_cut: &[crate::FileCut],
) -> Result<FsckReport> {
    let g = layout.geometry;
    let report = client.report(0, g.zone_count).await?;
    let mut problems = Vec::new();
    let first = journal.zones;
    let (files, extents, live_bytes, live) =
        check_extents(tree, &report, first, layout.capacity(), &mut problems);
    let mut checks = Vec::new();
    for (z, dz) in zones.iter() {
        let info = &report[z as usize];
        let recomputed = live[z as usize];
        if recomputed != dz.live {
            problems.push(FsckProblem::LiveBytesMismatch {
                zone: z,
                tracked: dz.live,
                recomputed,
            });
        }
        if dz.usage == ZoneUse::Free && info.state != ZoneState::Empty {
            problems.push(FsckProblem::FreeZoneNotEmpty {
                zone: z,
                state: info.state,
            });
        }
        if !read_only
            && dz.usage == ZoneUse::Closed
            && recomputed == 0
            && info.state != ZoneState::Empty
        {
            problems.push(FsckProblem::UnreferencedZone {
                zone: z,
                write_pointer: info.write_pointer_bytes,
            });
        }
        checks.push(ZoneCheck {
            zone: z,
            usage: dz.usage,
            state: info.state,
            write_pointer: info.write_pointer_bytes,
            tracked_live: dz.live,
            live: recomputed,
        });
    }
    let (generation, deltas_replayed, journal_cut) =
        match read_zone(client, layout, &report[journal.current as usize]).await? {
            ZoneRead::Valid(mut c) => {
                // As the mount did: files of the last batch cut to the data on the device.
                crate::cut::cut_to_device(
                    &mut c.tree,
                    &c.unconfirmed,
                    &report,
                    first,
                    layout.capacity(),
                );
                if c.tree.snapshot() != tree.snapshot() {
                    problems.push(FsckProblem::Journal {
                        reason: format!(
                            "journal zone {} does not describe the mounted files",
                            journal.current
                        ),
                    });
                }
                if !read_only && c.superblock.generation != journal.generation {
                    problems.push(FsckProblem::Journal {
                        reason: format!(
                            "journal zone {} has generation {}, the mount expects {}",
                            journal.current, c.superblock.generation, journal.generation
                        ),
                    });
                }
                (c.superblock.generation, c.deltas, c.cut)
            }
            other => {
                problems.push(FsckProblem::Journal {
                    reason: format!(
                        "journal zone {} cannot be read back: {other:?}",
                        journal.current
                    ),
                });
                (0, 0, None)
            }
        };
    Ok(FsckReport {
        files,
        extents,
        live_bytes,
        journal_zone: journal.current,
        generation,
        deltas_replayed,
        journal_cut,
        files_cut: files_cut.to_vec(),
        zones: checks,
        problems,
    })
}

/// Checks every extent's bounds and overlaps; returns (files, extents, bytes in files, live
/// bytes per zone of the extents inside their zone's written bytes).
fn check_extents(
    tree: &Tree,
    report: &[ZoneInfo],
    first: u32,
    capacity: u64,
    problems: &mut Vec<FsckProblem>,
) -> (usize, usize, u64, Vec<u64>) {
    let mut live = vec![0u64; report.len()];
    let mut by_zone: BTreeMap<u32, Vec<(Extent, &str)>> = BTreeMap::new();
    let (mut files, mut extents, mut bytes) = (0, 0, 0u64);
    let mut nodes: Vec<_> = tree.nodes().collect();
    nodes.sort_by_key(|(id, _)| **id);
    for (_, node) in nodes {
        files += 1;
        for e in &node.extents {
            extents += 1;
            bytes += e.len;
            let end = e.offset.checked_add(e.len);
            if e.zone < first
                || e.zone as usize >= report.len()
                || end.is_none_or(|end| end > capacity)
            {
                problems.push(FsckProblem::ExtentOutOfBounds {
                    path: node.path.clone(),
                    extent: *e,
                });
                continue;
            }
            let wp = report[e.zone as usize].write_pointer_bytes;
            if end.is_some_and(|end| end > wp) {
                problems.push(FsckProblem::ExtentBeyondWritePointer {
                    path: node.path.clone(),
                    extent: *e,
                    write_pointer: wp,
                });
            } else {
                live[e.zone as usize] += e.len;
            }
            by_zone.entry(e.zone).or_default().push((*e, &node.path));
        }
    }
    for (zone, mut list) in by_zone {
        list.sort_by_key(|(e, _)| e.offset);
        for pair in list.windows(2) {
            let ((a, pa), (b, pb)) = (&pair[0], &pair[1]);
            if a.offset + a.len > b.offset {
                problems.push(FsckProblem::OverlappingExtents {
                    zone,
                    first: (pa.to_string(), *a),
                    second: (pb.to_string(), *b),
                });
            }
        }
    }
    (files, extents, bytes, live)
}
