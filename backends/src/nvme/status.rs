//! NVMe completion status → [`DeviceError`].
//!
//! For passthrough the CQE result is the NVMe status field without the phase bit: Status Code
//! in bits 7:0, Status Code Type in bits 10:8, Command Retry Delay 12:11, More 13, Do Not
//! Retry 14. The device's status is passed through as the typed error a ZNS device means by
//! it; the context (zone, offset, length, write pointer) comes from the request and, where a
//! field needs the zone's current state, from a Zone Management Receive after the failure.

use crate::model::error::{Boundary, DeviceError, IoOp};
use crate::model::geometry::Geometry;
use crate::model::state::{ZoneAction, ZoneInfo, ZoneState};

/// Status Code Type: generic command status.
pub const SCT_GENERIC: u8 = 0;
/// Status Code Type: command specific status.
pub const SCT_COMMAND_SPECIFIC: u8 = 1;
/// Generic: Invalid Field in Command.
pub const SC_INVALID_FIELD: u8 = 0x02;
/// Generic: LBA Out of Range.
pub const SC_LBA_OUT_OF_RANGE: u8 = 0x80;
/// Command specific: Zone Boundary Error.
pub const SC_ZONE_BOUNDARY: u8 = 0xB8;
/// Command specific: Zone Is Full.
pub const SC_ZONE_FULL: u8 = 0xB9;
/// Command specific: Zone Is Read Only.
pub const SC_ZONE_READ_ONLY: u8 = 0xBA;
/// Command specific: Zone Is Offline.
pub const SC_ZONE_OFFLINE: u8 = 0xBB;
/// Command specific: Zone Invalid Write.
pub const SC_ZONE_INVALID_WRITE: u8 = 0xBC;
/// Command specific: Too Many Active Zones.
pub const SC_TOO_MANY_ACTIVE: u8 = 0xBD;
/// Command specific: Too Many Open Zones.
pub const SC_TOO_MANY_OPEN: u8 = 0xBE;
/// Command specific: Invalid Zone State Transition.
pub const SC_INVALID_TRANSITION: u8 = 0xBF;

/// A decoded NVMe status field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvmeStatus {
    /// Status Code Type (3 bits).
    pub sct: u8,
    /// Status Code.
    pub sc: u8,
    /// Do Not Retry.
    pub dnr: bool,
    /// More status information in the error log.
    pub more: bool,
}

impl NvmeStatus {
    /// Decodes a passthrough CQE result (a positive status; 0 is success and gives `None`).
    pub fn from_result(result: i32) -> Option<NvmeStatus> {
        if result <= 0 {
            return None;
        }
        let s = result as u32;
        Some(NvmeStatus {
            sct: ((s >> 8) & 0x7) as u8,
            sc: (s & 0xff) as u8,
            dnr: s & 0x4000 != 0,
            more: s & 0x2000 != 0,
        })
    }

    /// Whether this is command-specific status `sc`.
    pub fn is_zns(&self, sc: u8) -> bool {
        self.sct == SCT_COMMAND_SPECIFIC && self.sc == sc
    }
}

impl std::fmt::Display for NvmeStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NVMe status SCT {:#x} SC {:#04x}", self.sct, self.sc)?;
        if self.dnr {
            f.write_str(" DNR")?;
        }
        if self.more {
            f.write_str(" More")?;
        }
        Ok(())
    }
}

/// What a failed data command was: enough to build the typed error.
#[derive(Debug, Clone, Copy)]
pub struct IoContext {
    /// The op.
    pub op: IoOp,
    /// Zone index.
    pub zone: u32,
    /// Where it was addressed, in bytes within the zone (0 for an append).
    pub offset_bytes: u64,
    /// Its length in bytes.
    pub len_bytes: u64,
}

