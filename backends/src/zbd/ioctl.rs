//! The Linux zoned block device ioctls (`<linux/blkzoned.h>`): the `#[repr(C)]` structs shared
//! with the kernel, the request numbers, and safe wrappers around them.
//!
//! Every wrapper is a *blocking* system call on the calling thread. On a ZIOB core that stalls
//! the core's ring for the duration of the call (a zone report or management command: tens of
//! microseconds to a few milliseconds). They are rare ops (reports, resets, open/close/finish),
//! never on the data path.

use std::io;
use std::os::fd::RawFd;

/// Sector size of every ioctl field, in bytes (the kernel's `SECTOR_SHIFT`, whatever the
/// device's logical block size).
pub const SECTOR_BYTES: u64 = 512;

/// `BLK_ZONE_TYPE_CONVENTIONAL`: a zone without a write pointer.
pub const BLK_ZONE_TYPE_CONVENTIONAL: u8 = 0x1;
/// `BLK_ZONE_TYPE_SEQWRITE_REQ`: sequential writes required (host-managed, ZNS).
pub const BLK_ZONE_TYPE_SEQWRITE_REQ: u8 = 0x2;
/// `BLK_ZONE_REP_CAPACITY`: the report's `capacity` fields are valid.
pub const BLK_ZONE_REP_CAPACITY: u32 = 1 << 0;

/// `struct blk_zone`: one zone descriptor of a report. Positions in 512-byte sectors.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlkZone {
    /// Zone start sector.
    pub start: u64,
    /// Zone length in sectors (the zone size).
    pub len: u64,
    /// Write pointer sector (absolute). For a Full zone the kernel reports `start + len`.
    pub wp: u64,
    /// Zone type (`BLK_ZONE_TYPE_*`).
    pub type_: u8,
    /// Zone condition (`BLK_ZONE_COND_*`; the same values as the NVMe Zone State).
    pub cond: u8,
    /// Non-sequential write resources active.
    pub non_seq: u8,
    /// Reset write pointer recommended.
    pub reset: u8,
    /// Reserved.
    pub resv: [u8; 4],
    /// Zone capacity in sectors (valid when the report has [`BLK_ZONE_REP_CAPACITY`]).
    pub capacity: u64,
    /// Reserved.
    pub reserved: [u8; 24],
}

/// `struct blk_zone_report`: the header of a `BLKREPORTZONE` buffer; `nr_zones` descriptors
/// ([`BlkZone`]) follow it in memory.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlkZoneReport {
    /// First sector to report from (in); the kernel does not change it.
    pub sector: u64,
    /// Descriptors the buffer has room for (in), descriptors filled (out).
    pub nr_zones: u32,
    /// `BLK_ZONE_REP_*` flags (out).
    pub flags: u32,
}

/// `struct blk_zone_range`: the argument of the zone management ioctls, in sectors.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlkZoneRange {
    /// First sector (a zone start).
    pub sector: u64,
    /// Length in sectors (a multiple of the zone size).
    pub nr_sectors: u64,
}

/// `_IOC(dir, type, nr, size)` of `<asm-generic/ioctl.h>`.
const fn ioc(dir: u64, nr: u64, size: usize) -> u64 {
    const TYPE_BLOCK: u64 = 0x12;
    (dir << 30) | ((size as u64) << 16) | (TYPE_BLOCK << 8) | nr
}
const IOC_WRITE: u64 = 1;
const IOC_READ: u64 = 2;

