//! The raw `URING_CMD` op with 128-byte SQEs and 32-byte CQEs (NVMe passthrough).

use std::os::fd::RawFd;

use super::Op;
use crate::buf::IoBufMut;
use crate::error::{Error, Result};
use crate::ring::Sqe;

/// What a `uring_cmd` completion carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UringCmdOutput {
    /// The CQE result (for NVMe: the status field, or `-errno`).
    pub result: i32,
    /// The extra 16 bytes of the 32-byte CQE (for NVMe: the completion's dwords 0–1 and 2–3).
    pub big_cqe: [u64; 2],
}

/// Sends an 80-byte command `cmd` with opcode `cmd_op` to the device behind `fd`.
///
/// `buf` is a data buffer the command's payload pointer refers to; the op owns it until the
/// completion so the device never writes into freed memory. The command bytes must only point
/// into `buf` (or to memory that outlives the op). A negative result is returned as
/// [`Error::Io`]; a positive one (an NVMe status) is returned in [`UringCmdOutput::result`].
///
/// # Safety
/// Every address inside `cmd` must point into `buf`'s memory, with lengths inside its
/// capacity; the kernel acts on them as the device command says.
pub async unsafe fn uring_cmd<B: IoBufMut>(
    fd: RawFd,
    cmd_op: u32,
    cmd: [u8; 80],
    buf: Option<B>,
) -> (Result<UringCmdOutput>, Option<B>) {
    let sqe = io_uring::opcode::UringCmd80::new(io_uring::types::Fd(fd), cmd_op)
        .cmd(cmd)
        .build();
    // SAFETY: the caller guarantees that `cmd` refers only to `buf`, which the op owns.
    let op = match unsafe { Op::submit_device("uring_cmd", Sqe::Big(Box::new(sqe)), buf) } {
        Ok(op) => op,
        Err((e, buf)) => return (Err(e), buf),
    };
    let (c, buf) = op.await;
    if c.result < 0 {
        return (Err(Error::from_errno("uring_cmd", c.result)), buf);
    }
    (
        Ok(UringCmdOutput {
            result: c.result,
            big_cqe: c.big,
        }),
        buf,
    )
}
