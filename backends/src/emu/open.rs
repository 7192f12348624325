//! Opening an emu file: the regular-file check, the lock, the header, the choice of the
//! zone-table slot and the check of the data its checks cover (the rule is in
//! `docs/format.md`, "Choosing the table").

use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::emu::format::{self, Layout, SlotDefect, TableEntry, CHECKED_TABLE_BYTES_MAX};
use crate::emu::lock::{self, DeviceClaim};
use crate::model::error::{DeviceError, Result};
use crate::model::geometry::Geometry;
use crate::model::state::ZoneTable;
use crate::model::zone::PersistedZone;

/// How an emu device file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OpenMode {
    /// Read and write; takes an exclusive lock on the file (one read-write opener at a time,
    /// and no read-only opener while it is open).
    #[default]
    ReadWrite,
    /// Reads and reports only (the file needs only read permission); takes a shared lock, so
    /// any number of read-only openers may share the file but no read-write opener. Writes,
    /// appends and zone actions are refused with [`DeviceError::ReadOnlyDevice`]; a flush
    /// succeeds (there is nothing to make durable).
    ReadOnly,
}

/// How an open recovered from a damaged zone-table slot (see [`EmuDevice::recovery`]).
///
/// [`EmuDevice::recovery`]: crate::emu::EmuDevice::recovery
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRecovery {
    /// The slot that was damaged (0 or 1).
    pub damaged_slot: u64,
    /// What is wrong with it.
    pub defect: String,
    /// The slot whose table the open took (the other one).
    pub used_slot: u64,
    /// The sequence number of that table, as read.
    pub used_sequence: u64,
    /// Whether the damaged slot was the newer one: a table write torn by a crash (its flush
    /// never completed, nothing acknowledged is lost), or a table whose data check failed —
    /// its data did not all land, so its flush never completed, or (which the open cannot
    /// tell apart) its data was damaged after that flush completed, and then that flush is
    /// lost. Otherwise it was the older slot and nothing is lost.
    pub torn_newest_write: bool,
    /// A read-write open fell back from a failed data check and wrote the table it took over
    /// the damaged slot, as the damaged slot's sequence without checks (see
    /// `docs/format.md`, "Choosing the table"); the device goes on from there.
    pub retired: bool,
}

impl std::fmt::Display for TableRecovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = if self.torn_newest_write {
            "the newest write, torn by a crash (its flush never completed; for a failed data \
             check, or its data damaged since that flush)"
        } else {
            "the older copy"
        };
        write!(
            f,
            "zone-table slot {} is damaged ({}), taken as {what}; using slot {} (sequence {})",
            self.damaged_slot, self.defect, self.used_slot, self.used_sequence
        )?;
        if self.retired {
            write!(f, ", written over slot {}", self.damaged_slot)?;
        }
        Ok(())
    }
}

/// What an open read from the file.
pub(crate) struct Loaded {
    pub(crate) geometry: Geometry,
    pub(crate) layout: Layout,
    pub(crate) table: ZoneTable,
    /// Sequence number of the table in use.
    pub(crate) sequence: u64,
    pub(crate) recovery: Option<TableRecovery>,
}

/// An error of a std call (`what` names it) on the device file.
pub(crate) fn io_err(path: &Path, what: &str, e: std::io::Error) -> DeviceError {
    DeviceError::io(format!("emu:{}: {what} failed", path.display()), e)
}

pub(crate) fn corrupt(path: &Path, detail: impl Into<String>) -> DeviceError {
    DeviceError::Corrupt {
        path: path.display().to_string(),
        detail: detail.into(),
    }
}

/// Opens `path` for `mode` without blocking (a FIFO would block a plain open), checks it is a
/// regular file and takes the device lock (see [`lock`](super::lock)).
pub(crate) async fn open_locked(
    path: &Path,
    mode: OpenMode,
) -> Result<(std::fs::File, DeviceClaim)> {
    let f = open_regular(path, mode)?;
    let lock = lock::acquire(path, &f, mode).await?;
    Ok((f, lock))
}