/// `BLKREPORTZONE = _IOWR(0x12, 130, struct blk_zone_report)`.
pub const BLKREPORTZONE: u64 = ioc(
    IOC_READ | IOC_WRITE,
    130,
    std::mem::size_of::<BlkZoneReport>(),
);
/// `BLKRESETZONE = _IOW(0x12, 131, struct blk_zone_range)`.
pub const BLKRESETZONE: u64 = ioc(IOC_WRITE, 131, std::mem::size_of::<BlkZoneRange>());
/// `BLKGETZONESZ = _IOR(0x12, 132, __u32)`: zone size in sectors.
pub const BLKGETZONESZ: u64 = ioc(IOC_READ, 132, std::mem::size_of::<u32>());
/// `BLKGETNRZONES = _IOR(0x12, 133, __u32)`: number of zones.
pub const BLKGETNRZONES: u64 = ioc(IOC_READ, 133, std::mem::size_of::<u32>());
/// `BLKOPENZONE = _IOW(0x12, 134, struct blk_zone_range)`.
pub const BLKOPENZONE: u64 = ioc(IOC_WRITE, 134, std::mem::size_of::<BlkZoneRange>());
/// `BLKCLOSEZONE = _IOW(0x12, 135, struct blk_zone_range)`.
pub const BLKCLOSEZONE: u64 = ioc(IOC_WRITE, 135, std::mem::size_of::<BlkZoneRange>());
/// `BLKFINISHZONE = _IOW(0x12, 136, struct blk_zone_range)`.
pub const BLKFINISHZONE: u64 = ioc(IOC_WRITE, 136, std::mem::size_of::<BlkZoneRange>());

/// Most descriptors asked for in one `BLKREPORTZONE` (64 bytes each: 64 KiB per call).
pub const REPORT_ZONES_PER_CALL_MAX: u32 = 1024;

/// A zone management command (the ioctl it is issued with).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneMgmt {
    /// `BLKRESETZONE`.
    Reset,
    /// `BLKOPENZONE`.
    Open,
    /// `BLKCLOSEZONE`.
    Close,
    /// `BLKFINISHZONE`.
    Finish,
}

impl ZoneMgmt {
    fn request(self) -> u64 {
        match self {
            ZoneMgmt::Reset => BLKRESETZONE,
            ZoneMgmt::Open => BLKOPENZONE,
            ZoneMgmt::Close => BLKCLOSEZONE,
            ZoneMgmt::Finish => BLKFINISHZONE,
        }
    }
}

