//! Zone Management Send (0x79) and Receive (0x7a): command builders and the report format.
//!
//! Report Zones data (ZNS 1.1, Figure "Report Zones Data Structure"): a 64-byte header whose
//! first 8 bytes are the number of zones reported (little-endian), then one entry per zone:
//! a 64-byte Zone Descriptor, followed by the zone descriptor extension (`zdes_bytes`) in an
//! Extended Report Zones.
//!
//! | descriptor bytes | field |
//! |---|---|
//! | 0 | ZT: zone type in bits 3:0 (0x2 = sequential write required) |
//! | 1 | ZS: zone state in bits 7:4 |
//! | 2 | ZA: zone attributes |
//! | 3 | ZAI: zone attributes information |
//! | 8..16 | ZCAP: zone capacity in blocks |
//! | 16..24 | ZSLBA: zone start LBA |
//! | 24..32 | WP: write pointer LBA |

use super::cmd::{NvmeCmd, Opcode};
use crate::model::state::{ZoneAction, ZoneInfo, ZoneState};

/// Size of the Report Zones header in bytes.
pub const REPORT_HEADER_BYTES: usize = 64;
/// Size of a Zone Descriptor in bytes.
pub const ZONE_DESCRIPTOR_BYTES: usize = 64;
/// Zone type of a sequential-write-required zone.
pub const ZONE_TYPE_SEQ_WRITE_REQUIRED: u8 = 0x2;
/// Zone Management Send dword 13: Select All (bit 8).
pub const ZMS_SELECT_ALL: u32 = 1 << 8;
/// Zone Management Receive dword 13: Partial Report (bit 16): the header counts the zones
/// returned in this buffer, not all matching zones.
pub const ZMR_PARTIAL_REPORT: u32 = 1 << 16;

/// Zone Send Action of a [`ZoneAction`] (dword 13 bits 7:0).
pub fn send_action_code(action: ZoneAction) -> u32 {
    match action {
        ZoneAction::Close => 0x1,
        ZoneAction::Finish => 0x2,
        ZoneAction::Open => 0x3,
        ZoneAction::Reset => 0x4,
        ZoneAction::Offline => 0x5,
    }
}

/// Zone Management Send of `action` to the zone starting at `zslba`, or to every zone the
/// action applies to with `select_all` (the SLBA is then ignored).
pub fn management_send(nsid: u32, zslba: u64, action: ZoneAction, select_all: bool) -> NvmeCmd {
    let mut c = NvmeCmd::new(Opcode::ZoneMgmtSend, nsid).slba(zslba);
    c.cdw13 = send_action_code(action) | if select_all { ZMS_SELECT_ALL } else { 0 };
    c
}

/// Zone Management Receive: report the zones from the one containing `slba` (every state,
/// partial report) into `len_bytes` at `addr`; `extended` asks for descriptor extensions.
pub fn report_zones(
    nsid: u32,
    slba: u64,
    extended: bool,
    addr: *mut u8,
    len_bytes: u32,
) -> NvmeCmd {
    assert!(
        len_bytes >= 4 && len_bytes.is_multiple_of(4),
        "report buffer of {len_bytes} bytes is not whole dwords"
    );
    let mut c = NvmeCmd::new(Opcode::ZoneMgmtRecv, nsid)
        .slba(slba)
        .data(addr, len_bytes);
    c.cdw12 = len_bytes / 4 - 1;
    let receive_action = if extended { 0x1 } else { 0x0 };
    // Reporting options (bits 15:8) 0 = all zones.
    c.cdw13 = receive_action | ZMR_PARTIAL_REPORT;
    c
}

/// Buffer size in bytes for a report of `zones` entries with `zdes_bytes` extensions.
pub fn report_len_bytes(zones: usize, zdes_bytes: usize) -> usize {
    REPORT_HEADER_BYTES + zones * (ZONE_DESCRIPTOR_BYTES + zdes_bytes)
}

/// One Zone Descriptor, in blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZoneDescriptor {
    /// Zone type (ZT).
    pub zone_type: u8,
    /// Zone state.
    pub state: ZoneState,
    /// Zone attributes (ZA).
    pub attributes: u8,
    /// Zone capacity in blocks.
    pub capacity_blocks: u64,
    /// Zone start LBA.
    pub start_lba: u64,
    /// Write pointer LBA (undefined for Full, Read Only and Offline zones).
    pub write_pointer_lba: u64,
}

