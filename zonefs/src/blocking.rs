//! [`BlockingZoneFs`]: the file operations as plain blocking calls, for threads that are not
//! async (a storage engine's own threads, FFI callers).

use std::future::Future;

use bytes::Bytes;
use ziob::ZiobError;

use crate::error::{FsError, Result};
use crate::fs::ZoneFs;
use crate::fsck::FsckReport;
use crate::gc::{FsStats, GcReport};
use crate::lifetime::WriteLifetime;
use crate::reader::FileReader;
use crate::space::SpaceUsage;

/// [`ZoneFs`]'s operations as blocking calls. Each blocks the calling thread until the
/// operation is done; it may be made from any thread that is not a ZIOB core (there it fails at
/// once with [`ZiobError::BlockingOnCore`]: it would wait for the very core it blocks). Avoid
/// it on the worker threads of an async executor: use [`ZoneFs`] there. Semantics, durability
/// and errors are those of the [`ZoneFs`] method of the same name.
#[derive(Clone, Debug)]
pub struct BlockingZoneFs {
    fs: ZoneFs,
}

/// Blocks on `fut` unless this thread is a ZIOB core.
fn wait<T>(op: &'static str, fut: impl Future<Output = Result<T>>) -> Result<T> {
    if ziob::runtime::on_core() {
        return Err(FsError::Ziob(ZiobError::BlockingOnCore { op }));
    }
    futures::executor::block_on(fut)
}

impl BlockingZoneFs {
    /// The blocking form of `fs`.
    pub fn new(fs: ZoneFs) -> BlockingZoneFs {
        BlockingZoneFs { fs }
    }

    /// The async file system this wraps.
    pub fn fs(&self) -> &ZoneFs {
        &self.fs
    }

    /// See [`ZoneFs::create`].
    pub fn create(&self, path: &str, lifetime: WriteLifetime) -> Result<()> {
        wait("zonefs create", self.fs.create(path, lifetime))
    }

    /// See [`ZoneFs::create_unsynced`].
    pub fn create_unsynced(&self, path: &str, lifetime: WriteLifetime) -> Result<()> {
        wait("zonefs create", self.fs.create_unsynced(path, lifetime))
    }

    /// See [`ZoneFs::sync_metadata`].
    pub fn sync_metadata(&self) -> Result<()> {
        wait("zonefs sync_metadata", self.fs.sync_metadata())
    }

    /// See [`ZoneFs::append`].
    pub fn append(&self, path: &str, data: &[u8]) -> Result<()> {
        wait("zonefs append", self.fs.append(path, data))
    }

    /// See [`ZoneFs::append_bytes`].
    pub fn append_bytes(&self, path: &str, data: Bytes) -> Result<()> {
        wait("zonefs append", self.fs.append_bytes(path, data))
    }

    /// See [`ZoneFs::append_at`].
    pub fn append_at(&self, path: &str, data: Bytes) -> Result<u64> {
        wait("zonefs append", self.fs.append_at(path, data))
    }

    /// See [`ZoneFs::sync`].
    pub fn sync(&self, path: &str) -> Result<()> {
        wait("zonefs sync", self.fs.sync(path))
    }

    /// See [`ZoneFs::sync_all`].
    pub fn sync_all(&self) -> Result<()> {
        wait("zonefs sync_all", self.fs.sync_all())
    }

    /// See [`ZoneFs::read_at`].
    pub fn read_at(&self, path: &str, offset: u64, len: usize) -> Result<Bytes> {
        wait("zonefs read_at", self.fs.read_at(path, offset, len))
    }

    /// See [`ZoneFs::open_reader`].
    pub fn open_reader(&self, path: &str) -> Result<FileReader> {
        wait("zonefs open_reader", self.fs.open_reader(path))
    }

    /// See [`FileReader::read_at`].
    pub fn read_with(&self, reader: &FileReader, offset: u64, len: usize) -> Result<Bytes> {
        wait("zonefs FileReader::read_at", reader.read_at(offset, len))
    }

    /// See [`ZoneFs::size`].
    pub fn size(&self, path: &str) -> Result<u64> {
        wait("zonefs size", self.fs.size(path))
    }

    /// See [`ZoneFs::exists`].
    pub fn exists(&self, path: &str) -> Result<bool> {
        wait("zonefs exists", self.fs.exists(path))
    }

    /// See [`ZoneFs::delete`].
    pub fn delete(&self, path: &str) -> Result<()> {
        wait("zonefs delete", self.fs.delete(path))
    }

    /// See [`ZoneFs::rename`].
    pub fn rename(&self, from: &str, to: &str) -> Result<()> {
        wait("zonefs rename", self.fs.rename(from, to))
    }

    /// See [`ZoneFs::list`].
    pub fn list(&self, dir: &str) -> Result<Vec<String>> {
        wait("zonefs list", self.fs.list(dir))
    }

    /// See [`ZoneFs::fsck`].
    pub fn fsck(&self) -> Result<FsckReport> {
        wait("zonefs fsck", self.fs.fsck())
    }

    /// See [`ZoneFs::gc`].
    pub fn gc(&self, max_victims: usize) -> Result<GcReport> {
        wait("zonefs gc", self.fs.gc(max_victims))
    }

    /// See [`ZoneFs::stats`].
    pub fn stats(&self) -> Result<FsStats> {
        wait("zonefs stats", async { Ok(self.fs.stats().await) })
    }

    /// See [`ZoneFs::df`].
    pub fn df(&self) -> Result<SpaceUsage> {
        wait("zonefs df", async { Ok(self.fs.df().await) })
    }
}

impl ZoneFs {
    /// The blocking form of this file system, for plain threads and FFI callers.
    pub fn blocking(&self) -> BlockingZoneFs {
        BlockingZoneFs::new(self.clone())
    }
}
