//! NVMe passthrough commands: the kernel's `struct nvme_uring_cmd` / `struct nvme_passthru_cmd`
//! (same 72-byte layout) and builders for the I/O commands the `nvme` backend issues.
//!
//! Building a command is safe; submitting it ([`ziob_runtime::uring_cmd`] or the admin ioctl)
//! is the unsafe boundary, whose caller guarantees the data address points into the buffer the
//! op owns.

/// `_IOWR('N', 0x80, struct nvme_uring_cmd)`: the io_uring `cmd_op` of an NVMe I/O command on a
/// generic char device (`/dev/ngXnY`).
pub const NVME_URING_CMD_IO: u32 = ioc(IOC_READ | IOC_WRITE, b'N', 0x80, NVME_CMD_SIZE_BYTES);
/// `_IOWR('N', 0x41, struct nvme_admin_cmd)`: synchronous admin passthrough ioctl.
pub const NVME_IOCTL_ADMIN_CMD: u32 = ioc(IOC_READ | IOC_WRITE, b'N', 0x41, NVME_CMD_SIZE_BYTES);
/// `_IO('N', 0x40)`: returns the namespace id of the char/block device it is issued on.
pub const NVME_IOCTL_ID: u32 = ioc(0, b'N', 0x40, 0);

/// Size of `struct nvme_uring_cmd` / `struct nvme_passthru_cmd` in bytes.
pub const NVME_CMD_SIZE_BYTES: usize = 72;
/// Size of the command area of a 128-byte SQE in bytes (what `uring_cmd` takes).
pub const SQE_CMD_AREA_BYTES: usize = 80;

const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// Linux `_IOC(dir, type, nr, size)` (asm-generic layout: x86, arm64, riscv).
const fn ioc(dir: u32, ty: u8, nr: u8, size: usize) -> u32 {
    (dir << 30) | ((size as u32) << 16) | ((ty as u32) << 8) | nr as u32
}

/// NVM command set opcodes (and the Zoned Namespace ones) the backend uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Opcode {
    /// Flush (0x00): makes completed writes durable.
    Flush = 0x00,
    /// Write (0x01).
    Write = 0x01,
    /// Read (0x02).
    Read = 0x02,
    /// Zone Management Send (0x79): open, close, finish, reset, offline.
    ZoneMgmtSend = 0x79,
    /// Zone Management Receive (0x7a): report zones.
    ZoneMgmtRecv = 0x7a,
    /// Zone Append (0x7d): write at the write pointer of the zone starting at the SLBA.
    ZoneAppend = 0x7d,
    /// Identify (admin 0x06).
    Identify = 0x06,
}

/// `struct nvme_uring_cmd` (and, with `rsvd2` = `result`, `struct nvme_passthru_cmd`), as in
/// `include/uapi/linux/nvme_ioctl.h`. `addr` and `data_len` describe the one data buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct NvmeCmd {
    /// Command opcode.
    pub opcode: u8,
    /// Command flags (unused: 0).
    pub flags: u8,
    /// Reserved.
    pub rsvd1: u16,
    /// Namespace id.
    pub nsid: u32,
    /// Command dword 2.
    pub cdw2: u32,
    /// Command dword 3.
    pub cdw3: u32,
    /// Metadata buffer address (unused: 0).
    pub metadata: u64,
    /// Data buffer address (user space).
    pub addr: u64,
    /// Metadata length in bytes.
    pub metadata_len: u32,
    /// Data length in bytes.
    pub data_len: u32,
    /// Command dword 10.
    pub cdw10: u32,
    /// Command dword 11.
    pub cdw11: u32,
    /// Command dword 12.
    pub cdw12: u32,
    /// Command dword 13.
    pub cdw13: u32,
    /// Command dword 14.
    pub cdw14: u32,
    /// Command dword 15.
    pub cdw15: u32,
    /// Timeout in ms (0 = the driver's default).
    pub timeout_ms: u32,
    /// Reserved for uring commands; the completion dword 0 for the admin ioctl.
    pub rsvd2: u32,
}

const _: () = assert!(std::mem::size_of::<NvmeCmd>() == NVME_CMD_SIZE_BYTES);
const _: () = assert!(NVME_CMD_SIZE_BYTES <= SQE_CMD_AREA_BYTES);

impl NvmeCmd {
    /// A command with `opcode` for namespace `nsid`, every other field zero.
    pub fn new(opcode: Opcode, nsid: u32) -> NvmeCmd {
        NvmeCmd {
            opcode: opcode as u8,
            nsid,
            ..NvmeCmd::default()
        }
    }

    /// Sets the starting LBA (dwords 10–11).
    pub fn slba(mut self, lba: u64) -> NvmeCmd {
        self.cdw10 = lba as u32;
        self.cdw11 = (lba >> 32) as u32;
        self
    }

    /// Sets the number of logical blocks (dword 12 bits 15:0, 0-based). `blocks` is 1-based
    /// and at most 65536.
    pub fn blocks(mut self, blocks: u32) -> NvmeCmd {
        assert!(
            (1..=1 << 16).contains(&blocks),
            "NLB {blocks} outside 1..=65536"
        );
        self.cdw12 = (self.cdw12 & !0xffff) | (blocks - 1);
        self
    }

    /// Sets Force Unit Access (dword 12 bit 30): the written data is durable (in
    /// non-volatile media) when the command completes.
    pub fn fua(mut self) -> NvmeCmd {
        self.cdw12 |= 1 << 30;
        self
    }

    /// Sets the data buffer: `addr` (a user-space address) and `len_bytes`.
    pub fn data(mut self, addr: *const u8, len_bytes: u32) -> NvmeCmd {
        self.addr = addr as u64;
        self.data_len = len_bytes;
        self
    }

