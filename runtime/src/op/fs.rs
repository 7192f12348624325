//! File ops: open, close, fsync/fdatasync, sync_file_range, fallocate.

use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use io_uring::{opcode, types};

use super::{result_len, Op};
use crate::error::{Error, Result};
use crate::fs::FileRef;
use crate::ring::Sqe;

/// Opens `path` with `flags` and `mode` (`openat(AT_FDCWD, ...)`).
pub(crate) async fn open(path: CString, flags: i32, mode: u32) -> Result<OwnedFd> {
    let sqe = opcode::OpenAt::new(types::Fd(libc::AT_FDCWD), path.as_ptr())
        .flags(flags | libc::O_CLOEXEC)
        .mode(mode)
        .build();
    // SAFETY: the path is a heap CString owned by the op.
    let op = unsafe { Op::submit("open", Sqe::Normal(sqe), path) }.map_err(|(e, _)| e)?;
    let (c, _path) = op.await;
    let fd = result_len("open", &c)? as RawFd;
    // SAFETY: the kernel returned a new descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Closes `fd` through the ring.
pub(crate) async fn close(fd: OwnedFd) -> Result<()> {
    use std::os::fd::IntoRawFd;
    let raw = fd.into_raw_fd();
    let sqe = opcode::Close::new(types::Fd(raw)).build();
    // SAFETY: close refers to no memory.
    match unsafe { Op::submit("close", Sqe::Normal(sqe), ()) } {
        Ok(op) => {
            let (c, ()) = op.await;
            result_len("close", &c).map(|_| ())
        }
        Err((e, ())) => {
            // SAFETY: we own `raw` and have not handed it to the kernel.
            unsafe { libc::close(raw) };
            Err(e)
        }
    }
}

/// `fsync` (`datasync = false`) or `fdatasync` (`datasync = true`).
pub(crate) async fn fsync(file: FileRef, datasync: bool) -> Result<()> {
    let name = if datasync { "fdatasync" } else { "fsync" };
    let mut b = match file.fixed_slot() {
        Some(slot) => opcode::Fsync::new(types::Fixed(slot)),
        None => opcode::Fsync::new(types::Fd(file.raw())),
    };
    if datasync {
        b = b.flags(types::FsyncFlags::DATASYNC);
    }
    // SAFETY: fsync refers to no memory; the file is kept open by the op.
    let op = unsafe { Op::submit(name, Sqe::Normal(b.build()), file) }.map_err(|(e, _)| e)?;
    let (c, _file) = op.await;
    result_len(name, &c).map(|_| ())
}

/// `sync_file_range(fd, offset, len, flags)` (`len` 0: to the end of the file).
pub(crate) async fn sync_file_range(
    file: FileRef,
    offset: u64,
    len: u32,
    flags: u32,
) -> Result<()> {
    let sqe = match file.fixed_slot() {
        Some(slot) => opcode::SyncFileRange::new(types::Fixed(slot), len),
        None => opcode::SyncFileRange::new(types::Fd(file.raw()), len),
    }
    .offset(offset)
    .flags(flags)
    .build();
    // SAFETY: sync_file_range refers to no memory; the file is kept open by the op.
    let op =
        unsafe { Op::submit("sync_file_range", Sqe::Normal(sqe), file) }.map_err(|(e, _)| e)?;
    let (c, _file) = op.await;
    result_len("sync_file_range", &c).map(|_| ())
}

/// `fallocate(fd, mode, offset, len)`.
pub(crate) async fn fallocate(file: FileRef, offset: u64, len: u64, mode: i32) -> Result<()> {
    let sqe = match file.fixed_slot() {
        Some(slot) => opcode::Fallocate::new(types::Fixed(slot), len),
        None => opcode::Fallocate::new(types::Fd(file.raw()), len),
    }
    .offset(offset)
    .mode(mode)
    .build();
    // SAFETY: fallocate refers to no memory; the file is kept open by the op.
    let op = unsafe { Op::submit("fallocate", Sqe::Normal(sqe), file) }.map_err(|(e, _)| e)?;
    let (c, _file) = op.await;
    if c.result < 0 {
        return Err(Error::from_errno("fallocate", c.result));
    }
    Ok(())
}