/// The typed error for a data command that completed with `status`. `zone_now` is the zone's
/// report after the failure (needed for Invalid Write, which names the write pointer, and for
/// an append's Boundary Error, which starts at it). `None` for statuses without a ZNS meaning.
pub fn io_error(
    g: &Geometry,
    status: NvmeStatus,
    ctx: IoContext,
    zone_now: Option<&ZoneInfo>,
) -> Option<DeviceError> {
    let bs = g.block_size_bytes;
    let IoContext {
        op,
        zone,
        offset_bytes,
        len_bytes,
    } = ctx;
    let offset_blocks = offset_bytes / bs;
    let wp_bytes = zone_now.map(|z| z.write_pointer_bytes);
    if status.sct == SCT_GENERIC {
        return match status.sc {
            SC_LBA_OUT_OF_RANGE => Some(DeviceError::OutOfRange {
                zone,
                zone_count: g.zone_count,
            }),
            SC_INVALID_FIELD if op == IoOp::Append && len_bytes > g.max_append_bytes => {
                Some(DeviceError::AppendTooLarge {
                    zone,
                    len_bytes,
                    max_append_bytes: g.max_append_bytes,
                })
            }
            _ => None,
        };
    }
    if status.sct != SCT_COMMAND_SPECIFIC {
        return None;
    }
    Some(match status.sc {
        SC_ZONE_BOUNDARY => {
            let (start, boundary, limit) = match op {
                IoOp::Read => (offset_bytes, Boundary::ZoneEnd, g.zone_size_bytes),
                IoOp::Write => (offset_bytes, Boundary::Capacity, g.zone_capacity_bytes),
                IoOp::Append => (
                    wp_bytes.unwrap_or(0),
                    Boundary::Capacity,
                    g.zone_capacity_bytes,
                ),
            };
            DeviceError::BoundaryError {
                op,
                zone,
                offset_blocks: start / bs,
                len_blocks: len_bytes / bs,
                boundary,
                limit_blocks: limit / bs,
            }
        }
        SC_ZONE_FULL => DeviceError::ZoneFull {
            op,
            zone,
            offset_blocks,
            capacity_blocks: g.zone_capacity_blocks(),
        },
        SC_ZONE_READ_ONLY => DeviceError::ReadOnly {
            op,
            zone,
            offset_blocks,
        },
        SC_ZONE_OFFLINE => DeviceError::Offline {
            op,
            zone,
            offset_blocks,
        },
        SC_ZONE_INVALID_WRITE => DeviceError::InvalidWrite {
            zone,
            offset_blocks,
            wp_blocks: wp_bytes.unwrap_or(0) / bs,
        },
        SC_TOO_MANY_ACTIVE => DeviceError::TooManyActive {
            zone,
            max_active: g.max_active_zones.unwrap_or(u32::MAX),
        },
        SC_TOO_MANY_OPEN => DeviceError::TooManyOpen {
            zone,
            max_open: g.max_open_zones.unwrap_or(u32::MAX),
        },
        _ => return None,
    })
}

