//! `mkfs` and `mount`: format the reserved zones, or read the journal back and rebuild the
//! zone table from the device's report. The file system spans zones `0..zone_count` of the
//! device (its superblock says how many); the zones past it are never read, reset or written.

use ziob::{Client, ZoneInfo, ZoneState};

use crate::cut::{cut_to_device, FileCut};
use crate::error::{FsError, Result};
use crate::gc;
use crate::journal::{read_zone, Journal, ZoneRead, JOURNAL_ZONES_RANGE};
use crate::layout::Layout;
use crate::lifetime::slot_of;
use crate::tree::Tree;
use crate::zones::{DataZone, ZoneTable, ZoneUse};

/// Options of [`mkfs`](crate::ZoneFs::mkfs).
#[derive(Debug, Clone, Copy)]
pub struct MkfsOptions {
    /// Zones reserved for the metadata journal (zones `0..journal_zones`), 2..=16. Default 2.
    pub journal_zones: u32,
    /// Format even if the file system's zones hold a file system or other data (they are
    /// all erased; zones past `zone_count` are not looked at).
    pub force: bool,
    /// The file system occupies zones `0..zone_count` of the device and never touches the
    /// rest (another user, e.g. a `ziob::zonelog::LogSpace`, may own it). `None` (the
    /// default): the whole device. At least `journal_zones + 1`, at most the device's zones.
    pub zone_count: Option<u32>,
    /// Active zones to leave to others on the same device (e.g. one per zone log of a
    /// `LogSpace` on the zones past `zone_count`): every mount keeps at most the active-zone
    /// limit the instance presents (the device's with the buffer off; none with it on)
    /// minus this many zones active. Recorded in the superblock; at most 65535. Default 0.
    pub reserved_active_zones: u32,
}

impl Default for MkfsOptions {
    fn default() -> Self {
        MkfsOptions {
            journal_zones: 2,
            force: false,
            zone_count: None,
            reserved_active_zones: 0,
        }
    }
}

/// Formats zones `0..zone_count` of the device: each reset, then a superblock (generation 1)
/// and an empty snapshot in zone 0.
pub async fn mkfs(client: &Client, opts: MkfsOptions) -> Result<()> {
    let device = Layout::of(client).await?;
    let zone_count = opts.zone_count.unwrap_or(device.device_zones);
    if u16::try_from(opts.reserved_active_zones).is_err() {
        return Err(FsError::Config(format!(
            "reserved_active_zones {} is above 65535",
            opts.reserved_active_zones
        )));
    }
    let layout = device.restrict(zone_count, opts.reserved_active_zones)?;
    let g = layout.geometry;
    if !JOURNAL_ZONES_RANGE.contains(&opts.journal_zones) || opts.journal_zones + 1 > g.zone_count {
        return Err(FsError::Config(format!(
            "journal_zones {} must be in {JOURNAL_ZONES_RANGE:?} and leave a data zone (the file system has {} zones)",
            opts.journal_zones, g.zone_count
        )));
    }
    if !opts.force {
        let report = client.report(0, g.zone_count).await?;
        if let Some(z) = report.iter().find(|z| z.state != ZoneState::Empty) {
            let mut found = format!("data in zone {}", z.index);
            for j in 0..2.min(g.zone_count) {
                if matches!(
                    read_zone(client, &layout, &report[j as usize]).await?,
                    ZoneRead::Valid(_) | ZoneRead::NoSnapshot(..) | ZoneRead::Damaged(..)
                ) {
                    found = "a zone file system".to_string();
                }
            }
            return Err(FsError::DeviceInUse { found });
        }
    }
    for z in 0..g.zone_count {
        client.reset(z).await?;
    }
    Journal::write_fresh(client, &layout, opts.journal_zones, 0, 1, &Tree::default()).await?;
    Ok(())
}

/// Everything a mount rebuilds.
pub struct Mounted {
    /// How the layer writes to this instance.
    pub layout: Layout,
    /// The namespace.
    pub tree: Tree,
    /// The data zones.
    pub zones: ZoneTable,
    /// The journal, rolled to a fresh zone.
    pub journal: Journal,
    /// What mount found and did, for the caller to show.
    pub report: MountReport,
}

/// What a mount found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MountReport {
    /// The journal zone read (the newest valid one).
    pub journal_zone: u32,
    /// Its generation.
    pub generation: u64,
    /// Deltas replayed after its snapshot.
    pub deltas: usize,
    /// Why replay stopped before the zone's end (a torn or corrupt record), if it did.
    pub cut: Option<String>,
    /// Data zones reset because no file holds data in them (unsynced data lost in a crash).
    pub zones_reset: Vec<u32>,
    /// Files cut where their data on the device ends: a crash came between a sync's
    /// journal write and the device flush that makes its data durable (the sync had not
    /// returned), and the device kept the journal record but not all of the data.
    pub files_cut: Vec<FileCut>,
}

