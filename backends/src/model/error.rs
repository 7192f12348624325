//! [`DeviceError`]: every way a zoned-device operation can fail, with the zone, the position
//! (in blocks within the zone) and the NVMe status a real ZNS device would return.

use crate::model::zone::{ZoneAction, ZoneState};

/// Result alias of the backends crate.
pub type Result<T> = std::result::Result<T, DeviceError>;

/// The data operation an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoOp {
    /// A read.
    Read,
    /// A write at the write pointer.
    Write,
    /// A zone append.
    Append,
}

impl IoOp {
    /// The operation's name: `read`, `write` or `append`.
    pub fn as_str(self) -> &'static str {
        match self {
            IoOp::Read => "read",
            IoOp::Write => "write",
            IoOp::Append => "append",
        }
    }
}

impl std::fmt::Display for IoOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a [`DeviceError::BoundaryError`] crossed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// The zone capacity (writes and appends).
    Capacity,
    /// The zone end, i.e. the next zone's start (reads).
    ZoneEnd,
}

impl std::fmt::Display for Boundary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Boundary::Capacity => "zone capacity",
            Boundary::ZoneEnd => "zone end",
        })
    }
}

/// The category of a [`DeviceError`], for matching without destructuring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Zone Invalid Write (0xBC).
    InvalidWrite,
    /// Zone Is Full (0xB9).
    ZoneFull,
    /// Zone Boundary Error (0xB8).
    BoundaryError,
    /// Zone Is Read Only (0xBA).
    ReadOnly,
    /// Zone Is Offline (0xBB).
    Offline,
    /// Too Many Open Zones (0xBE).
    TooManyOpen,
    /// Too Many Active Zones (0xBD).
    TooManyActive,
    /// Invalid Zone State Transition (0xBF).
    InvalidTransition,
    /// LBA Out of Range (generic 0x80).
    OutOfRange,
    /// Offset or length not a positive multiple of the block size.
    Misaligned,
    /// Append larger than the Zone Append Size Limit (generic Invalid Field, 0x02).
    AppendTooLarge,
    /// A caller mistake the device would never see (e.g. a too small buffer).
    InvalidArgument,
    /// An I/O error of the medium or the backing file.
    Io,
    /// A persistent device image that is damaged, truncated or of another format.
    Corrupt,
    /// A device spec string that cannot be parsed.
    InvalidSpec,
    /// A geometry whose fields are out of range or inconsistent.
    InvalidGeometry,
    /// A backend that exists in the spec syntax but is not built in.
    Unsupported,
    /// A write not carried out because an earlier write of the zone failed.
    Aborted,
    /// A device another opener holds (a lock conflict).
    Busy,
    /// A change refused because the device was opened read-only.
    ReadOnlyDevice,
}

