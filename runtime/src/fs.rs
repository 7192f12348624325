//! Files driven through the core's ring.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::buf::{IoBuf, IoBufMut};
use crate::error::{Error, Result};
use crate::op;
use crate::registry::{self, FixedFile};

/// Registered file slots per core.
pub const FIXED_FILE_SLOTS: u32 = 1024;

/// How to open a file (the `open(2)` flags that matter for ZIOB).
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    create: bool,
    truncate: bool,
    direct: bool,
    custom_flags: i32,
    mode: u32,
}

impl OpenOptions {
    /// No access; set what you need.
    pub fn new() -> Self {
        OpenOptions {
            mode: 0o644,
            ..Default::default()
        }
    }
    /// Open for reading.
    pub fn read(mut self, on: bool) -> Self {
        self.read = on;
        self
    }
    /// Open for writing.
    pub fn write(mut self, on: bool) -> Self {
        self.write = on;
        self
    }
    /// Create if missing.
    pub fn create(mut self, on: bool) -> Self {
        self.create = on;
        self
    }
    /// Truncate to zero length.
    pub fn truncate(mut self, on: bool) -> Self {
        self.truncate = on;
        self
    }
    /// `O_DIRECT`: bypass the page cache (buffers, offsets and lengths must be aligned to the
    /// logical block size; [`DmaBuf`](crate::DmaBuf) is 4 KiB aligned).
    pub fn direct(mut self, on: bool) -> Self {
        self.direct = on;
        self
    }
    /// Extra `open(2)` flags.
    pub fn custom_flags(mut self, flags: i32) -> Self {
        self.custom_flags = flags;
        self
    }
    /// Permission bits for a created file.
    pub fn mode(mut self, mode: u32) -> Self {
        self.mode = mode;
        self
    }
    fn flags(&self) -> i32 {
        let acc = match (self.read, self.write) {
            (true, true) => libc::O_RDWR,
            (false, true) => libc::O_WRONLY,
            _ => libc::O_RDONLY,
        };
        let mut f = acc | self.custom_flags;
        if self.create {
            f |= libc::O_CREAT;
        }
        if self.truncate {
            f |= libc::O_TRUNC;
        }
        if self.direct {
            f |= libc::O_DIRECT;
        }
        f
    }
    /// Opens `path` through the ring of the current core.
    pub async fn open(&self, path: impl AsRef<Path>) -> Result<File> {
        let c = CString::new(path.as_ref().as_os_str().as_bytes()).map_err(|_| Error::Io {
            op: "open",
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "path contains a NUL byte",
            ),
        })?;
        let fd = op::fs::open(c, self.flags(), self.mode).await?;
        Ok(File::from_fd(fd))
    }
}

struct FileInner {
    /// The registration, if any; declared before `fd` so that it is undone first.
    fixed: OnceLock<FixedFile>,
    fd: OwnedFd,
    /// Opened with O_DIRECT: its I/O waits on the device (see `SubmitPolicy::Adaptive`).
    direct: bool,
}

/// A file owned by ZIOB; cheap to clone (shared descriptor). Ops on it run on the current core.
///
/// Every in-flight op holds a reference to the descriptor, so dropping the `File` (or an op
/// future) can never let an op hit a reused descriptor number.
#[derive(Clone)]
pub struct File {
    inner: Arc<FileInner>,
}

/// What an op keeps of a file: the descriptor, alive until the completion.
#[derive(Clone)]
pub(crate) struct FileRef {
    inner: Arc<FileInner>,
    slot: Option<u32>,
}

impl FileRef {
    pub(crate) fn raw(&self) -> RawFd {
        self.inner.fd.as_raw_fd()
    }
    pub(crate) fn fixed_slot(&self) -> Option<u32> {
        self.slot
    }
    pub(crate) fn is_direct(&self) -> bool {
        self.inner.direct
    }
}

impl std::fmt::Debug for File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("File")
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}

impl File {
    /// Opens `path` read-write (no create) on the current core.
    pub async fn open(path: impl AsRef<Path>) -> Result<File> {
        OpenOptions::new().read(true).write(true).open(path).await
    }

    /// Wraps an already open descriptor.
    pub fn from_fd(fd: OwnedFd) -> File {
        // SAFETY: F_GETFL on a descriptor we own reads its status flags; no memory involved.
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        let direct = flags >= 0 && flags & libc::O_DIRECT != 0;
        File {
            inner: Arc::new(FileInner {
                direct,
                fd,
                fixed: OnceLock::new(),
            }),
        }
    }

    /// Wraps a `std::fs::File`.
    pub fn from_std(f: std::fs::File) -> File {
        File::from_fd(f.into())
    }

    pub(crate) fn op_ref(&self) -> FileRef {
        // Only on the ring that holds the registration; elsewhere the plain descriptor.
        let slot = self.inner.fixed.get().and_then(FixedFile::slot_here);
        FileRef {
            inner: self.inner.clone(),
            slot,
        }
    }