/// Reads the journal back, cuts files whose data the device lost ([`cut_to_device`]),
/// checks every extent against the write pointers (writing nothing if one is outside),
/// rolls the journal to a fresh zone, then rebuilds the zone table (resets, finishes). The
/// roll comes before any zone is touched: new deltas never follow a torn record, and the
/// cut files are journaled as cut before a finish moves a write pointer past their lost
/// data (a crash there would otherwise bring the uncut extents back over zeros) or anything
/// is appended where it was.
pub async fn mount(client: &Client) -> Result<Mounted> {
    let mut found = read_journal(client).await?;
    cut_files(&mut found);
    let first = found.journal.zones;
    for (_, node) in found.tree.nodes() {
        for e in &node.extents {
            check_written(e, &node.path, &found.zone_report, first, &found.layout)?;
        }
    }
    let mut journal = found.journal;
    journal.roll(client, &found.layout, &found.tree).await?;
    let (zones, zones_reset) = data_zones(
        client,
        &found.layout,
        &found.zone_report,
        first,
        &found.tree,
    )
    .await?;
    Ok(Mounted {
        layout: found.layout,
        tree: found.tree,
        zones,
        journal,
        report: MountReport {
            zones_reset,
            ..found.report
        },
    })
}

/// Reads the journal back and builds the zone table from the device's report, writing
/// nothing: no zone is reset or finished and the journal does not roll. Extents outside the
/// written data zones do not fail it (`fsck` reports them); they count as live in no zone.
pub async fn mount_read_only(client: &Client) -> Result<Mounted> {
    let mut found = read_journal(client).await?;
    cut_files(&mut found);
    let zones = read_only_zones(
        &found.layout,
        &found.zone_report,
        found.journal.zones,
        &found.tree,
    );
    Ok(Mounted {
        layout: found.layout,
        tree: found.tree,
        zones,
        journal: found.journal,
        report: found.report,
    })
}

/// What reading the journal found, before the data zones are looked at.
struct Found {
    layout: Layout,
    zone_report: Vec<ZoneInfo>,
    tree: Tree,
    /// The journal as found (current = the zone read, not rolled).
    journal: Journal,
    report: MountReport,
    /// The extents of the last batch's syncs
    /// ([`ZoneContents::unconfirmed`](crate::journal::ZoneContents)).
    unconfirmed: Vec<(u64, crate::records::Extent)>,
}

