//! The emu file format (see `docs/format.md`, which this module mirrors field by field).
//!
//! ```text
//! [0, 4096)                          header
//! [4096, 4096 + S)                   zone-table slot 0   (S = table_slot_bytes)
//! [4096 + S, 4096 + 2S)              zone-table slot 1
//! [data_offset, data_offset + N*Z)   data: zone i at data_offset + i*Z
//! ```
//! All integers are little-endian. Decoders never panic on bytes from the file: they return
//! a description of what is wrong.

use crate::limits::EMU_REGION_ALIGN_BYTES;
use crate::model::geometry::Geometry;
use crate::model::zone::{PersistedZone, ZoneState};

/// Magic of the header.
pub const HEADER_MAGIC: [u8; 8] = *b"ZIOBEMU\0";
/// Magic of a zone-table slot.
pub const TABLE_MAGIC: [u8; 8] = *b"ZIOBZTBL";
/// Format version of the header.
pub const FORMAT_VERSION: u32 = 1;
/// Version of the zone-table slots this build writes: 2, whose entries may carry a data check
/// ([`DataCheck`]). Version 1 slots (entries without one) are still read.
pub const TABLE_VERSION: u32 = 2;
/// Bytes of the header region.
pub const HEADER_BYTES: u64 = EMU_REGION_ALIGN_BYTES;

// Header field offsets, in file order.
const H_MAGIC: usize = 0;
const H_VERSION: usize = H_MAGIC + 8;
const H_BLOCK_SIZE: usize = H_VERSION + 4;
const H_ZONE_SIZE: usize = H_BLOCK_SIZE + 4;
const H_ZONE_CAPACITY: usize = H_ZONE_SIZE + 8;
const H_ZONE_COUNT: usize = H_ZONE_CAPACITY + 8;
const H_MAX_OPEN: usize = H_ZONE_COUNT + 4;
const H_MAX_ACTIVE: usize = H_MAX_OPEN + 4;
const H_FLAGS: usize = H_MAX_ACTIVE + 4;
const H_MAX_APPEND: usize = H_FLAGS + 4;
const H_SLOT_BYTES: usize = H_MAX_APPEND + 8;
const H_DATA_OFFSET: usize = H_SLOT_BYTES + 8;
const H_CRC: usize = H_DATA_OFFSET + 8;
/// Bytes of the header that carry fields (the rest of its 4 KiB are zero).
pub const HEADER_USED_BYTES: usize = H_CRC + 4;
const _: () = assert!(HEADER_USED_BYTES == 76);
const _: () = assert!(HEADER_USED_BYTES as u64 <= HEADER_BYTES);

/// Header flag: the device has a volatile write cache.
const FLAG_VOLATILE_WRITE_CACHE: u32 = 1;

// Table slot field offsets.
const T_MAGIC: usize = 0;
const T_VERSION: usize = T_MAGIC + 8;
const T_ZONE_COUNT: usize = T_VERSION + 4;
const T_SEQUENCE: usize = T_ZONE_COUNT + 4;
const T_ENTRIES: usize = T_SEQUENCE + 8;
/// Bytes per zone entry: state (1), data check blocks (3), data check CRC-32C (4), written
/// bytes (8). In a version 1 slot the 7 bytes after the state are reserved (zero).
pub const ENTRY_BYTES: usize = 16;
/// Most blocks a [`DataCheck`] can cover (its count is 24 bits).
pub const CHECK_BLOCKS_MAX: u32 = (1 << 24) - 1;
/// Most bytes the data checks of one table cover together: a table write never checks more
/// (it syncs the data first instead), and an open refuses a table that claims to.
pub const CHECKED_TABLE_BYTES_MAX: u64 = 1 << 20;
const _: () = assert!(T_ENTRIES == 24);

/// The unit a drive writes atomically (a logical sector; 4Kn drives write 4096): a write torn
/// by a power loss is made of whole sectors of its old and its new content.
pub const ATOMIC_SECTOR_BYTES: usize = 512;

/// Bytes of a zone table of `zone_count` zones that carry fields (header, entries, checksum).
pub fn table_bytes(zone_count: u32) -> usize {
    T_ENTRIES + ENTRY_BYTES * zone_count as usize + 4
}