/// Opens `path` for `mode` with `O_NONBLOCK` (so a FIFO cannot block the open), checks it is
/// a regular file, then clears `O_NONBLOCK`: io_uring fails reads and writes of an
/// `O_NONBLOCK` file with `EAGAIN` on filesystems without non-blocking I/O support.
fn open_regular(path: &Path, mode: OpenMode) -> Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(mode == OpenMode::ReadWrite)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| io_err(path, "open", e))?;
    check_regular(path, &f)?;
    let fd = f.as_raw_fd();
    // SAFETY: F_GETFL/F_SETFL on a descriptor `f` owns change only its status flags; no
    // memory is passed.
    let rc = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 {
            flags
        } else {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK)
        }
    };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        return Err(io_err(path, "clear O_NONBLOCK", e));
    }
    Ok(f)
}

fn check_regular(path: &Path, f: &std::fs::File) -> Result<()> {
    let ft = f
        .metadata()
        .map_err(|e| io_err(path, "stat", e))?
        .file_type();
    if ft.is_file() {
        return Ok(());
    }
    let kind = if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_block_device() {
        "a block device (use zbd: for a zoned block device)"
    } else if ft.is_char_device() {
        "a character device (use nvme: for an NVMe generic device)"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    };
    Err(DeviceError::InvalidArgument(format!(
        "emu:{} is {kind}; an emu device is a regular file made by `ziob create`",
        path.display()
    )))
}

/// Reads exactly `len` bytes at `offset`; a file that ends first is `Ok(None)`.
fn read_exact(f: &std::fs::File, path: &Path, offset: u64, len: usize) -> Result<Option<Vec<u8>>> {
    let mut b = vec![0u8; len];
    match f.read_exact_at(&mut b, offset) {
        Ok(()) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(io_err(path, "read", e)),
    }
}

/// Reads the header and the zone table of an open device file. A read-write open that fell
/// back from a newest table whose data checks failed overwrites that table (see
/// [`retire_rejected`]).
pub(crate) fn load(f: &std::fs::File, path: &Path, mode: OpenMode) -> Result<Loaded> {
    let header = read_exact(f, path, 0, format::HEADER_BYTES as usize)?
        .ok_or_else(|| corrupt(path, "the file is shorter than its 4096-byte header"))?;
    let (geometry, layout) = format::decode_header(&header).map_err(|d| corrupt(path, d))?;
    let file_bytes = f.metadata().map_err(|e| io_err(path, "stat", e))?.len();
    let need = layout.file_bytes(&geometry);
    if file_bytes < need {
        return Err(corrupt(
            path,
            format!("the file is truncated: {file_bytes} bytes, the geometry needs {need}"),
        ));
    }
    let mut slots = Vec::with_capacity(2);
    for slot in 0..2u64 {
        let bytes = read_exact(
            f,
            path,
            layout.slot_offset(slot),
            layout.table_slot_bytes as usize,
        )?
        .ok_or_else(|| corrupt(path, "the file ends inside the zone table"))?;
        slots.push(bytes);
    }
    let chosen = choose_table(&slots, &geometry).map_err(|d| corrupt(path, d))?;
    let mut chosen = verify_data(f, path, &geometry, &layout, chosen)?;
    let table = ZoneTable::restore(&geometry, &chosen.zones).map_err(|d| {
        corrupt(
            path,
            format!(
                "zone table slot {} (sequence {}): {d}",
                chosen.slot, chosen.sequence
            ),
        )
    })?;
    // Only once the table in use is known good: a refused open changes nothing.
    if mode == OpenMode::ReadWrite {
        retire_rejected(f, path, &layout, &mut chosen)?;
    }
    if let Some(r) = &chosen.recovery {
        tracing::warn!(path = %path.display(), "{r}");
    }
    Ok(Loaded {
        geometry,
        layout,
        table,
        sequence: chosen.sequence,
        recovery: chosen.recovery,
    })
}