fn get_u32(fd: RawFd, request: u64) -> io::Result<u32> {
    let mut value: u32 = 0;
    // SAFETY: BLKGETZONESZ and BLKGETNRZONES write one `u32` through the pointer, which points
    // to a live, writable `u32` for the duration of the call.
    let rc = unsafe { libc::ioctl(fd, request as libc::Ioctl, &mut value as *mut u32) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}

/// `BLKGETZONESZ`: the zone size in 512-byte sectors (0 for a device that is not zoned).
/// Blocks the calling thread.
pub fn zone_size_sectors(fd: RawFd) -> io::Result<u32> {
    get_u32(fd, BLKGETZONESZ)
}

/// `BLKGETNRZONES`: the number of zones (0 for a device that is not zoned). Blocks the
/// calling thread.
pub fn zone_count(fd: RawFd) -> io::Result<u32> {
    get_u32(fd, BLKGETNRZONES)
}

/// `BLKREPORTZONE`: up to `max_zones` descriptors from the zone containing `sector`, and the
/// report flags. Fewer come back at the device end. Blocks the calling thread.
pub fn report_zones(fd: RawFd, sector: u64, max_zones: u32) -> io::Result<(Vec<BlkZone>, u32)> {
    let max_zones = max_zones.min(REPORT_ZONES_PER_CALL_MAX);
    let header = std::mem::size_of::<BlkZoneReport>();
    let zone = std::mem::size_of::<BlkZone>();
    // A u64 buffer keeps the 8-byte alignment of both structs.
    let words = (header + zone * max_zones as usize).div_ceil(8);
    let mut buf = vec![0u64; words];
    let report = buf.as_mut_ptr().cast::<BlkZoneReport>();
    // SAFETY: `buf` is at least `header` bytes, 8-byte aligned and exclusively ours.
    unsafe {
        report.write(BlkZoneReport {
            sector,
            nr_zones: max_zones,
            flags: 0,
        })
    };
    // SAFETY: the buffer holds the header plus room for `nr_zones` descriptors, as the ioctl
    // requires; the kernel writes at most that many and never keeps the pointer.
    let rc = unsafe { libc::ioctl(fd, BLKREPORTZONE as libc::Ioctl, report) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the header is initialised (written above, updated by the kernel).
    let out = unsafe { report.read() };
    let filled = out.nr_zones.min(max_zones) as usize;
    // SAFETY: the descriptors start right after the 16-byte header (8-byte aligned), the
    // kernel filled `filled` of them, and all bytes of the buffer are initialised (zeroed).
    let zones =
        unsafe { std::slice::from_raw_parts(report.add(1).cast::<BlkZone>(), filled).to_vec() };
    Ok((zones, out.flags))
}

/// Issues a zone management ioctl over `nr_sectors` from `sector` (whole zones). Blocks the
/// calling thread until the device completes the command.
pub fn zone_mgmt(fd: RawFd, op: ZoneMgmt, sector: u64, nr_sectors: u64) -> io::Result<()> {
    let range = BlkZoneRange { sector, nr_sectors };
    // SAFETY: the zone management ioctls only read one `struct blk_zone_range` through the
    // pointer, which points to a live value for the duration of the call.
    let rc = unsafe {
        libc::ioctl(
            fd,
            op.request() as libc::Ioctl,
            &range as *const BlkZoneRange,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn layouts_match_linux_blkzoned_h() {
        assert_eq!(size_of::<BlkZone>(), 64);
        assert_eq!(align_of::<BlkZone>(), 8);
        assert_eq!(offset_of!(BlkZone, start), 0);
        assert_eq!(offset_of!(BlkZone, len), 8);
        assert_eq!(offset_of!(BlkZone, wp), 16);
        assert_eq!(offset_of!(BlkZone, type_), 24);
        assert_eq!(offset_of!(BlkZone, cond), 25);
        assert_eq!(offset_of!(BlkZone, non_seq), 26);
        assert_eq!(offset_of!(BlkZone, reset), 27);
        assert_eq!(offset_of!(BlkZone, resv), 28);
        assert_eq!(offset_of!(BlkZone, capacity), 32);
        assert_eq!(offset_of!(BlkZone, reserved), 40);
        assert_eq!(size_of::<BlkZoneReport>(), 16);
        assert_eq!(offset_of!(BlkZoneReport, sector), 0);
        assert_eq!(offset_of!(BlkZoneReport, nr_zones), 8);
        assert_eq!(offset_of!(BlkZoneReport, flags), 12);
        assert_eq!(size_of::<BlkZoneRange>(), 16);
        assert_eq!(offset_of!(BlkZoneRange, sector), 0);
        assert_eq!(offset_of!(BlkZoneRange, nr_sectors), 8);
    }

    #[test]
    fn request_numbers_match_linux_blkzoned_h() {
        // Values as compiled from <linux/blkzoned.h> on x86_64 / aarch64.
        assert_eq!(BLKREPORTZONE, 0xC010_1282);
        assert_eq!(BLKRESETZONE, 0x4010_1283);
        assert_eq!(BLKGETZONESZ, 0x8004_1284);
        assert_eq!(BLKGETNRZONES, 0x8004_1285);
        assert_eq!(BLKOPENZONE, 0x4010_1286);
        assert_eq!(BLKCLOSEZONE, 0x4010_1287);
        assert_eq!(BLKFINISHZONE, 0x4010_1288);
    }

    #[test]
    fn ioctls_on_a_regular_file_fail_with_enotty() {
        let f = tempfile::tempfile().unwrap();
        use std::os::fd::AsRawFd;
        let fd = f.as_raw_fd();
        assert_eq!(
            zone_count(fd).unwrap_err().raw_os_error(),
            Some(libc::ENOTTY)
        );
        assert_eq!(
            report_zones(fd, 0, 4).unwrap_err().raw_os_error(),
            Some(libc::ENOTTY)
        );
        assert_eq!(
            zone_mgmt(fd, ZoneMgmt::Reset, 0, 8)
                .unwrap_err()
                .raw_os_error(),
            Some(libc::ENOTTY)
        );
    }
}