/// A table entry's check of the data its table made durable: the CRC-32C of the `blocks`
/// blocks that end at the zone's `written_bytes`. A table written with one `fdatasync` (data
/// and table made durable together) carries one for every zone whose data grew since the
/// previous table; on open, a check that does not match means that flush never completed
/// (see `docs/format.md`, "Write ordering and crash semantics").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataCheck {
    /// Blocks covered, ending at the zone's written bytes (1..=[`CHECK_BLOCKS_MAX`]).
    pub blocks: u32,
    /// CRC-32C of those bytes.
    pub crc32c: u32,
}

impl DataCheck {
    /// Bytes covered, with blocks of `block_bytes`.
    pub fn bytes(&self, block_bytes: u64) -> u64 {
        u64::from(self.blocks) * block_bytes
    }
}

/// One zone of a zone-table slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableEntry {
    /// State and written bytes.
    pub zone: PersistedZone,
    /// The check of the data that ends at the written bytes, if the entry has one.
    pub check: Option<DataCheck>,
}

impl TableEntry {
    /// An entry without a data check.
    pub fn unchecked(zone: PersistedZone) -> TableEntry {
        TableEntry { zone, check: None }
    }
}

/// Where the regions of a device file are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Bytes of one zone-table slot (a multiple of 4 KiB).
    pub table_slot_bytes: u64,
    /// First byte of the data region (a multiple of 4 KiB and of the block size).
    pub data_offset_bytes: u64,
}

impl Layout {
    /// The layout for `g`.
    pub fn for_geometry(g: &Geometry) -> Layout {
        let table = (T_ENTRIES + ENTRY_BYTES * g.zone_count as usize + 4) as u64;
        let table_slot_bytes = table.div_ceil(EMU_REGION_ALIGN_BYTES) * EMU_REGION_ALIGN_BYTES;
        let align = EMU_REGION_ALIGN_BYTES.max(g.block_size_bytes);
        let data_offset_bytes = (HEADER_BYTES + 2 * table_slot_bytes).div_ceil(align) * align;
        Layout {
            table_slot_bytes,
            data_offset_bytes,
        }
    }

    /// File offset of table slot `slot` (0 or 1).
    pub fn slot_offset(&self, slot: u64) -> u64 {
        HEADER_BYTES + slot * self.table_slot_bytes
    }