    /// The command as the 80-byte SQE command area (the 72 bytes, then zeros).
    pub fn to_sqe_cmd(&self) -> [u8; SQE_CMD_AREA_BYTES] {
        let mut out = [0u8; SQE_CMD_AREA_BYTES];
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            out[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        // Native endianness: the kernel reads the struct as its own memory.
        put(&[self.opcode, self.flags]);
        put(&self.rsvd1.to_ne_bytes());
        for d in [self.nsid, self.cdw2, self.cdw3] {
            put(&d.to_ne_bytes());
        }
        put(&self.metadata.to_ne_bytes());
        put(&self.addr.to_ne_bytes());
        for d in [
            self.metadata_len,
            self.data_len,
            self.cdw10,
            self.cdw11,
            self.cdw12,
            self.cdw13,
            self.cdw14,
            self.cdw15,
            self.timeout_ms,
            self.rsvd2,
        ] {
            put(&d.to_ne_bytes());
        }
        out
    }
}

/// Read `blocks` blocks at `slba` into `addr`.
pub fn read(nsid: u32, slba: u64, blocks: u32, addr: *mut u8, len_bytes: u32) -> NvmeCmd {
    NvmeCmd::new(Opcode::Read, nsid)
        .slba(slba)
        .blocks(blocks)
        .data(addr, len_bytes)
}

/// Write `blocks` blocks from `addr` at `slba`.
pub fn write(nsid: u32, slba: u64, blocks: u32, addr: *const u8, len_bytes: u32) -> NvmeCmd {
    NvmeCmd::new(Opcode::Write, nsid)
        .slba(slba)
        .blocks(blocks)
        .data(addr, len_bytes)
}

/// Zone Append of `blocks` blocks from `addr` to the zone starting at `zslba`.
pub fn zone_append(nsid: u32, zslba: u64, blocks: u32, addr: *const u8, len_bytes: u32) -> NvmeCmd {
    NvmeCmd::new(Opcode::ZoneAppend, nsid)
        .slba(zslba)
        .blocks(blocks)
        .data(addr, len_bytes)
}

/// Flush of namespace `nsid`.
pub fn flush(nsid: u32) -> NvmeCmd {
    NvmeCmd::new(Opcode::Flush, nsid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn layout_matches_the_kernel_struct() {
        assert_eq!(std::mem::size_of::<NvmeCmd>(), 72);
        assert_eq!(std::mem::align_of::<NvmeCmd>(), 8);
        let offsets = [
            (offset_of!(NvmeCmd, opcode), 0),
            (offset_of!(NvmeCmd, flags), 1),
            (offset_of!(NvmeCmd, rsvd1), 2),
            (offset_of!(NvmeCmd, nsid), 4),
            (offset_of!(NvmeCmd, cdw2), 8),
            (offset_of!(NvmeCmd, cdw3), 12),
            (offset_of!(NvmeCmd, metadata), 16),
            (offset_of!(NvmeCmd, addr), 24),
            (offset_of!(NvmeCmd, metadata_len), 32),
            (offset_of!(NvmeCmd, data_len), 36),
            (offset_of!(NvmeCmd, cdw10), 40),
            (offset_of!(NvmeCmd, cdw11), 44),
            (offset_of!(NvmeCmd, cdw12), 48),
            (offset_of!(NvmeCmd, cdw13), 52),
            (offset_of!(NvmeCmd, cdw14), 56),
            (offset_of!(NvmeCmd, cdw15), 60),
            (offset_of!(NvmeCmd, timeout_ms), 64),
            (offset_of!(NvmeCmd, rsvd2), 68),
        ];
        for (got, want) in offsets {
            assert_eq!(got, want);
        }
    }

    #[test]
    fn ioctl_numbers_match_linux() {
        assert_eq!(NVME_URING_CMD_IO, 0xC048_4E80);
        assert_eq!(NVME_IOCTL_ADMIN_CMD, 0xC048_4E41);
        assert_eq!(NVME_IOCTL_ID, 0x4E40);
    }

    #[test]
    fn sqe_bytes_are_the_struct_bytes() {
        let buf = [0u8; 8];
        let c = write(1, 0x1_0000_0002, 3, buf.as_ptr(), 12288);
        let bytes = c.to_sqe_cmd();
        // SAFETY: NvmeCmd is repr(C), 72 bytes, plain integers without padding (the layout
        // test pins every offset), so viewing it as bytes is sound.
        let raw: [u8; 72] = unsafe { std::mem::transmute(c) };
        assert_eq!(bytes[..72], raw[..]);
        assert!(bytes[72..].iter().all(|&b| b == 0));
        assert_eq!(bytes[0], 0x01, "opcode");
        assert_eq!(
            u32::from_ne_bytes(bytes[4..8].try_into().unwrap()),
            1,
            "nsid"
        );
        assert_eq!(
            u32::from_ne_bytes(bytes[40..44].try_into().unwrap()),
            2,
            "slba low"
        );
        assert_eq!(
            u32::from_ne_bytes(bytes[44..48].try_into().unwrap()),
            1,
            "slba high"
        );
        assert_eq!(
            u32::from_ne_bytes(bytes[48..52].try_into().unwrap()),
            2,
            "nlb 0-based"
        );
        assert_eq!(u32::from_ne_bytes(bytes[36..40].try_into().unwrap()), 12288);
    }

    #[test]
    #[should_panic(expected = "NLB 0 outside")]
    fn zero_blocks_is_a_bug() {
        let _ = NvmeCmd::new(Opcode::Read, 1).blocks(0);
    }
}