/// An error of a zoned device. Positions are zone-relative and in logical blocks.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// A write that does not start at the write pointer.
    #[error("Zone Invalid Write: write at block {offset_blocks} of zone {zone}, write pointer is at block {wp_blocks}")]
    InvalidWrite {
        /// Zone index.
        zone: u32,
        /// Where the write was addressed, in blocks within the zone.
        offset_blocks: u64,
        /// The write pointer, in blocks within the zone.
        wp_blocks: u64,
    },
    /// A write or append to a Full zone.
    #[error("Zone Is Full: {op} at block {offset_blocks} of zone {zone}, the zone is Full (capacity {capacity_blocks} blocks)")]
    ZoneFull {
        /// Write or append.
        op: IoOp,
        /// Zone index.
        zone: u32,
        /// Where the op was addressed (0 for an append: the zone start), in blocks.
        offset_blocks: u64,
        /// The zone capacity in blocks.
        capacity_blocks: u64,
    },
    /// An op whose range crosses the zone capacity (writes) or the zone end (reads).
    #[error("Zone Boundary Error: {op} of {len_blocks} blocks at block {offset_blocks} of zone {zone} crosses the {boundary} (block {limit_blocks})")]
    BoundaryError {
        /// The op.
        op: IoOp,
        /// Zone index.
        zone: u32,
        /// Start of the range in blocks within the zone (the write pointer for an append).
        offset_blocks: u64,
        /// Length of the range in blocks.
        len_blocks: u64,
        /// Which boundary.
        boundary: Boundary,
        /// Where the boundary is, in blocks within the zone.
        limit_blocks: u64,
    },
    /// A write, append or state change of a Read Only zone.
    #[error("Zone Is Read Only: {op} at block {offset_blocks} of zone {zone}")]
    ReadOnly {
        /// The op.
        op: IoOp,
        /// Zone index.
        zone: u32,
        /// Where the op was addressed, in blocks.
        offset_blocks: u64,
    },
    /// Any I/O to an Offline zone.
    #[error("Zone Is Offline: {op} at block {offset_blocks} of zone {zone}")]
    Offline {
        /// The op.
        op: IoOp,
        /// Zone index.
        zone: u32,
        /// Where the op was addressed, in blocks.
        offset_blocks: u64,
    },
    /// Opening a zone while every open resource is held by an explicitly opened zone.
    #[error("Too Many Open Zones: zone {zone} needs an open resource, all {max_open} are held by explicitly opened zones")]
    TooManyOpen {
        /// The zone that could not be opened.
        zone: u32,
        /// Max Open Resources.
        max_open: u32,
    },
    /// Leaving Empty while every active resource is taken.
    #[error("Too Many Active Zones: zone {zone} cannot leave Empty, all {max_active} active resources are taken")]
    TooManyActive {
        /// The zone that could not become active.
        zone: u32,
        /// Max Active Resources.
        max_active: u32,
    },
    /// A zone management action not allowed from the zone's state.
    #[error("Invalid Zone State Transition: cannot {action} zone {zone} in state {state}")]
    InvalidTransition {
        /// Zone index.
        zone: u32,
        /// The refused action.
        action: ZoneAction,
        /// The zone's state.
        state: ZoneState,
    },
    /// A zone index past the last zone.
    #[error("LBA Out of Range: zone {zone} does not exist, the device has {zone_count} zones")]
    OutOfRange {
        /// The requested zone index.
        zone: u32,
        /// Number of zones of the device.
        zone_count: u32,
    },
    /// An offset or length that is not a positive multiple of the block size.
    #[error("{op} of {len_bytes} bytes at byte {offset_bytes} of zone {zone} is not a positive multiple of the {block_size_bytes}-byte block size")]
    Misaligned {
        /// The op.
        op: IoOp,
        /// Zone index.
        zone: u32,
        /// Offset in bytes within the zone.
        offset_bytes: u64,
        /// Length in bytes.
        len_bytes: u64,
        /// The device's block size.
        block_size_bytes: u64,
    },
    /// An append longer than the Zone Append Size Limit.
    #[error("append of {len_bytes} bytes to zone {zone} exceeds the zone append size limit of {max_append_bytes} bytes")]
    AppendTooLarge {
        /// Zone index.
        zone: u32,
        /// Requested length.
        len_bytes: u64,
        /// The limit.
        max_append_bytes: u64,
    },
    /// A caller mistake no device would see.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An I/O error of the medium or the backing file.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, e.g. `emu:/x.zns: fdatasync`.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A damaged persistent device image.
    #[error("{path} is not a usable emu device: {detail}")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong, e.g. `header checksum mismatch (stored 0x.., computed 0x..)`.
        detail: String,
    },
    /// A device spec string that cannot be parsed.
    #[error("invalid device spec `{spec}`: {reason}")]
    InvalidSpec {
        /// The spec as given.
        spec: String,
        /// Why it was refused.
        reason: String,
    },
    /// An invalid geometry.
    #[error("invalid geometry: {0}")]
    InvalidGeometry(String),
    /// A write or append not carried out (or not counted as written) because an earlier
    /// write of the zone failed or the zone was reset while it was in flight. The zone stays
    /// writable: its write pointer goes back to where the completed data ends.
    #[error("{op} at block {offset_blocks} of zone {zone} aborted: {reason}")]
    Aborted {
        /// Write or append.
        op: IoOp,
        /// Zone index.
        zone: u32,
        /// Where the op was placed, in blocks.
        offset_blocks: u64,
        /// Why, e.g. `the write at block 8 failed`.
        reason: String,
    },
    /// The device is open elsewhere in a way that excludes this open (a process holds its
    /// lock: read-write opens are exclusive, read-only opens shared).
    #[error("{path}: device busy: {holder}")]
    Busy {
        /// The device file.
        path: String,
        /// Who holds it, e.g. `opened read-write by another process`.
        holder: String,
    },
    /// A write, append, zone action or flush on a device opened read-only.
    #[error("{name}: {what} refused: the device is opened read-only")]
    ReadOnlyDevice {
        /// The device name (its spec).
        name: String,
        /// The refused operation, e.g. `write to zone 3`.
        what: String,
    },
    /// A backend that is not built in.
    #[error("backend `{backend}` is not available in this build of ZIOB")]
    Unsupported {
        /// The backend prefix, e.g. `zbd`.
        backend: String,
    },
}