    /// Length the file must have.
    pub fn file_bytes(&self, g: &Geometry) -> u64 {
        self.data_offset_bytes + g.device_size_bytes()
    }
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Encodes the header (4096 bytes).
pub fn encode_header(g: &Geometry, layout: &Layout) -> Vec<u8> {
    assert!(g.validate().is_ok(), "encoding an invalid geometry");
    let mut b = vec![0u8; HEADER_BYTES as usize];
    b[H_MAGIC..H_MAGIC + 8].copy_from_slice(&HEADER_MAGIC);
    put_u32(&mut b, H_VERSION, FORMAT_VERSION);
    put_u32(&mut b, H_BLOCK_SIZE, g.block_size_bytes as u32);
    put_u64(&mut b, H_ZONE_SIZE, g.zone_size_bytes);
    put_u64(&mut b, H_ZONE_CAPACITY, g.zone_capacity_bytes);
    put_u32(&mut b, H_ZONE_COUNT, g.zone_count);
    put_u32(&mut b, H_MAX_OPEN, g.max_open_zones.unwrap_or(0));
    put_u32(&mut b, H_MAX_ACTIVE, g.max_active_zones.unwrap_or(0));
    let flags = if g.volatile_write_cache {
        FLAG_VOLATILE_WRITE_CACHE
    } else {
        0
    };
    put_u32(&mut b, H_FLAGS, flags);
    put_u64(&mut b, H_MAX_APPEND, g.max_append_bytes);
    put_u64(&mut b, H_SLOT_BYTES, layout.table_slot_bytes);
    put_u64(&mut b, H_DATA_OFFSET, layout.data_offset_bytes);
    let crc = crc32c::crc32c(&b[..H_CRC]);
    put_u32(&mut b, H_CRC, crc);
    b
}

/// Decodes a header; the error says what is wrong.
pub fn decode_header(b: &[u8]) -> Result<(Geometry, Layout), String> {
    if b.len() < HEADER_USED_BYTES {
        return Err(format!(
            "the header is {} bytes, shorter than {HEADER_USED_BYTES}",
            b.len()
        ));
    }
    if b[H_MAGIC..H_MAGIC + 8] != HEADER_MAGIC {
        return Err("bad magic (not a ZIOB emu device file)".into());
    }
    let version = get_u32(b, H_VERSION);
    if version != FORMAT_VERSION {
        return Err(format!(
            "format version {version}, this build reads version {FORMAT_VERSION}"
        ));
    }
    let stored = get_u32(b, H_CRC);
    let computed = crc32c::crc32c(&b[..H_CRC]);
    if stored != computed {
        return Err(format!(
            "header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
        ));
    }
    let limit = |v: u32| if v == 0 { None } else { Some(v) };
    let g = Geometry {
        block_size_bytes: u64::from(get_u32(b, H_BLOCK_SIZE)),
        zone_size_bytes: get_u64(b, H_ZONE_SIZE),
        zone_capacity_bytes: get_u64(b, H_ZONE_CAPACITY),
        zone_count: get_u32(b, H_ZONE_COUNT),
        max_open_zones: limit(get_u32(b, H_MAX_OPEN)),
        max_active_zones: limit(get_u32(b, H_MAX_ACTIVE)),
        max_append_bytes: get_u64(b, H_MAX_APPEND),
        volatile_write_cache: get_u32(b, H_FLAGS) & FLAG_VOLATILE_WRITE_CACHE != 0,
    };
    g.validate().map_err(|e| format!("header: {e}"))?;
    let layout = Layout {
        table_slot_bytes: get_u64(b, H_SLOT_BYTES),
        data_offset_bytes: get_u64(b, H_DATA_OFFSET),
    };
    if layout != Layout::for_geometry(&g) {
        return Err(format!(
            "header layout {layout:?} does not match its geometry (expected {:?})",
            Layout::for_geometry(&g)
        ));
    }
    Ok((g, layout))
}

/// Encodes a zone-table slot (`layout.table_slot_bytes` bytes, version [`TABLE_VERSION`]).
pub fn encode_table(layout: &Layout, sequence: u64, entries: &[TableEntry]) -> Vec<u8> {
    let mut b = vec![0u8; layout.table_slot_bytes as usize];
    let crc_at = T_ENTRIES + ENTRY_BYTES * entries.len();
    assert!(crc_at + 4 <= b.len(), "zone table does not fit its slot");
    b[T_MAGIC..T_MAGIC + 8].copy_from_slice(&TABLE_MAGIC);
    put_u32(&mut b, T_VERSION, TABLE_VERSION);
    put_u32(&mut b, T_ZONE_COUNT, entries.len() as u32);
    put_u64(&mut b, T_SEQUENCE, sequence);
    for (i, e) in entries.iter().enumerate() {
        let at = T_ENTRIES + ENTRY_BYTES * i;
        b[at] = e.zone.state.nvme_code();
        if let Some(check) = e.check {
            assert!(
                (1..=CHECK_BLOCKS_MAX).contains(&check.blocks),
                "a data check of {} blocks",
                check.blocks
            );
            b[at + 1..at + 4].copy_from_slice(&check.blocks.to_le_bytes()[..3]);
            put_u32(&mut b, at + 4, check.crc32c);
        }
        put_u64(&mut b, at + 8, e.zone.written_bytes);
    }
    let crc = crc32c::crc32c(&b[..crc_at]);
    put_u32(&mut b, crc_at, crc);
    b
}

/// The data check bytes 1..8 of an entry hold in a slot of `version`: `Ok(None)` for none,
/// an error for bytes no table write produces (reserved bytes set in version 1, a checksum
/// without blocks in version 2).
fn decode_check(version: u32, entry: &[u8]) -> Result<Option<DataCheck>, &'static str> {
    let blocks = u32::from_le_bytes([entry[1], entry[2], entry[3], 0]);
    let crc32c = get_u32(entry, 4);
    match (version, blocks) {
        (1, _) if entry[1..8].iter().any(|&x| x != 0) => Err("non-zero reserved bytes"),
        (_, 0) if crc32c != 0 => Err("a data checksum without blocks"),
        (_, 0) => Ok(None),
        _ => Ok(Some(DataCheck { blocks, crc32c })),
    }
}

