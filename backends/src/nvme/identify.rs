//! Identify over the admin passthrough ioctl (`NVME_IOCTL_ADMIN_CMD` on the char device) and
//! the fields the backend needs from each data structure.
//!
//! | CNS | CSI | structure | fields used (byte offsets) |
//! |---|---|---|---|
//! | 0x00 | - | Identify Namespace | NSZE 0..8, FLBAS 26, LBAF\[i\] 128 + 4i (LBADS bits 23:16) |
//! | 0x01 | - | Identify Controller | MDTS 77 (2^n min pages, 0 = no limit), VWC 525 bit 0 |
//! | 0x05 | 0x02 | ZNS Identify Namespace | MAR 4..8, MOR 8..12 (0-based, all ones = no limit), LBAFE\[i\] 2816 + 16i (ZSZE 0..8 in blocks) |
//! | 0x06 | 0x02 | ZNS Identify Controller | ZASL 0 (2^n min pages, 0 = MDTS) |
//!
//! The ioctls block the calling thread (microseconds on a real device; a few ms under TCG):
//! they run only while opening a device.

use std::os::fd::RawFd;

use super::cmd::{NvmeCmd, Opcode, NVME_IOCTL_ADMIN_CMD, NVME_IOCTL_ID};

/// Size of every Identify data structure in bytes.
pub const IDENTIFY_BYTES: usize = 4096;
/// The controller's minimum memory page size assumed for MDTS and ZASL, in bytes (CAP.MPSMIN
/// is not visible through the char device; Linux and QEMU use 4 KiB).
pub const MIN_PAGE_BYTES: u64 = 4096;
/// Offset of LBAFE\[0\] in the ZNS Identify Namespace, in bytes (`rsvd20[2796]` in Linux's
/// `struct nvme_id_ns_zns`).
pub const LBAFE_OFFSET_BYTES: usize = 2816;
/// Command Set Identifier of the Zoned Namespace command set.
pub const CSI_ZNS: u8 = 0x02;

/// Controller Or Namespace Structure values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Cns {
    /// Identify Namespace (NVM).
    Namespace = 0x00,
    /// Identify Controller.
    Controller = 0x01,
    /// I/O Command Set specific Identify Namespace.
    CsNamespace = 0x05,
    /// I/O Command Set specific Identify Controller.
    CsController = 0x06,
}

/// The Identify admin command for `cns`/`csi` on `nsid`, into `len_bytes` at `addr`.
pub fn identify_cmd(nsid: u32, cns: Cns, csi: u8, addr: *mut u8, len_bytes: u32) -> NvmeCmd {
    let mut c = NvmeCmd::new(Opcode::Identify, nsid).data(addr, len_bytes);
    c.cdw10 = u32::from(cns as u8);
    c.cdw11 = u32::from(csi) << 24;
    c
}

/// The namespace id of the device behind `fd` (`NVME_IOCTL_ID`).
pub fn namespace_id(fd: RawFd) -> std::io::Result<u32> {
    // SAFETY: NVME_IOCTL_ID takes no argument and only returns a number.
    let r = unsafe { libc::ioctl(fd, NVME_IOCTL_ID as _) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(r as u32)
}

/// Runs Identify `cns`/`csi` for `nsid` on `fd`; returns the 4 KiB structure.
pub fn identify(fd: RawFd, nsid: u32, cns: Cns, csi: u8) -> std::io::Result<Vec<u8>> {
    let mut data = vec![0u8; IDENTIFY_BYTES];
    let mut cmd = identify_cmd(nsid, cns, csi, data.as_mut_ptr(), IDENTIFY_BYTES as u32);
    // SAFETY: `cmd` is a valid `struct nvme_admin_cmd` whose data address points at `data`,
    // IDENTIFY_BYTES long and alive until the synchronous ioctl returns.
    let r = unsafe { libc::ioctl(fd, NVME_IOCTL_ADMIN_CMD as _, &mut cmd as *mut NvmeCmd) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if r > 0 {
        return Err(std::io::Error::other(format!(
            "Identify CNS {:#x} CSI {csi:#x} failed with NVMe status {r:#x}",
            cns as u8
        )));
    }
    Ok(data)
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// What Identify Namespace (CNS 0x00) says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamespaceInfo {
    /// Namespace size in blocks.
    pub size_blocks: u64,
    /// Index of the LBA format in use.
    pub lba_format: usize,
    /// Block size in bytes.
    pub block_size_bytes: u64,
}

/// Decodes Identify Namespace; `None` when the format in use is out of range.
pub fn parse_namespace(d: &[u8]) -> Option<NamespaceInfo> {
    let nlbaf = usize::from(d[25]) + 1;
    let flbas = d[26];
    // FLBAS bits 3:0 are the low index bits, bits 6:5 the high ones (more than 16 formats).
    let lba_format = usize::from(flbas & 0xf) | (usize::from((flbas >> 5) & 0x3) << 4);
    if lba_format >= nlbaf || lba_format >= 64 {
        return None;
    }
    let lbads = (le32(d, 128 + 4 * lba_format) >> 16) & 0xff;
    if !(9..=16).contains(&lbads) {
        return None;
    }
    Some(NamespaceInfo {
        size_blocks: le64(d, 0),
        lba_format,
        block_size_bytes: 1 << lbads,
    })
}

/// What Identify Controller (CNS 0x01) says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerInfo {
    /// Maximum Data Transfer Size in bytes (`None` = no limit).
    pub max_transfer_bytes: Option<u64>,
    /// Whether a volatile write cache is present.
    pub volatile_write_cache: bool,
}

/// Decodes Identify Controller.
pub fn parse_controller(d: &[u8]) -> ControllerInfo {
    let mdts = d[77];
    ControllerInfo {
        max_transfer_bytes: (mdts != 0).then(|| MIN_PAGE_BYTES << mdts),
        volatile_write_cache: d[525] & 1 != 0,
    }
}

/// What the ZNS Identify Namespace (CNS 0x05, CSI 0x02) says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZnsNamespaceInfo {
    /// Zone size in blocks, for the LBA format in use.
    pub zone_size_blocks: u64,
    /// Max Open Resources (`None` = no limit).
    pub max_open: Option<u32>,
    /// Max Active Resources (`None` = no limit).
    pub max_active: Option<u32>,
    /// Zone descriptor extension size in bytes.
    pub zdes_bytes: usize,
}