impl DeviceError {
    /// The category of the error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            DeviceError::InvalidWrite { .. } => ErrorKind::InvalidWrite,
            DeviceError::ZoneFull { .. } => ErrorKind::ZoneFull,
            DeviceError::BoundaryError { .. } => ErrorKind::BoundaryError,
            DeviceError::ReadOnly { .. } => ErrorKind::ReadOnly,
            DeviceError::Offline { .. } => ErrorKind::Offline,
            DeviceError::TooManyOpen { .. } => ErrorKind::TooManyOpen,
            DeviceError::TooManyActive { .. } => ErrorKind::TooManyActive,
            DeviceError::InvalidTransition { .. } => ErrorKind::InvalidTransition,
            DeviceError::OutOfRange { .. } => ErrorKind::OutOfRange,
            DeviceError::Misaligned { .. } => ErrorKind::Misaligned,
            DeviceError::AppendTooLarge { .. } => ErrorKind::AppendTooLarge,
            DeviceError::InvalidArgument(_) => ErrorKind::InvalidArgument,
            DeviceError::Io { .. } => ErrorKind::Io,
            DeviceError::Corrupt { .. } => ErrorKind::Corrupt,
            DeviceError::InvalidSpec { .. } => ErrorKind::InvalidSpec,
            DeviceError::InvalidGeometry(_) => ErrorKind::InvalidGeometry,
            DeviceError::Unsupported { .. } => ErrorKind::Unsupported,
            DeviceError::Aborted { .. } => ErrorKind::Aborted,
            DeviceError::Busy { .. } => ErrorKind::Busy,
            DeviceError::ReadOnlyDevice { .. } => ErrorKind::ReadOnlyDevice,
        }
    }

    /// The NVMe status `(status code type, status code)` a ZNS device returns for this error,
    /// or `None` when the error never reaches a device (caller or host-side errors).
    pub fn nvme_status(&self) -> Option<(u8, u8)> {
        const GENERIC: u8 = 0;
        const COMMAND_SPECIFIC: u8 = 1;
        Some(match self.kind() {
            ErrorKind::BoundaryError => (COMMAND_SPECIFIC, 0xB8),
            ErrorKind::ZoneFull => (COMMAND_SPECIFIC, 0xB9),
            ErrorKind::ReadOnly => (COMMAND_SPECIFIC, 0xBA),
            ErrorKind::Offline => (COMMAND_SPECIFIC, 0xBB),
            ErrorKind::InvalidWrite => (COMMAND_SPECIFIC, 0xBC),
            ErrorKind::TooManyActive => (COMMAND_SPECIFIC, 0xBD),
            ErrorKind::TooManyOpen => (COMMAND_SPECIFIC, 0xBE),
            ErrorKind::InvalidTransition => (COMMAND_SPECIFIC, 0xBF),
            ErrorKind::OutOfRange => (GENERIC, 0x80),
            ErrorKind::AppendTooLarge => (GENERIC, 0x02),
            ErrorKind::Io => (GENERIC, 0x06),
            ErrorKind::Aborted => (GENERIC, 0x07),
            _ => return None,
        })
    }

    /// Wraps an OS error with what was being done.
    pub fn io(context: impl Into<String>, source: impl Into<std::io::Error>) -> DeviceError {
        DeviceError::Io {
            context: context.into(),
            source: source.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_strings_are_exact() {
        let cases: Vec<(DeviceError, &str)> = vec![
            (
                DeviceError::InvalidWrite { zone: 3, offset_blocks: 40, wp_blocks: 32 },
                "Zone Invalid Write: write at block 40 of zone 3, write pointer is at block 32",
            ),
            (
                DeviceError::ZoneFull { op: IoOp::Append, zone: 1, offset_blocks: 0, capacity_blocks: 192 },
                "Zone Is Full: append at block 0 of zone 1, the zone is Full (capacity 192 blocks)",
            ),
            (
                DeviceError::BoundaryError {
                    op: IoOp::Write,
                    zone: 2,
                    offset_blocks: 190,
                    len_blocks: 4,
                    boundary: Boundary::Capacity,
                    limit_blocks: 192,
                },
                "Zone Boundary Error: write of 4 blocks at block 190 of zone 2 crosses the zone capacity (block 192)",
            ),
            (
                DeviceError::TooManyOpen { zone: 5, max_open: 2 },
                "Too Many Open Zones: zone 5 needs an open resource, all 2 are held by explicitly opened zones",
            ),
            (
                DeviceError::TooManyActive { zone: 6, max_active: 3 },
                "Too Many Active Zones: zone 6 cannot leave Empty, all 3 active resources are taken",
            ),
            (
                DeviceError::InvalidTransition { zone: 4, action: ZoneAction::Open, state: ZoneState::Full },
                "Invalid Zone State Transition: cannot open zone 4 in state Full",
            ),
            (
                DeviceError::OutOfRange { zone: 9, zone_count: 8 },
                "LBA Out of Range: zone 9 does not exist, the device has 8 zones",
            ),
            (
                DeviceError::Offline { op: IoOp::Read, zone: 0, offset_blocks: 7 },
                "Zone Is Offline: read at block 7 of zone 0",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
        }
    }

    #[test]
    fn nvme_status_follows_the_notes() {
        let e = DeviceError::InvalidWrite {
            zone: 0,
            offset_blocks: 1,
            wp_blocks: 0,
        };
        assert_eq!(e.nvme_status(), Some((1, 0xBC)));
        let e = DeviceError::OutOfRange {
            zone: 9,
            zone_count: 8,
        };
        assert_eq!(e.nvme_status(), Some((0, 0x80)));
        assert_eq!(DeviceError::InvalidGeometry("x".into()).nvme_status(), None);
    }
}