/// Reads every journal zone and replays the newest valid one.
async fn read_journal(client: &Client) -> Result<Found> {
    // The device's layout until the superblock says which zones are the file system's.
    let layout = Layout::of(client).await?;
    let g = layout.geometry;
    let mut report = client.report(0, g.zone_count).await?;
    let mut reads = Vec::new();
    for z in 0..2.min(g.zone_count) {
        reads.push(read_zone(client, &layout, &report[z as usize]).await?);
    }
    let journal_zones = reads.iter().find_map(|r| match r {
        ZoneRead::Valid(c) => Some(c.superblock.journal_zones),
        ZoneRead::NoSnapshot(sb, _) | ZoneRead::Damaged(sb, _) => Some(sb.journal_zones),
        _ => None,
    });
    let Some(journal_zones) = journal_zones else {
        return Err(no_superblock(&reads));
    };
    if journal_zones >= g.zone_count {
        return Err(FsError::GeometryMismatch {
            reason: format!(
                "{journal_zones} journal zones on a device of {} zones",
                g.zone_count
            ),
        });
    }
    for z in 2..journal_zones {
        reads.push(read_zone(client, &layout, &report[z as usize]).await?);
    }
    let mut max_generation = 0;
    // The file system's extent, as the first superblock found says (every other must agree).
    let mut extent: Option<(u32, u16)> = None;
    let mut damaged: Option<(u64, String)> = None;
    let mut best: Option<(u32, Box<crate::journal::ZoneContents>)> = None;
    for (z, read) in reads.into_iter().enumerate() {
        let sb = match &read {
            ZoneRead::Valid(c) => c.superblock,
            ZoneRead::NoSnapshot(sb, why) => {
                tracing::warn!(
                    zone = z,
                    why,
                    "journal zone without a valid snapshot (an interrupted roll); ignored"
                );
                *sb
            }
            ZoneRead::Damaged(sb, why) => {
                if damaged.as_ref().is_none_or(|(g, _)| *g < sb.generation) {
                    damaged = Some((sb.generation, format!("journal zone {z}: {why}")));
                }
                *sb
            }
            _ => continue,
        };
        sb.check_geometry(&g)
            .map_err(|reason| FsError::GeometryMismatch { reason })?;
        if sb.journal_zones != journal_zones {
            return Err(FsError::Corrupt {
                reason: format!(
                    "journal zone {z} says {} journal zones, another says {journal_zones}",
                    sb.journal_zones
                ),
            });
        }
        let this = (sb.zone_count, sb.reserved_active_zones);
        if extent.is_some_and(|e| e != this) {
            return Err(FsError::Corrupt {
                reason: format!(
                    "journal zone {z} says (zone count, reserved active zones) = {this:?}, another says {:?}",
                    extent.unwrap_or_default()
                ),
            });
        }
        extent = Some(this);
        max_generation = max_generation.max(sb.generation);
        if let ZoneRead::Valid(c) = read {
            if best
                .as_ref()
                .is_none_or(|(_, b)| b.superblock.generation < sb.generation)
            {
                best = Some((z as u32, c));
            }
        }
    }
    // A damaged snapshot newer than every valid zone: falling back would silently lose the
    // metadata changes since; refuse.
    if let Some((g, why)) = damaged {
        if best
            .as_ref()
            .is_none_or(|(_, b)| b.superblock.generation < g)
        {
            return Err(FsError::Corrupt {
                reason: format!("the newest journal zone's snapshot is corrupt ({why})"),
            });
        }
    }
    let Some((journal_zone, contents)) = best else {
        return Err(FsError::Corrupt {
            reason: "no journal zone has a valid superblock and snapshot".into(),
        });
    };
    if let Some(cut) = &contents.cut {
        tracing::warn!(
            zone = journal_zone,
            cut,
            "journal replay stopped at a torn or corrupt record; later deltas dropped"
        );
    }
    let written = report[journal_zone as usize].write_pointer_bytes;
    // Only zones `0..zone_count` are the file system's: the rest is left alone.
    let (zone_count, reserved) = (
        contents.superblock.zone_count,
        contents.superblock.reserved_active_zones,
    );
    let layout = layout.restrict(zone_count, reserved as u32)?;
    report.truncate(zone_count as usize);
    let journal = Journal {
        zones: journal_zones,
        current: journal_zone,
        written,
        generation: max_generation,
        appended: 0,
    };
    Ok(Found {
        layout,
        tree: contents.tree,
        journal,
        report: MountReport {
            journal_zone,
            generation: contents.superblock.generation,
            deltas: contents.deltas,
            cut: contents.cut,
            zones_reset: Vec::new(),
            files_cut: Vec::new(),
        },
        zone_report: report,
        unconfirmed: contents.unconfirmed,
    })
}

/// Cuts the files whose last batch's data the crash lost ([`crate::cut::cut_to_device`]),
/// with a warning per file, into the report.
fn cut_files(found: &mut Found) {
    let cuts = cut_to_device(
        &mut found.tree,
        &found.unconfirmed,
        &found.zone_report,
        found.journal.zones,
        found.layout.capacity(),
    );
    for c in &cuts {
        tracing::warn!(
            path = %c.path,
            journaled = c.journaled,
            kept = c.kept,
            "file cut to the data on the device (a crash before its sync returned)"
        );
    }
    found.report.files_cut = cuts;
}

/// `Corrupt` unless extent `e` of file `path` lies in a data zone (`first..`) below its
/// write pointer and the zone capacity.
fn check_written(
    e: &crate::records::Extent,
    path: &str,
    report: &[ZoneInfo],
    first: u32,
    layout: &Layout,
) -> Result<()> {
    let z = e.zone as usize;
    let ok = e.zone >= first
        && z < report.len()
        && e.offset
            .checked_add(e.len)
            .is_some_and(|end| end <= report[z].write_pointer_bytes && end <= layout.capacity());
    if ok {
        return Ok(());
    }
    Err(FsError::Corrupt {
        reason: format!("file {path} has an extent {e:?} outside the written data zones"),
    })
}

/// The typed error for reserved zones with no zonefs superblock.
fn no_superblock(reads: &[ZoneRead]) -> FsError {
    for r in reads {
        match r {
            ZoneRead::Invalid(why) => {
                return FsError::Corrupt {
                    reason: format!("unusable superblock: {why}"),
                }
            }
            ZoneRead::Foreign(why) => {
                return FsError::Foreign {
                    reason: why.clone(),
                }
            }
            _ => {}
        }
    }
    FsError::NotFormatted
}