/// Decodes the ZNS Identify Namespace for LBA format `lba_format`.
pub fn parse_zns_namespace(d: &[u8], lba_format: usize) -> ZnsNamespaceInfo {
    // 0-based counts; all ones means no limit.
    let limit = |v: u32| (v != u32::MAX).then(|| v + 1);
    let lbafe = LBAFE_OFFSET_BYTES + 16 * lba_format;
    ZnsNamespaceInfo {
        zone_size_blocks: le64(d, lbafe),
        max_active: limit(le32(d, 4)),
        max_open: limit(le32(d, 8)),
        zdes_bytes: usize::from(d[lbafe + 8]) * 64,
    }
}

/// Zone Append Size Limit in bytes from the ZNS Identify Controller (`None` = MDTS applies).
pub fn parse_zns_controller(d: &[u8]) -> Option<u64> {
    let zasl = d[0];
    (zasl != 0).then(|| MIN_PAGE_BYTES << zasl)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_block_size_from_the_format_in_use() {
        let mut d = vec![0u8; IDENTIFY_BYTES];
        d[0..8].copy_from_slice(&32768u64.to_le_bytes());
        d[25] = 1; // two formats
        d[26] = 1; // format 1 in use
        d[128..132].copy_from_slice(&(9u32 << 16).to_le_bytes());
        d[132..136].copy_from_slice(&(12u32 << 16).to_le_bytes());
        let ns = parse_namespace(&d).unwrap();
        assert_eq!(
            ns,
            NamespaceInfo {
                size_blocks: 32768,
                lba_format: 1,
                block_size_bytes: 4096
            }
        );
        d[26] = 2; // past NLBAF
        assert_eq!(parse_namespace(&d), None);
    }

    #[test]
    fn controller_mdts_and_vwc() {
        let mut d = vec![0u8; IDENTIFY_BYTES];
        d[77] = 7;
        d[525] = 1;
        assert_eq!(
            parse_controller(&d),
            ControllerInfo {
                max_transfer_bytes: Some(512 * 1024),
                volatile_write_cache: true
            }
        );
        d[77] = 0;
        d[525] = 0;
        assert_eq!(parse_controller(&d).max_transfer_bytes, None);
    }

    #[test]
    fn zns_limits_are_zero_based_with_all_ones_unlimited() {
        let mut d = vec![0u8; IDENTIFY_BYTES];
        d[4..8].copy_from_slice(&5u32.to_le_bytes());
        d[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        d[2816 + 16..2816 + 24].copy_from_slice(&2048u64.to_le_bytes());
        d[2816 + 16 + 8] = 1;
        let z = parse_zns_namespace(&d, 1);
        assert_eq!(
            z,
            ZnsNamespaceInfo {
                zone_size_blocks: 2048,
                max_open: None,
                max_active: Some(6),
                zdes_bytes: 64
            }
        );
        let mut c = vec![0u8; IDENTIFY_BYTES];
        assert_eq!(parse_zns_controller(&c), None);
        c[0] = 5;
        assert_eq!(parse_zns_controller(&c), Some(128 * 1024));
    }

    #[test]
    fn identify_dwords() {
        let mut d = vec![0u8; IDENTIFY_BYTES];
        let c = identify_cmd(1, Cns::CsNamespace, CSI_ZNS, d.as_mut_ptr(), 4096);
        assert_eq!(
            (c.opcode, c.nsid, c.cdw10, c.cdw11),
            (0x06, 1, 0x05, 0x0200_0000)
        );
    }
}