/// Why a zone-table slot was not accepted (see `docs/format.md`, "Choosing the table").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotDefect {
    /// The slot's header (magic, version, zone count) is not one of this device's, so the slot
    /// cannot be dated.
    Header(String),
    /// The header is intact (it holds `sequence`) but the checksum does not match.
    Checksum {
        /// The sequence number the slot's header holds.
        sequence: u64,
        /// The checksum stored in the slot.
        stored: u32,
        /// The checksum of the slot's bytes.
        computed: u32,
    },
    /// The checksum matches but an entry is not valid.
    Entry {
        /// The slot's sequence number.
        sequence: u64,
        /// What is wrong.
        detail: String,
    },
}

impl std::fmt::Display for SlotDefect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SlotDefect::Header(d) => f.write_str(d),
            SlotDefect::Checksum {
                sequence,
                stored,
                computed,
            } => write!(
                f,
                "sequence {sequence}: checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            SlotDefect::Entry { sequence, detail } => write!(f, "sequence {sequence}: {detail}"),
        }
    }
}

/// Decodes a zone-table slot (version 1 or 2) of a device with `zone_count` zones: its
/// sequence number and entries (consistency with the geometry is checked by
/// `ZoneTable::restore`, data checks against the data by the open). Checks, in this order:
/// length, magic, version, zone count, checksum, state codes and check fields.
pub fn decode_table(b: &[u8], zone_count: u32) -> Result<(u64, Vec<TableEntry>), SlotDefect> {
    let crc_at = T_ENTRIES + ENTRY_BYTES * zone_count as usize;
    if b.len() < crc_at + 4 {
        return Err(SlotDefect::Header(format!(
            "slot of {} bytes is too short",
            b.len()
        )));
    }
    if b[T_MAGIC..T_MAGIC + 8] != TABLE_MAGIC {
        return Err(SlotDefect::Header("bad magic".into()));
    }
    let version = get_u32(b, T_VERSION);
    if !(1..=TABLE_VERSION).contains(&version) {
        return Err(SlotDefect::Header(format!(
            "version {version}, this build reads 1..={TABLE_VERSION}"
        )));
    }
    let n = get_u32(b, T_ZONE_COUNT);
    if n != zone_count {
        return Err(SlotDefect::Header(format!(
            "{n} zones, the header says {zone_count}"
        )));
    }
    let sequence = get_u64(b, T_SEQUENCE);
    let stored = get_u32(b, crc_at);
    let computed = crc32c::crc32c(&b[..crc_at]);
    if stored != computed {
        return Err(SlotDefect::Checksum {
            sequence,
            stored,
            computed,
        });
    }
    let mut zones = Vec::with_capacity(n as usize);
    for i in 0..n as usize {
        let at = T_ENTRIES + ENTRY_BYTES * i;
        let state = ZoneState::from_nvme_code(b[at]).ok_or_else(|| SlotDefect::Entry {
            sequence,
            detail: format!("zone {i} has unknown state code {:#x}", b[at]),
        })?;
        let check =
            decode_check(version, &b[at..at + ENTRY_BYTES]).map_err(|d| SlotDefect::Entry {
                sequence,
                detail: format!("zone {i} has {d}"),
            })?;
        zones.push(TableEntry {
            zone: PersistedZone {
                state,
                written_bytes: get_u64(b, at + 8),
            },
            check,
        });
    }
    Ok((sequence, zones))
}

