//! Read and write ops (plain, fixed-buffer and vectored).

use io_uring::{opcode, types};

use super::{result_len, Op};
use crate::buf::{IoBuf, IoBufMut};
use crate::error::Result;
use crate::fs::FileRef;
use crate::ring::Sqe;

/// Reads into `buf` at `offset`; fills at most `buf.bytes_total()` bytes.
pub(crate) async fn read_at<B: IoBufMut>(
    file: FileRef,
    mut buf: B,
    offset: u64,
) -> (Result<usize>, B) {
    let ptr = buf.stable_mut_ptr();
    let len = buf.bytes_total().min(u32::MAX as usize) as u32;
    let sqe = match (buf.fixed_index(), file.fixed_slot()) {
        (Some(idx), Some(slot)) => opcode::ReadFixed::new(types::Fixed(slot), ptr, len, idx)
            .offset(offset)
            .build(),
        (Some(idx), None) => opcode::ReadFixed::new(types::Fd(file.raw()), ptr, len, idx)
            .offset(offset)
            .build(),
        (None, Some(slot)) => opcode::Read::new(types::Fixed(slot), ptr, len)
            .offset(offset)
            .build(),
        (None, None) => opcode::Read::new(types::Fd(file.raw()), ptr, len)
            .offset(offset)
            .build(),
    };
    let submit = if file.is_direct() {
        Op::submit_device
    } else {
        Op::submit
    };
    // SAFETY: the entry points into `buf`'s stable memory, which the op owns.
    let op = match unsafe { submit("read", Sqe::Normal(sqe), (buf, file)) } {
        Ok(op) => op,
        Err((e, (buf, _))) => return (Err(e), buf),
    };
    let (c, (mut buf, _file)) = op.await;
    let res = result_len("read", &c);
    if let Ok(n) = res {
        // SAFETY: the kernel reported n bytes written into the buffer.
        unsafe { buf.set_init(n) };
    }
    (res, buf)
}

/// Writes `buf`'s initialised bytes at `offset`, with `pwritev2` flags `rw_flags`
/// (`RWF_*`; 0 for a plain write).
pub(crate) async fn write_at<B: IoBuf>(
    file: FileRef,
    buf: B,
    offset: u64,
    rw_flags: libc::c_int,
) -> (Result<usize>, B) {
    let ptr = buf.stable_ptr();
    let len = buf.bytes_init().min(u32::MAX as usize) as u32;
    let sqe = match (buf.fixed_index(), file.fixed_slot()) {
        (Some(idx), Some(slot)) => opcode::WriteFixed::new(types::Fixed(slot), ptr, len, idx)
            .offset(offset)
            .rw_flags(rw_flags)
            .build(),
        (Some(idx), None) => opcode::WriteFixed::new(types::Fd(file.raw()), ptr, len, idx)
            .offset(offset)
            .rw_flags(rw_flags)
            .build(),
        (None, Some(slot)) => opcode::Write::new(types::Fixed(slot), ptr, len)
            .offset(offset)
            .rw_flags(rw_flags)
            .build(),
        (None, None) => opcode::Write::new(types::Fd(file.raw()), ptr, len)
            .offset(offset)
            .rw_flags(rw_flags)
            .build(),
    };
    let submit = if file.is_direct() {
        Op::submit_device
    } else {
        Op::submit
    };
    // SAFETY: the entry points into `buf`'s stable memory, which the op owns.
    let op = match unsafe { submit("write", Sqe::Normal(sqe), (buf, file)) } {
        Ok(op) => op,
        Err((e, (buf, _))) => return (Err(e), buf),
    };
    let (c, (buf, _file)) = op.await;
    (result_len("write", &c), buf)
}

/// Vectored read into `bufs` at `offset`; returns the total bytes read.
pub(crate) async fn readv_at<B: IoBufMut>(
    file: FileRef,
    mut bufs: Vec<B>,
    offset: u64,
) -> (Result<usize>, Vec<B>) {
    let iovecs: Box<[libc::iovec]> = bufs
        .iter_mut()
        .map(|b| libc::iovec {
            iov_base: b.stable_mut_ptr().cast(),
            iov_len: b.bytes_total(),
        })
        .collect();
    let sqe = match file.fixed_slot() {
        Some(slot) => opcode::Readv::new(types::Fixed(slot), iovecs.as_ptr(), iovecs.len() as u32),
        None => opcode::Readv::new(types::Fd(file.raw()), iovecs.as_ptr(), iovecs.len() as u32),
    }
    .offset(offset)
    .build();
    // SAFETY: the iovec array is boxed and owned by the op; it points into the buffers' stable
    // memory, also owned by the op.
    let op = match unsafe { Op::submit("readv", Sqe::Normal(sqe), (bufs, iovecs, file)) } {
        Ok(op) => op,
        Err((e, (bufs, _, _))) => return (Err(e), bufs),
    };
    let (c, (mut bufs, _iov, _file)) = op.await;
    let res = result_len("readv", &c);
    if let Ok(mut n) = res {
        for b in bufs.iter_mut() {
            let take = n.min(b.bytes_total());
            // SAFETY: the kernel filled the iovecs in order; `take` bytes of this one.
            unsafe { b.set_init(take) };
            n -= take;
        }
    }
    (res, bufs)
}

/// Vectored write of `bufs` at `offset`; returns the total bytes written.
pub(crate) async fn writev_at<B: IoBuf>(
    file: FileRef,
    bufs: Vec<B>,
    offset: u64,
) -> (Result<usize>, Vec<B>) {
    let iovecs: Box<[libc::iovec]> = bufs
        .iter()
        .map(|b| libc::iovec {
            iov_base: b.stable_ptr() as *mut libc::c_void,
            iov_len: b.bytes_init(),
        })
        .collect();
    let sqe = match file.fixed_slot() {
        Some(slot) => opcode::Writev::new(types::Fixed(slot), iovecs.as_ptr(), iovecs.len() as u32),
        None => opcode::Writev::new(types::Fd(file.raw()), iovecs.as_ptr(), iovecs.len() as u32),
    }
    .offset(offset)
    .build();
    // SAFETY: as in readv_at.
    let op = match unsafe { Op::submit("writev", Sqe::Normal(sqe), (bufs, iovecs, file)) } {
        Ok(op) => op,
        Err((e, (bufs, _, _))) => return (Err(e), bufs),
    };
    let (c, (bufs, _iov, _file)) = op.await;
    (result_len("writev", &c), bufs)
}