/// Why a report could not be decoded (bytes from the device are never trusted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportError {
    /// The buffer is shorter than the header says.
    Truncated {
        /// Entries the header announces.
        announced: u64,
        /// Entries that fit the buffer.
        fit: usize,
    },
    /// A descriptor with a zone state value ZNS does not define.
    BadState {
        /// Entry index.
        entry: usize,
        /// The raw ZS nibble.
        code: u8,
    },
    /// A descriptor whose start LBA is not the start of a zone of the namespace.
    NotZoneStart {
        /// The descriptor's ZSLBA.
        start_lba: u64,
    },
    /// A descriptor whose capacity exceeds the zone size.
    CapacityExceedsZone {
        /// Zone index.
        zone: u64,
        /// The descriptor's ZCAP.
        capacity_blocks: u64,
    },
    /// A descriptor of a writable zone whose write pointer is outside the zone's capacity.
    WritePointerOutside {
        /// Zone index.
        zone: u64,
        /// The descriptor's WP.
        write_pointer_lba: u64,
    },
    /// A report asked from zone `first` that holds no zone.
    Empty {
        /// The zone the report was asked from.
        first: u32,
    },
    /// A report whose zones do not follow each other from the zone it was asked from.
    OutOfOrder {
        /// The zone expected at this position.
        expected: u32,
        /// The zone reported there.
        got: u32,
    },
}

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReportError::Truncated { announced, fit } => write!(
                f,
                "report announces {announced} zones but the buffer holds {fit}"
            ),
            ReportError::BadState { entry, code } => {
                write!(f, "report entry {entry} has undefined zone state {code:#x}")
            }
            ReportError::NotZoneStart { start_lba } => write!(
                f,
                "Report Zones: zone start LBA {start_lba:#x} is not a zone start"
            ),
            ReportError::CapacityExceedsZone {
                zone,
                capacity_blocks,
            } => write!(
                f,
                "Report Zones: zone {zone} capacity {capacity_blocks} blocks exceeds the zone size"
            ),
            ReportError::WritePointerOutside {
                zone,
                write_pointer_lba,
            } => write!(
                f,
                "Report Zones: zone {zone} write pointer {write_pointer_lba:#x} outside the zone"
            ),
            ReportError::Empty { first } => {
                write!(f, "Report Zones from zone {first} returned no zone")
            }
            ReportError::OutOfOrder { expected, got } => {
                write!(f, "Report Zones returned zone {got} for zone {expected}")
            }
        }
    }
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Decodes a (partial) Report Zones buffer with `zdes_bytes` of extension per entry.
pub fn parse_report(buf: &[u8], zdes_bytes: usize) -> Result<Vec<ZoneDescriptor>, ReportError> {
    if buf.len() < REPORT_HEADER_BYTES {
        return Err(ReportError::Truncated {
            announced: 0,
            fit: 0,
        });
    }
    let announced = le64(buf, 0);
    let entry_bytes = ZONE_DESCRIPTOR_BYTES + zdes_bytes;
    let fit = (buf.len() - REPORT_HEADER_BYTES) / entry_bytes;
    if announced > fit as u64 {
        return Err(ReportError::Truncated { announced, fit });
    }
    (0..announced as usize)
        .map(|entry| {
            let d = &buf[REPORT_HEADER_BYTES + entry * entry_bytes..][..ZONE_DESCRIPTOR_BYTES];
            let code = d[1] >> 4;
            let state =
                ZoneState::from_nvme_code(code).ok_or(ReportError::BadState { entry, code })?;
            Ok(ZoneDescriptor {
                zone_type: d[0] & 0xf,
                state,
                attributes: d[2],
                capacity_blocks: le64(d, 8),
                start_lba: le64(d, 16),
                write_pointer_lba: le64(d, 24),
            })
        })
        .collect()
}