/// The typed error for a Zone Management Send of `action` on `zone` that completed with
/// `status`; `state_now` is the zone's state after the failure.
pub fn action_error(
    g: &Geometry,
    status: NvmeStatus,
    action: ZoneAction,
    zone: u32,
    state_now: Option<ZoneState>,
) -> Option<DeviceError> {
    if status.sct == SCT_GENERIC && status.sc == SC_LBA_OUT_OF_RANGE {
        return Some(DeviceError::OutOfRange {
            zone,
            zone_count: g.zone_count,
        });
    }
    if status.sct != SCT_COMMAND_SPECIFIC {
        return None;
    }
    Some(match status.sc {
        SC_INVALID_TRANSITION => DeviceError::InvalidTransition {
            zone,
            action,
            state: state_now?,
        },
        SC_TOO_MANY_ACTIVE => DeviceError::TooManyActive {
            zone,
            max_active: g.max_active_zones.unwrap_or(u32::MAX),
        },
        SC_TOO_MANY_OPEN => DeviceError::TooManyOpen {
            zone,
            max_open: g.max_open_zones.unwrap_or(u32::MAX),
        },
        SC_ZONE_READ_ONLY => DeviceError::ReadOnly {
            op: IoOp::Write,
            zone,
            offset_blocks: 0,
        },
        SC_ZONE_OFFLINE => DeviceError::Offline {
            op: IoOp::Write,
            zone,
            offset_blocks: 0,
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::error::ErrorKind;

    fn geo() -> Geometry {
        let mut g = Geometry::new(8, 1 << 20);
        g.zone_capacity_bytes = 768 << 10;
        g.max_open_zones = Some(2);
        g.max_active_zones = Some(3);
        g.max_append_bytes = 64 << 10;
        g
    }

    #[test]
    fn decodes_status_bits() {
        assert_eq!(NvmeStatus::from_result(0), None);
        let s = NvmeStatus::from_result(0x4000 | 0x100 | 0xB9).unwrap();
        assert_eq!((s.sct, s.sc, s.dnr, s.more), (1, 0xB9, true, false));
        assert_eq!(s.to_string(), "NVMe status SCT 0x1 SC 0xb9 DNR");
        let s = NvmeStatus::from_result(0x2000 | 0x80).unwrap();
        assert_eq!((s.sct, s.sc, s.dnr, s.more), (0, 0x80, false, true));
    }

    #[test]
    fn every_zns_status_maps_to_its_kind_and_back() {
        let g = geo();
        let wp = ZoneInfo {
            index: 3,
            start_bytes: 3 << 20,
            capacity_bytes: 768 << 10,
            write_pointer_bytes: 3 * 4096,
            state: ZoneState::ImplicitlyOpened,
        };
        let ctx = IoContext {
            op: IoOp::Write,
            zone: 3,
            offset_bytes: 40 * 4096,
            len_bytes: 4096,
        };
        for (sc, kind) in [
            (SC_ZONE_BOUNDARY, ErrorKind::BoundaryError),
            (SC_ZONE_FULL, ErrorKind::ZoneFull),
            (SC_ZONE_READ_ONLY, ErrorKind::ReadOnly),
            (SC_ZONE_OFFLINE, ErrorKind::Offline),
            (SC_ZONE_INVALID_WRITE, ErrorKind::InvalidWrite),
            (SC_TOO_MANY_ACTIVE, ErrorKind::TooManyActive),
            (SC_TOO_MANY_OPEN, ErrorKind::TooManyOpen),
        ] {
            let st = NvmeStatus::from_result(0x4000 | 0x100 | i32::from(sc)).unwrap();
            let e = io_error(&g, st, ctx, Some(&wp)).unwrap();
            assert_eq!(e.kind(), kind);
            assert_eq!(e.nvme_status(), Some((1, sc)), "round trip of {sc:#x}");
        }
        let st = NvmeStatus::from_result(0x100 | i32::from(SC_ZONE_INVALID_WRITE)).unwrap();
        assert_eq!(
            io_error(&g, st, ctx, Some(&wp)).unwrap().to_string(),
            "Zone Invalid Write: write at block 40 of zone 3, write pointer is at block 3"
        );
        let st = NvmeStatus::from_result(0x80).unwrap();
        assert_eq!(
            io_error(&g, st, ctx, None).unwrap().kind(),
            ErrorKind::OutOfRange
        );
        let st = NvmeStatus::from_result(0x06).unwrap();
        assert!(
            io_error(&g, st, ctx, None).is_none(),
            "internal error has no ZNS meaning"
        );
    }

    #[test]
    fn append_boundary_starts_at_the_write_pointer() {
        let g = geo();
        let z = ZoneInfo {
            index: 4,
            start_bytes: 4 << 20,
            capacity_bytes: 768 << 10,
            write_pointer_bytes: 180 * 4096,
            state: ZoneState::ImplicitlyOpened,
        };
        let ctx = IoContext {
            op: IoOp::Append,
            zone: 4,
            offset_bytes: 0,
            len_bytes: 64 << 10,
        };
        let st = NvmeStatus::from_result(0x1B8).unwrap();
        assert_eq!(
            io_error(&g, st, ctx, Some(&z)).unwrap().to_string(),
            "Zone Boundary Error: append of 16 blocks at block 180 of zone 4 crosses the zone capacity (block 192)"
        );
    }

    #[test]
    fn action_errors_name_the_state() {
        let g = geo();
        let st = NvmeStatus::from_result(0x1BF).unwrap();
        let e = action_error(&g, st, ZoneAction::Open, 0, Some(ZoneState::Full)).unwrap();
        assert_eq!(
            e.to_string(),
            "Invalid Zone State Transition: cannot open zone 0 in state Full"
        );
        let st = NvmeStatus::from_result(0x1BD).unwrap();
        let e = action_error(&g, st, ZoneAction::Open, 3, None).unwrap();
        assert_eq!(
            e.to_string(),
            "Too Many Active Zones: zone 3 cannot leave Empty, all 3 active resources are taken"
        );
    }
}