    /// Registers the descriptor with the current core's ring, so ops on this core skip the
    /// kernel's per-op file lookup. Returns false when the file is registered already (with
    /// this or another core's ring) or no slot is free; ops work either way. The
    /// registration is used only on the core that made it (other cores, and other runtimes'
    /// cores, use the descriptor) and is undone when the last handle is dropped, on any
    /// thread.
    pub fn register(&self) -> Result<bool> {
        if self.inner.fixed.get().is_some() {
            return Ok(false);
        }
        let Some(fixed) = registry::register_file(self.as_raw_fd())? else {
            return Ok(false);
        };
        // Another core may have registered it meanwhile: then `fixed` is undone on drop.
        Ok(self.inner.fixed.set(fixed).is_ok())
    }

    /// Reads into `buf` (up to its capacity) at `offset`; returns the bytes read and the buffer.
    pub async fn read_at<B: IoBufMut>(&self, buf: B, offset: u64) -> (Result<usize>, B) {
        op::rw::read_at(self.op_ref(), buf, offset).await
    }

    /// Writes `buf`'s bytes at `offset`; returns the bytes written and the buffer.
    pub async fn write_at<B: IoBuf>(&self, buf: B, offset: u64) -> (Result<usize>, B) {
        op::rw::write_at(self.op_ref(), buf, offset, 0).await
    }

    /// [`write_at`](File::write_at) with `RWF_DSYNC`: the bytes are durable when it returns
    /// (on a block device with a volatile write cache the kernel sends the write with Force
    /// Unit Access where the device has it, else a write and a cache flush). It promises
    /// nothing about other writes.
    pub async fn write_dsync_at<B: IoBuf>(&self, buf: B, offset: u64) -> (Result<usize>, B) {
        op::rw::write_at(self.op_ref(), buf, offset, libc::RWF_DSYNC).await
    }

    /// Vectored read at `offset`.
    pub async fn readv_at<B: IoBufMut>(
        &self,
        bufs: Vec<B>,
        offset: u64,
    ) -> (Result<usize>, Vec<B>) {
        op::rw::readv_at(self.op_ref(), bufs, offset).await
    }

    /// Vectored write at `offset`.
    pub async fn writev_at<B: IoBuf>(&self, bufs: Vec<B>, offset: u64) -> (Result<usize>, Vec<B>) {
        op::rw::writev_at(self.op_ref(), bufs, offset).await
    }

    /// Writes all of `buf` at `offset`, continuing after short writes.
    pub async fn write_all_at(
        &self,
        buf: crate::DmaBuf,
        offset: u64,
    ) -> (Result<()>, crate::DmaBuf) {
        let total = buf.len();
        let (res, buf) = self.write_at(buf, offset).await;
        match res {
            Ok(n) if n == total => (Ok(()), buf),
            Ok(0) => (
                Err(Error::Io {
                    op: "write",
                    source: std::io::Error::new(std::io::ErrorKind::WriteZero, "wrote 0 bytes"),
                }),
                buf,
            ),
            Ok(n) => {
                let rest = crate::DmaBuf::from_slice(&buf[n..]);
                let (res, _) = Box::pin(self.write_all_at(rest, offset + n as u64)).await;
                (res, buf)
            }
            Err(e) => (Err(e), buf),
        }
    }

    /// `fsync`: data and metadata durable.
    pub async fn sync_all(&self) -> Result<()> {
        op::fs::fsync(self.op_ref(), false).await
    }

    /// `fdatasync`: data durable.
    pub async fn sync_data(&self) -> Result<()> {
        op::fs::fsync(self.op_ref(), true).await
    }

    /// Starts writing the page cache's dirty pages of `len` bytes at `offset` back to the
    /// disk (`sync_file_range` with `SYNC_FILE_RANGE_WRITE`) and returns once that is under
    /// way. It makes nothing durable (no wait for the writes, no metadata, no cache flush):
    /// it spreads over time the write-back a later `fdatasync` would otherwise do all at
    /// once, and leaves any write-back error for that `fdatasync` to report (it does not
    /// wait, so it consumes none). `len` 0 means to the end of the file.
    pub async fn start_write_back(&self, offset: u64, len: u32) -> Result<()> {
        op::fs::sync_file_range(self.op_ref(), offset, len, libc::SYNC_FILE_RANGE_WRITE).await
    }

    /// `fallocate(mode, offset, len)` (mode 0 allocates and extends the file).
    pub async fn fallocate(&self, offset: u64, len: u64, mode: i32) -> Result<()> {
        op::fs::fallocate(self.op_ref(), offset, len, mode).await
    }

    /// Closes the descriptor through the ring if this is the last handle to it.
    pub async fn close(self) -> Result<()> {
        match Arc::try_unwrap(self.inner) {
            Ok(FileInner { fd, fixed, .. }) => {
                drop(fixed); // empties the slot before the descriptor goes away
                op::fs::close(fd).await
            }
            Err(_) => Ok(()),
        }
    }
}

impl AsRawFd for File {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.fd.as_raw_fd()
    }
}