/// The namespace a report describes, to check its descriptors against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportLayout {
    /// Zone size in blocks (zone `i` starts at LBA `i * zone_size_blocks`).
    pub zone_size_blocks: u64,
    /// Number of zones of the namespace.
    pub zone_count: u32,
    /// Logical block size in bytes.
    pub block_size_bytes: u64,
}

impl ZoneDescriptor {
    /// The zone this descriptor describes, in bytes, after checking it against `layout`: its
    /// start is a zone start, its capacity fits the zone, and the write pointer of a writable
    /// zone is inside the capacity. The write pointer of a Full zone is undefined (QEMU:
    /// capacity end; SPDK: all ones; the block layer: the next zone): it reports the capacity.
    pub fn zone_info(&self, layout: &ReportLayout) -> Result<ZoneInfo, ReportError> {
        let zsb = layout.zone_size_blocks;
        let index = self.start_lba / zsb;
        if !self.start_lba.is_multiple_of(zsb) || index >= u64::from(layout.zone_count) {
            return Err(ReportError::NotZoneStart {
                start_lba: self.start_lba,
            });
        }
        if self.capacity_blocks > zsb {
            return Err(ReportError::CapacityExceedsZone {
                zone: index,
                capacity_blocks: self.capacity_blocks,
            });
        }
        let written_blocks = self
            .write_pointer_lba
            .checked_sub(self.start_lba)
            .filter(|&w| w <= self.capacity_blocks);
        let write_pointer_blocks = match self.state {
            ZoneState::Full => self.capacity_blocks,
            ZoneState::Empty => 0,
            ZoneState::ReadOnly | ZoneState::Offline => written_blocks.unwrap_or(0),
            _ => written_blocks.ok_or(ReportError::WritePointerOutside {
                zone: index,
                write_pointer_lba: self.write_pointer_lba,
            })?,
        };
        let bs = layout.block_size_bytes;
        Ok(ZoneInfo {
            index: index as u32,
            start_bytes: self.start_lba * bs,
            capacity_bytes: self.capacity_blocks * bs,
            write_pointer_bytes: write_pointer_blocks * bs,
            state: self.state,
        })
    }
}

