//! The raw `URING_CMD` op with 128-byte SQEs and 32-byte CQEs (NVMe passthrough).

use std::future::Future;

use super::Op;
use crate::buf::IoBufMut;
use crate::error::{Error, Result};
use crate::fs::{File, FileRef};
use crate::ring::Sqe;

/// What a `uring_cmd` completion carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UringCmdOutput {
    /// The CQE result (for NVMe: the status field, or `-errno`).
    pub result: i32,
    /// The extra 16 bytes of the 32-byte CQE (for NVMe: the completion's dwords 0–1 and 2–3).
    pub big_cqe: [u64; 2],
}

/// Sends an 80-byte command `cmd` with opcode `cmd_op` to the device behind `file`.
///
/// The op keeps `file` open until the completion (it holds a reference to the descriptor,
/// like every op on a [`File`]): dropping every `File` handle, or the future, while the
/// command is queued can never let it reach a closed or reused descriptor number. The
/// returned future does not borrow `file`. When it is first polled on the core that
/// registered the file ([`File::register`]), the command uses the fixed file slot.
///
/// `buf` is a data buffer the command's payload pointer refers to; the op owns it until the
/// completion so the device never writes into freed memory. A negative result is returned as
/// [`Error::Io`]; a positive one (an NVMe status) is returned in [`UringCmdOutput::result`].
///
/// # Safety
/// Every address inside `cmd` must point into `buf`'s memory, with lengths inside its
/// capacity; the kernel acts on them as the device command says.
pub unsafe fn uring_cmd<B: IoBufMut>(
    file: &File,
    cmd_op: u32,
    cmd: [u8; 80],
    buf: Option<B>,
) -> impl Future<Output = (Result<UringCmdOutput>, Option<B>)> + 'static {
    let file = file.clone();
    // SAFETY: forwarded from the caller's contract.
    unsafe { submit(file, cmd_op, cmd, buf) }
}

/// # Safety
/// As [`uring_cmd`].
async unsafe fn submit<B: IoBufMut>(
    file: File,
    cmd_op: u32,
    cmd: [u8; 80],
    buf: Option<B>,
) -> (Result<UringCmdOutput>, Option<B>) {
    // Resolved where the entry is pushed: the future may have moved to another core since it
    // was made, and a fixed slot is valid only on its own ring.
    let file: FileRef = file.op_ref();
    let sqe = match file.fixed_slot() {
        Some(slot) => io_uring::opcode::UringCmd80::new(io_uring::types::Fixed(slot), cmd_op),
        None => io_uring::opcode::UringCmd80::new(io_uring::types::Fd(file.raw()), cmd_op),
    }
    .cmd(cmd)
    .build();
    // SAFETY: the caller guarantees that `cmd` refers only to `buf`; the op owns `buf` and
    // the file (so the descriptor or slot the entry names stays open) until the completion.
    let op = match unsafe { Op::submit_device("uring_cmd", Sqe::Big(Box::new(sqe)), (buf, file)) } {
        Ok(op) => op,
        Err((e, (buf, _))) => return (Err(e), buf),
    };
    let (c, (buf, _file)) = op.await;
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

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;
    use std::task::Poll;

    use crate::{DmaBuf, File, Runtime};

    fn fd_is_open(fd: i32) -> bool {
        // SAFETY: F_GETFD only queries the descriptor table; no memory involved.
        unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
    }

    /// Whether descriptor `fd` is open on `path`. Once this test closes a number, another
    /// test on a parallel thread may open a file and get it: only the number still naming
    /// `path` shows a leak.
    fn fd_names(fd: i32, path: &std::path::Path) -> bool {
        let path = std::fs::canonicalize(path).unwrap();
        std::fs::read_link(format!("/proc/self/fd/{fd}")).is_ok_and(|p| p == path)
    }

    /// A command queued when the last `File` handle is dropped still has its descriptor:
    /// the number stays open (and is not reused by a new open) until the completion.
    #[test]
    fn a_queued_command_keeps_its_file_open() {
        let rt = Runtime::builder().cores(1).sqe128(true).build().unwrap();
        rt.block_on(|| async {
            let dir = tempfile::tempdir().unwrap();
            for round in 0..20 {
                let path = dir.path().join(format!("f{round}"));
                let file = File::from_std(std::fs::File::create(&path).unwrap());
                let raw = file.as_raw_fd();
                assert!(
                    fd_names(raw, &path),
                    "the leak check cannot see an open descriptor"
                );
                if round % 2 == 1 {
                    assert!(file.register().unwrap());
                }
                // SAFETY: the command carries no address (a regular file does not even
                // support uring_cmd: the kernel refuses it).
                let mut cmd =
                    Box::pin(unsafe { super::uring_cmd::<DmaBuf>(&file, 0, [0; 80], None) });
                assert!(matches!(futures::poll!(cmd.as_mut()), Poll::Pending));
                drop(file);
                assert!(
                    fd_is_open(raw),
                    "the queued command's descriptor was closed"
                );
                let other = std::fs::File::open(&path).unwrap();
                assert_ne!(other.as_raw_fd(), raw, "the descriptor number was reused");
                drop(other);
                let (res, _) = cmd.await;
                assert!(res.is_err(), "a regular file accepted a uring_cmd");
                assert!(
                    !fd_names(raw, &path),
                    "the descriptor leaked after the completion"
                );
            }
        })
        .unwrap();
    }
}