/// The zone table of a read-only mount: the device's zones as they are (a written zone is
/// `Closed`, its write pointer its written bytes); extents outside the written data zones are
/// left out of the live counts.
fn read_only_zones(layout: &Layout, report: &[ZoneInfo], first: u32, tree: &Tree) -> ZoneTable {
    let mut live = vec![0u64; report.len()];
    for (_, node) in tree.nodes() {
        for e in &node.extents {
            let z = e.zone as usize;
            if e.zone >= first
                && z < report.len()
                && e.offset.checked_add(e.len).is_some_and(|end| {
                    end <= report[z].write_pointer_bytes && end <= layout.capacity()
                })
            {
                live[z] += e.len;
            }
        }
    }
    let table = report[first as usize..]
        .iter()
        .map(|info| {
            let z = info.index as usize;
            let usage = match info.state {
                ZoneState::Offline | ZoneState::ReadOnly => ZoneUse::Unusable,
                ZoneState::Empty => ZoneUse::Free,
                _ => ZoneUse::Closed,
            };
            DataZone {
                usage,
                written: info.write_pointer_bytes,
                live: live[z],
            }
        })
        .collect();
    ZoneTable::new(first, table, layout.all_slots())
}

/// Builds the data zone table: live bytes from the files' extents (checked against the zones'
/// write pointers); zones holding no live byte are reset; a zone left partly written whose
/// live bytes all belong to files of one class slot becomes that slot's open zone again
/// (appends go on at its write pointer, so a remount does not give up the rest of each
/// slot's zone: with a process per RocksDB benchmark, the finishing of those zones at every
/// mount made most of the space amplification; at most one per slot, the one with the most
/// room, so no more zones are active than while mounted); the other zones holding live bytes
/// are finished (closed for appends, and no longer active).
async fn data_zones(
    client: &Client,
    layout: &Layout,
    report: &[ZoneInfo],
    first: u32,
    tree: &Tree,
) -> Result<(ZoneTable, Vec<u32>)> {
    let mut live = vec![0u64; report.len()];
    // The class slot of each zone's live files: `Some(slot)` while they all share one,
    // `None` once two differ.
    let mut zone_slot: Vec<Option<Option<usize>>> = vec![None; report.len()];
    for (_, node) in tree.nodes() {
        let slot = slot_of(node.lifetime, layout.slots);
        for e in &node.extents {
            // In a written data zone: `mount` checked every extent before its roll.
            let z = e.zone as usize;
            live[z] += e.len;
            zone_slot[z] = match zone_slot[z] {
                None => Some(Some(slot)),
                Some(Some(s)) if s == slot => Some(Some(slot)),
                Some(_) => Some(None),
            };
        }
    }
    // Per slot, the partly written zone (one class's files only) with the most room; none
    // when free zones will be below GC's threshold, where GC must be able to take every
    // zone holding garbage (it takes closed zones only).
    let data = &report[first as usize..];
    let usable: Vec<&ZoneInfo> = data
        .iter()
        .filter(|i| !matches!(i.state, ZoneState::Offline | ZoneState::ReadOnly))
        .collect();
    // Free after this mount: empty, or reset below for holding no live byte.
    let free_after = usable
        .iter()
        .filter(|i| live[i.index as usize] == 0)
        .count();
    let room_for_gc = !gc::below_threshold(free_after as u64, usable.len() as u64);
    let mut adopt: Vec<Option<u32>> = vec![None; layout.slots];
    if room_for_gc {
        for info in data {
            let z = info.index as usize;
            // Active (open or closed: written, not full) and with room left.
            let partly = info.state.is_active() && info.write_pointer_bytes < layout.capacity();
            if let (true, true, Some(Some(slot))) = (partly, live[z] > 0, zone_slot[z]) {
                if adopt[slot].is_none_or(|a| {
                    report[a as usize].write_pointer_bytes > info.write_pointer_bytes
                }) {
                    adopt[slot] = Some(info.index);
                }
            }
        }
    }
    let mut table = Vec::new();
    let mut reset = Vec::new();
    for info in &report[first as usize..] {
        let z = info.index as usize;
        let adopted = adopt.iter().position(|a| *a == Some(info.index));
        let entry = match (info.state, adopted) {
            (ZoneState::Offline | ZoneState::ReadOnly, _) => DataZone {
                usage: ZoneUse::Unusable,
                written: info.write_pointer_bytes,
                live: live[z],
            },
            (ZoneState::Empty, _) => DataZone {
                usage: ZoneUse::Free,
                written: 0,
                live: 0,
            },
            _ if live[z] == 0 => {
                client.reset(info.index).await?;
                reset.push(info.index);
                DataZone {
                    usage: ZoneUse::Free,
                    written: 0,
                    live: 0,
                }
            }
            (_, Some(slot)) => DataZone {
                usage: ZoneUse::Open(slot),
                written: info.write_pointer_bytes,
                live: live[z],
            },
            (state, None) => {
                if state != ZoneState::Full {
                    client.finish(info.index).await?;
                }
                // Finished or Full: the whole capacity is spent.
                DataZone {
                    usage: ZoneUse::Closed,
                    written: layout.capacity(),
                    live: live[z],
                }
            }
        };
        table.push(entry);
    }
    Ok((ZoneTable::new(first, table, layout.all_slots()), reset))
}