/// Decodes a Report Zones buffer asked from zone `first` for at most `max` zones: the
/// header and every descriptor are checked ([`parse_report`], [`ZoneDescriptor::zone_info`]),
/// the zones must follow each other from `first`, and at least one must be there. Entries past
/// `max` are ignored.
pub fn parse_report_zones(
    buf: &[u8],
    zdes_bytes: usize,
    layout: &ReportLayout,
    first: u32,
    max: usize,
) -> Result<Vec<ZoneInfo>, ReportError> {
    let descs = parse_report(buf, zdes_bytes)?;
    if descs.is_empty() {
        return Err(ReportError::Empty { first });
    }
    descs
        .iter()
        .take(max)
        .zip(first..)
        .map(|(d, expected)| {
            let z = d.zone_info(layout)?;
            if z.index != expected {
                return Err(ReportError::OutOfOrder {
                    expected,
                    got: z.index,
                });
            }
            Ok(z)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Header (2 zones) + descriptor of an implicitly opened zone at LBA 0x800 with capacity
    /// 0x600 and wp 0x803, + a Full one at 0x1000 (wp all ones, as SPDK reports it).
    fn sample(zdes: usize) -> Vec<u8> {
        let mut b = vec![0u8; report_len_bytes(2, zdes)];
        b[0] = 2;
        let mut put = |entry: usize, zs: u8, zcap: u64, zslba: u64, wp: u64| {
            let d = &mut b[64 + entry * (64 + zdes)..];
            d[0] = 0x2;
            d[1] = zs << 4;
            d[8..16].copy_from_slice(&zcap.to_le_bytes());
            d[16..24].copy_from_slice(&zslba.to_le_bytes());
            d[24..32].copy_from_slice(&wp.to_le_bytes());
        };
        put(0, 0x2, 0x600, 0x800, 0x803);
        put(1, 0xE, 0x600, 0x1000, u64::MAX);
        b
    }

    #[test]
    fn parses_plain_and_extended_reports() {
        for zdes in [0, 64] {
            let z = parse_report(&sample(zdes), zdes).unwrap();
            assert_eq!(z.len(), 2);
            assert_eq!(
                z[0],
                ZoneDescriptor {
                    zone_type: ZONE_TYPE_SEQ_WRITE_REQUIRED,
                    state: ZoneState::ImplicitlyOpened,
                    attributes: 0,
                    capacity_blocks: 0x600,
                    start_lba: 0x800,
                    write_pointer_lba: 0x803,
                }
            );
            assert_eq!(z[1].state, ZoneState::Full);
            assert_eq!(z[1].start_lba, 0x1000);
        }
    }

    #[test]
    fn refuses_truncated_and_undefined_states() {
        let b = sample(0);
        assert_eq!(
            parse_report(&b[..64 + 64], 0),
            Err(ReportError::Truncated {
                announced: 2,
                fit: 1
            })
        );
        let mut b = sample(0);
        b[64 + 1] = 0x5 << 4;
        assert_eq!(
            parse_report(&b, 0).unwrap_err().to_string(),
            "report entry 0 has undefined zone state 0x5"
        );
    }

    const LAYOUT: ReportLayout = ReportLayout {
        zone_size_blocks: 0x800,
        zone_count: 4,
        block_size_bytes: 4096,
    };

    #[test]
    fn report_zones_checks_every_descriptor() {
        let z = parse_report_zones(&sample(0), 0, &LAYOUT, 1, 8).unwrap();
        assert_eq!(z.len(), 2);
        assert_eq!(
            (z[0].index, z[0].state, z[0].write_pointer_bytes),
            (1, ZoneState::ImplicitlyOpened, 3 * 4096)
        );
        assert_eq!(
            (z[1].index, z[1].write_pointer_bytes, z[1].capacity_bytes),
            (2, 0x600 * 4096, 0x600 * 4096),
            "a Full zone's write pointer (all ones) is its capacity"
        );
        assert_eq!(
            parse_report_zones(&sample(0), 0, &LAYOUT, 1, 1)
                .unwrap()
                .len(),
            1
        );
        let err = |b: &[u8], first| parse_report_zones(b, 0, &LAYOUT, first, 8).unwrap_err();
        assert_eq!(
            err(&sample(0), 0),
            ReportError::OutOfOrder {
                expected: 0,
                got: 1
            }
        );
        let mut empty = sample(0);
        empty[0] = 0;
        assert_eq!(err(&empty, 1), ReportError::Empty { first: 1 });
        // start LBA inside a zone, beyond the namespace; capacity above the zone size;
        // write pointer of an open zone before its start or past its capacity
        let put = |at: usize, v: u64| {
            let mut b = sample(0);
            b[64 + at..64 + at + 8].copy_from_slice(&v.to_le_bytes());
            b
        };
        assert_eq!(
            err(&put(16, 0x801), 1),
            ReportError::NotZoneStart { start_lba: 0x801 }
        );
        assert!(matches!(
            err(&put(16, 0x800 * 4), 4),
            ReportError::NotZoneStart { .. }
        ));
        assert_eq!(
            err(&put(8, 0x801), 1),
            ReportError::CapacityExceedsZone {
                zone: 1,
                capacity_blocks: 0x801
            }
        );
        for wp in [0x7ff, 0x800 + 0x601] {
            assert_eq!(
                err(&put(24, wp), 1),
                ReportError::WritePointerOutside {
                    zone: 1,
                    write_pointer_lba: wp
                }
            );
        }
    }

    #[test]
    fn command_dwords() {
        let c = management_send(1, 0x800, ZoneAction::Reset, false);
        assert_eq!((c.opcode, c.cdw10, c.cdw11, c.cdw13), (0x79, 0x800, 0, 0x4));
        let c = management_send(1, 0, ZoneAction::Open, true);
        assert_eq!(c.cdw13, 0x103);
        let mut buf = vec![0u8; 4096];
        let c = report_zones(1, 0x1_0000_0000, true, buf.as_mut_ptr(), 4096);
        assert_eq!((c.opcode, c.cdw10, c.cdw11), (0x7a, 0, 1));
        assert_eq!(c.cdw12, 1023, "dwords, 0-based");
        assert_eq!(c.cdw13, 0x1_0001, "extended, partial");
        assert_eq!(c.data_len, 4096);
    }
}