/// After a fall back from a newest table whose data checks failed (sequence `s`), writes the
/// table in use over it as sequence `s` without checks and `fdatasync`s. Otherwise the
/// rejected table would stay until the next table write, and data written again to match
/// its checks (the same bytes, reaching the disk by writeback) could make a later open take
/// it, undoing what this open showed.
fn retire_rejected(
    f: &std::fs::File,
    path: &Path,
    layout: &Layout,
    chosen: &mut Chosen,
) -> Result<()> {
    let Some((slot, sequence)) = chosen.rejected else {
        return Ok(());
    };
    let entries: Vec<TableEntry> = chosen
        .zones
        .iter()
        .copied()
        .map(TableEntry::unchecked)
        .collect();
    let bytes = format::encode_table(layout, sequence, &entries);
    f.write_all_at(&bytes, layout.slot_offset(slot))
        .map_err(|e| io_err(path, "write zone table", e))?;
    f.sync_data().map_err(|e| io_err(path, "fdatasync", e))?;
    chosen.slot = slot;
    chosen.sequence = sequence;
    if let Some(r) = &mut chosen.recovery {
        r.retired = true;
    }
    Ok(())
}

/// The slot an open uses.
pub(crate) struct Chosen {
    pub(crate) slot: u64,
    pub(crate) sequence: u64,
    pub(crate) zones: Vec<PersistedZone>,
    /// The entries' data checks, per zone.
    pub(crate) checks: Vec<Option<format::DataCheck>>,
    pub(crate) recovery: Option<TableRecovery>,
    /// The other slot, when it is valid and older: what the open falls back to if this
    /// table's data checks fail.
    pub(crate) older: Option<Box<Chosen>>,
    /// After such a fall back: the slot and sequence of the table whose checks failed.
    pub(crate) rejected: Option<(u64, u64)>,
}

impl Chosen {
    fn new(slot: u64, sequence: u64, entries: &[TableEntry]) -> Chosen {
        Chosen {
            slot,
            sequence,
            zones: entries.iter().map(|e| e.zone).collect(),
            checks: entries.iter().map(|e| e.check).collect(),
            recovery: None,
            older: None,
            rejected: None,
        }
    }
}

/// Refuses data checks no table write produces: a check longer than the zone's data, a
/// zone's data past its capacity, or checks that add up to more than a table ever checks.
/// Runs before any data is read.
fn checks_in_bounds(g: &Geometry, chosen: &Chosen) -> std::result::Result<(), String> {
    let mut total = 0u64;
    for (zone, (z, check)) in chosen.zones.iter().zip(&chosen.checks).enumerate() {
        let Some(check) = check else { continue };
        let len = check.bytes(g.block_size_bytes);
        total += len;
        if len > z.written_bytes || z.written_bytes > g.zone_capacity_bytes {
            return Err(format!(
                "zone {zone} checks {} blocks of {} bytes written (capacity {})",
                check.blocks, z.written_bytes, g.zone_capacity_bytes
            ));
        }
    }
    if total > CHECKED_TABLE_BYTES_MAX {
        return Err(format!(
            "its data checks cover {total} bytes, more than a table write checks \
             ({CHECKED_TABLE_BYTES_MAX})"
        ));
    }
    Ok(())
}

/// The first data check of `chosen` that the data does not match, described (the checks are
/// in bounds, see [`checks_in_bounds`]).
fn failed_check(
    f: &std::fs::File,
    path: &Path,
    g: &Geometry,
    layout: &Layout,
    chosen: &Chosen,
) -> Result<Option<String>> {
    for (zone, (z, check)) in chosen.zones.iter().zip(&chosen.checks).enumerate() {
        let Some(check) = check else { continue };
        let len = check.bytes(g.block_size_bytes);
        let start = z.written_bytes - len;
        let at = layout.data_offset_bytes + zone as u64 * g.zone_size_bytes + start;
        let data = read_exact(f, path, at, len as usize)?
            .ok_or_else(|| corrupt(path, "the file ends inside the data region"))?;
        let computed = crc32c::crc32c(&data);
        if computed != check.crc32c {
            return Ok(Some(format!(
                "zone {zone}: the data of blocks {}..{} does not match the table's check \
                 (stored {:#010x}, computed {computed:#010x})",
                start / g.block_size_bytes,
                z.written_bytes / g.block_size_bytes,
                check.crc32c
            )));
        }
    }
    Ok(None)
}

