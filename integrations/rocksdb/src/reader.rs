//! [`ReadHandle`]: a file RocksDB opened for reading (`FSRandomAccessFile`,
//! `FSSequentialFile`), read by its zonefs [`FileReader`] where it can be.
//!
//! Reading by path costs every call a path lookup under the file system's state lock, a
//! buffer of its own and a copy into RocksDB's. Where the read cache is off (an `emu:` file
//! read through the page cache, `mem:`), a handle reads through the file's [`FileReader`]:
//! a range within one extent of bytes the device holds goes straight into RocksDB's buffer
//! on the calling thread (one `preadv2` on a page-cache `emu:` file, a copy on `mem:`), any
//! other by the file's id. The reader is bound at the handle's first read that finds the
//! file on the device (a file created and not written yet is only pending and reads as
//! empty); from then on the handle reads that file, also after a rename, and after a delete
//! gives its old bytes until a zone of it is reset, then `NotFound`. With the read cache on
//! (`nvme:`, `zbd:`, an `O_DIRECT` `emu:` file) reads go through the cache by path as
//! before ([`SharedFs::read_at`]): the cache is keyed by the path's generation.

use std::mem::MaybeUninit;
use std::sync::OnceLock;

use ziob_zonefs::{FileReader, FsError};

use crate::error::PluginError;
use crate::shared::SharedFs;

/// A file opened for reading by path; its [`FileReader`] is opened at the first read that
/// finds the file on the device (a file created and not yet written is only pending).
pub struct ReadHandle {
    path: String,
    file: OnceLock<FileReader>,
}

impl ReadHandle {
    /// The path it was opened by.
    pub fn path(&self) -> &str {
        &self.path
    }
}

impl SharedFs {
    /// Opens `path` for reading. The file must exist (pending counts); its extents are
    /// looked up at the first read.
    pub fn open_read(&self, path: &str) -> Result<ReadHandle, PluginError> {
        if !self.file_exists(path)? {
            return Err(PluginError::from(FsError::NotFound(path.to_string())));
        }
        Ok(ReadHandle {
            path: path.to_string(),
            file: OnceLock::new(),
        })
    }

    /// The file's reader, opened now if it was not yet; `None` while the file is not on
    /// the device (pending, or gone before the first read).
    fn file_reader<'a>(&self, r: &'a ReadHandle) -> Result<Option<&'a FileReader>, PluginError> {
        if let Some(f) = r.file.get() {
            return Ok(Some(f));
        }
        match self.fs.open_reader(&r.path) {
            Ok(f) => Ok(Some(r.file.get_or_init(|| f))),
            Err(FsError::NotFound(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Reads up to `out.len()` bytes at `offset` into `out` (fewer at the end of the file;
    /// a pending file is empty) and says how many: those, at the start of `out`, are
    /// initialised.
    pub fn read_into(
        &self,
        r: &ReadHandle,
        offset: u64,
        out: &mut [MaybeUninit<u8>],
    ) -> Result<usize, PluginError> {
        let len = out.len();
        if len == 0 {
            return Ok(0);
        }
        if self.caches_reads() {
            return self.read_cached_into(&r.path, offset, out);
        }
        // The writer's gathered appends first, as every read of the path.
        self.push(&r.path)?;
        let data = match self.file_reader(r)? {
            Some(file) => match file.read_now_into(offset, out) {
                Some(got) => return Ok(got?.len()),
                None => self.fs.read_with(file, offset, len)?,
            },
            None => self.read_at(&r.path, offset, len)?,
        };
        let n = data.len().min(len);
        out[..n].write_copy_of_slice(&data[..n]);
        Ok(n)
    }
}