/// Whether every entry of a slot (whatever its checksum) is one a table write could have
/// produced for `g`: a known state code, check fields a table write produces (zero in a
/// version 1 slot; in version 2 no checksum without blocks, no check longer than the
/// capacity or than a table checks, nor — for an entry within one sector — than the zone's
/// data, and at most twice what a table checks in all), whole blocks within the capacity,
/// and zero reserved bytes after the checksum. A slot torn by a crash during its
/// write is made of such entries (pieces of its old and its new content); a flipped bit
/// usually is not. Returns the first entry that is not.
pub fn entries_well_formed(b: &[u8], g: &Geometry) -> Result<(), String> {
    let crc_at = T_ENTRIES + ENTRY_BYTES * g.zone_count as usize;
    if b.len() < crc_at + 4 {
        return Err(format!("slot of {} bytes is too short", b.len()));
    }
    // A torn slot mixes sectors of its old and new content; its version field is the new
    // one's (the header sector is intact), and old entries are well-formed in version 2 too.
    let version = get_u32(b, T_VERSION);
    let mut checked_bytes = 0u64;
    for i in 0..g.zone_count as usize {
        let at = T_ENTRIES + ENTRY_BYTES * i;
        if ZoneState::from_nvme_code(b[at]).is_none() {
            return Err(format!("zone {i} has unknown state code {:#x}", b[at]));
        }
        let check = decode_check(version, &b[at..at + ENTRY_BYTES])
            .map_err(|d| format!("zone {i} has {d}"))?;
        let written = get_u64(b, at + 8);
        if written > g.zone_capacity_bytes || !written.is_multiple_of(g.block_size_bytes) {
            return Err(format!(
                "zone {i} claims {written} bytes written, not whole blocks within the capacity"
            ));
        }
        let Some(check) = check else { continue };
        let checked = check.bytes(g.block_size_bytes);
        checked_bytes += checked;
        // An entry across a sector boundary (entries 30, 62, … at 512 bytes) may pair a new
        // check with old written bytes; any other comes whole from one table.
        let straddles = at / ATOMIC_SECTOR_BYTES != (at + ENTRY_BYTES - 1) / ATOMIC_SECTOR_BYTES;
        if checked > g.zone_capacity_bytes.min(CHECKED_TABLE_BYTES_MAX)
            || (!straddles && checked > written)
        {
            return Err(format!(
                "zone {i} checks {} blocks of {written} bytes written",
                check.blocks
            ));
        }
    }
    // At most a mix of two tables' checks.
    if checked_bytes > 2 * CHECKED_TABLE_BYTES_MAX {
        return Err(format!("its checks cover {checked_bytes} bytes"));
    }
    if b[crc_at + 4..].iter().any(|&x| x != 0) {
        return Err("non-zero bytes after the checksum".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry() -> Geometry {
        Geometry {
            block_size_bytes: 4096,
            zone_size_bytes: 1 << 20,
            zone_capacity_bytes: 768 << 10,
            zone_count: 2,
            max_open_zones: Some(2),
            max_active_zones: None,
            max_append_bytes: 512 << 10,
            volatile_write_cache: true,
        }
    }

    #[test]
    fn header_bytes_are_exact() {
        let g = geometry();
        let layout = Layout::for_geometry(&g);
        assert_eq!(layout.table_slot_bytes, 4096);
        assert_eq!(layout.data_offset_bytes, 3 * 4096);
        let b = encode_header(&g, &layout);
        #[rustfmt::skip]
        let want: [u8; 72] = [
            b'Z', b'I', b'O', b'B', b'E', b'M', b'U', 0, // magic
            1, 0, 0, 0,                                    // version
            0, 0x10, 0, 0,                                 // block size 4096
            0, 0, 0x10, 0, 0, 0, 0, 0,                     // zone size 1 MiB
            0, 0, 0x0C, 0, 0, 0, 0, 0,                     // zone capacity 768 KiB
            2, 0, 0, 0,                                    // zone count
            2, 0, 0, 0,                                    // max open
            0, 0, 0, 0,                                    // max active: no limit
            1, 0, 0, 0,                                    // flags: volatile write cache
            0, 0, 0x08, 0, 0, 0, 0, 0,                     // max append 512 KiB
            0, 0x10, 0, 0, 0, 0, 0, 0,                     // table slot bytes 4096
            0, 0x30, 0, 0, 0, 0, 0, 0,                     // data offset 12288
        ];
        assert_eq!(&b[..72], &want[..]);
        assert_eq!(get_u32(&b, 72), crc32c::crc32c(&want));
        assert!(b[76..].iter().all(|&x| x == 0));
        assert_eq!(decode_header(&b).unwrap(), (g, layout));
    }

    #[test]
    fn table_bytes_are_exact_and_checked() {
        let g = geometry();
        let layout = Layout::for_geometry(&g);
        let zones = [
            TableEntry {
                zone: PersistedZone {
                    state: ZoneState::Closed,
                    written_bytes: 8192,
                },
                check: Some(DataCheck {
                    blocks: 2,
                    crc32c: 0x1234_5678,
                }),
            },
            TableEntry::unchecked(PersistedZone {
                state: ZoneState::Full,
                written_bytes: 4096,
            }),
        ];
        let mut b = encode_table(&layout, 7, &zones);
        #[rustfmt::skip]
        let want: [u8; 56] = [
            b'Z', b'I', b'O', b'B', b'Z', b'T', b'B', b'L', // magic
            2, 0, 0, 0,                                     // version
            2, 0, 0, 0,                                     // zone count
            7, 0, 0, 0, 0, 0, 0, 0,                         // sequence
            // zone 0: Closed, check of 2 blocks, CRC 0x12345678, 8192 bytes
            0x4, 2, 0, 0, 0x78, 0x56, 0x34, 0x12, 0, 0x20, 0, 0, 0, 0, 0, 0,
            0xE, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, // zone 1: Full, 4096
        ];
        assert_eq!(&b[..56], &want[..]);
        assert_eq!(decode_table(&b, 2).unwrap(), (7, zones.to_vec()));
        b[40] ^= 1;
        let e = decode_table(&b, 2).unwrap_err();
        assert!(matches!(e, SlotDefect::Checksum { sequence: 7, .. }), "{e}");
        assert!(
            e.to_string().starts_with("sequence 7: checksum mismatch"),
            "{e}"
        );
        // Byte 40 is zone 1's state: Full ^ 1 = Offline, a well-formed entry.
        assert_eq!(entries_well_formed(&b, &g), Ok(()));
        b[40] ^= 1;
        // Byte 48 is the low byte of zone 1's written bytes: 4097 is not whole blocks.
        b[48] ^= 1;
        assert!(entries_well_formed(&b, &g).unwrap_err().contains("zone 1"));
        b[48] ^= 1;
        assert_eq!(entries_well_formed(&b, &g), Ok(()));
        // Zone 0 checking 3 blocks of its 2 (its entry is within one sector).
        b[25] = 3;
        assert!(entries_well_formed(&b, &g)
            .unwrap_err()
            .contains("zone 0 checks 3 blocks"));
        // Zone 1 with a checksum but no blocks.
        b[25] = 2;
        b[45] = 1;
        assert!(entries_well_formed(&b, &g)
            .unwrap_err()
            .contains("without blocks"));
        // The same bytes in a version 1 slot: reserved bytes set.
        b[45] = 0;
        put_u32(&mut b, T_VERSION, 1);
        assert!(entries_well_formed(&b, &g)
            .unwrap_err()
            .contains("zone 0 has non-zero reserved"));
    }

    #[test]
    fn version_1_slots_are_read_and_other_versions_refused() {
        let g = geometry();
        let layout = Layout::for_geometry(&g);
        let zones = [
            TableEntry::unchecked(PersistedZone {
                state: ZoneState::Closed,
                written_bytes: 8192,
            }),
            TableEntry::unchecked(PersistedZone {
                state: ZoneState::Empty,
                written_bytes: 0,
            }),
        ];
        let reseal = |b: &mut Vec<u8>| {
            let crc_at = T_ENTRIES + 2 * ENTRY_BYTES;
            let crc = crc32c::crc32c(&b[..crc_at]);
            put_u32(b, crc_at, crc);
        };
        let mut b = encode_table(&layout, 3, &zones);
        put_u32(&mut b, T_VERSION, 1);
        reseal(&mut b);
        assert_eq!(decode_table(&b, 2).unwrap(), (3, zones.to_vec()));
        // A version 1 entry with a reserved byte set is not one a table write produced.
        b[T_ENTRIES + 3] = 1;
        reseal(&mut b);
        let e = decode_table(&b, 2).unwrap_err();
        assert!(
            e.to_string().contains("zone 0 has non-zero reserved"),
            "{e}"
        );
        put_u32(&mut b, T_VERSION, 3);
        let e = decode_table(&b, 2).unwrap_err();
        assert!(matches!(e, SlotDefect::Header(_)), "{e}");
        assert!(e.to_string().contains("version 3"), "{e}");
    }

    #[test]
    fn damaged_headers_are_described() {
        let g = geometry();
        let layout = Layout::for_geometry(&g);
        let good = encode_header(&g, &layout);
        assert!(decode_header(&good[..10]).unwrap_err().contains("shorter"));
        let mut b = good.clone();
        b[0] = b'X';
        assert!(decode_header(&b).unwrap_err().contains("bad magic"));
        let mut b = good.clone();
        b[20] ^= 0xFF;
        assert!(decode_header(&b).unwrap_err().contains("checksum mismatch"));
        let mut b = good;
        b[8] = 9;
        assert!(decode_header(&b).unwrap_err().contains("format version 9"));
    }
}