/// Why `older` cannot be the table a flush writing `newer` started from, if it cannot: the
/// sequence right before, every zone that grew checked, and every checked range of `newer`
/// starting where `older`'s data of that zone ends.
fn not_the_previous(g: &Geometry, newer: &Chosen, older: &Chosen) -> Option<String> {
    if older.sequence + 1 != newer.sequence {
        return Some(format!(
            "the older slot holds sequence {}, not {}",
            older.sequence,
            newer.sequence - 1
        ));
    }
    let zones = newer.zones.iter().zip(&newer.checks).zip(&older.zones);
    for (zone, ((z, check), before)) in zones.enumerate() {
        let Some(check) = check else {
            if z.written_bytes > before.written_bytes {
                return Some(format!("zone {zone} grew without a check"));
            }
            continue;
        };
        let start = z.written_bytes - check.bytes(g.block_size_bytes);
        if start != before.written_bytes {
            return Some(format!(
                "zone {zone}'s check starts at byte {start}, the older table's data ends at {}",
                before.written_bytes
            ));
        }
    }
    None
}

/// Checks the data the chosen table's entries carry checks for (a table written with one
/// `fdatasync`, see `docs/format.md`). If one does not match, that table's flush never
/// completed: the open falls back to the older slot and says so in the recovery note. That
/// older slot must hold the table the failed flush started from (the sequence right before,
/// the checked ranges starting where its data ends) and its own checks must match; anything
/// else, or checks no table write produces, is a `Corrupt` error.
fn verify_data(
    f: &std::fs::File,
    path: &Path,
    g: &Geometry,
    layout: &Layout,
    mut chosen: Chosen,
) -> Result<Chosen> {
    let refuse = |c: &Chosen, detail: String| {
        corrupt(
            path,
            format!(
                "zone-table slot {} (sequence {}): {detail}",
                c.slot, c.sequence
            ),
        )
    };
    checks_in_bounds(g, &chosen).map_err(|d| refuse(&chosen, d))?;
    let Some(defect) = failed_check(f, path, g, layout, &chosen)? else {
        return Ok(chosen);
    };
    let Some(mut older) = chosen.older.take().map(|o| *o) else {
        return Err(refuse(
            &chosen,
            format!("{defect}, and no older valid table to fall back to"),
        ));
    };
    if let Some(why) = not_the_previous(g, &chosen, &older) {
        return Err(refuse(
            &chosen,
            format!(
                "{defect}; not a flush torn by a crash, since {why}. Refusing to roll back \
                 silently (copy the file, then see docs/format.md)"
            ),
        ));
    }
    checks_in_bounds(g, &older).map_err(|d| refuse(&older, d))?;
    if let Some(older_defect) = failed_check(f, path, g, layout, &older)? {
        return Err(refuse(
            &chosen,
            format!(
                "{defect}; the older slot {} (sequence {}) fails its check too: {older_defect}",
                older.slot, older.sequence
            ),
        ));
    }
    older.recovery = Some(TableRecovery {
        damaged_slot: chosen.slot,
        defect: format!("sequence {}: {defect}", chosen.sequence),
        used_slot: older.slot,
        used_sequence: older.sequence,
        torn_newest_write: true,
        retired: false,
    });
    older.rejected = Some((chosen.slot, chosen.sequence));
    Ok(older)
}

/// Picks the zone table from the two slots' bytes (rule in `docs/format.md`): the newer of two
/// valid slots; with one valid slot (sequence `s`), the other is accepted as damaged only if
/// it can be dated and is either older (sequence below `s`) or a torn write of sequence `s + 1`
/// (intact header, entries all well-formed, a table longer than one sector); anything else is
/// an error naming the slot.
pub(crate) fn choose_table(slots: &[Vec<u8>], g: &Geometry) -> std::result::Result<Chosen, String> {
    let decoded: Vec<_> = slots
        .iter()
        .enumerate()
        .map(|(slot, b)| {
            let slot = slot as u64;
            match format::decode_table(b, g.zone_count) {
                Ok((seq, _)) if seq % 2 != slot => Err(SlotDefect::Header(format!(
                    "holds sequence {seq}, which belongs in slot {}",
                    seq % 2
                ))),
                other => other,
            }
        })
        .collect();
    match (&decoded[0], &decoded[1]) {
        (Ok((s0, z0)), Ok((s1, z1))) => {
            let (newer, older) = if s1 > s0 {
                (Chosen::new(1, *s1, z1), Chosen::new(0, *s0, z0))
            } else {
                (Chosen::new(0, *s0, z0), Chosen::new(1, *s1, z1))
            };
            Ok(Chosen {
                older: Some(Box::new(older)),
                ..newer
            })
        }
        (Err(d0), Err(d1)) => Err(format!("no valid zone table (slot 0: {d0}; slot 1: {d1})")),
        (good, bad) => {
            let (used_slot, damaged_slot) = if good.is_ok() { (0, 1) } else { (1, 0) };
            let (good, bad) = if good.is_ok() {
                (good, bad)
            } else {
                (bad, good)
            };
            let (sequence, zones) = good.as_ref().expect("one slot is valid");
            let defect = bad.as_ref().expect_err("one slot is damaged");
            let refuse = |why: &str| {
                Err(format!(
                    "zone-table slot {damaged_slot} is damaged ({defect}) and {why}; slot \
                     {used_slot} holds sequence {sequence}. Refusing to roll back silently: a \
                     completed flush may be lost (copy the file, then see docs/format.md)"
                ))
            };
            let torn_newest_write = match defect {
                SlotDefect::Header(_) => {
                    return refuse("cannot be dated, so it may be the newest table")
                }
                SlotDefect::Checksum { sequence: s, .. }
                | SlotDefect::Entry { sequence: s, .. }
                    if *s < *sequence =>
                {
                    false
                }
                SlotDefect::Checksum { sequence: s, .. } if *s == sequence + 1 => {
                    if format::table_bytes(g.zone_count) <= format::ATOMIC_SECTOR_BYTES {
                        return refuse(&format!(
                            "is the newest table (sequence {s}); it fits one {}-byte sector, \
                             which a crash cannot tear",
                            format::ATOMIC_SECTOR_BYTES
                        ));
                    }
                    if let Err(e) = format::entries_well_formed(&slots[damaged_slot as usize], g) {
                        return refuse(&format!(
                            "is the newest table (sequence {s}), not a torn write: {e}"
                        ));
                    }
                    true
                }
                _ => return refuse("is the newest table, not a torn write"),
            };
            Ok(Chosen {
                recovery: Some(TableRecovery {
                    damaged_slot,
                    defect: defect.to_string(),
                    used_slot,
                    used_sequence: *sequence,
                    torn_newest_write,
                    retired: false,
                }),
                ..Chosen::new(used_slot, *sequence, zones)
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_flags(f: &std::fs::File) -> i32 {
        // SAFETY: F_GETFL on a descriptor the test owns; no memory is passed.
        unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFL) }
    }

    #[test]
    fn the_data_descriptor_is_blocking_after_the_fifo_safe_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain");
        std::fs::write(&path, [0u8; 4096]).unwrap();
        for mode in [OpenMode::ReadWrite, OpenMode::ReadOnly] {
            let f = open_regular(&path, mode).unwrap();
            let flags = status_flags(&f);
            assert!(flags >= 0);
            assert_eq!(
                flags & libc::O_NONBLOCK,
                0,
                "{mode:?}: O_NONBLOCK still set"
            );
        }
    }
}
