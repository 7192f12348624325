//! [`FileReader`]: a file opened for reading, whose reads skip the path lookup and the file
//! system's state lock while its zones are not reset.
//!
//! [`ZoneFs::read_at`] looks the path up under the state lock on every call (RocksDB reads a
//! table thousands of times a second, each time through the lock its writers and garbage
//! collection take too). A reader takes the file's extents once, with the reset count of
//! each one's zone ([`ExtentView`]), and reads through them until a count moves: the bytes
//! of a zone change only when it is reset, and a file only grows, so bytes read through an
//! unchanged view are the file's. When a count moved (a delete, a rename over the file or a
//! garbage-collection relocation reset one of its zones), or the read goes past the size the
//! view knows, the reader takes a fresh view by the file's id and reads again.
//!
//! A reader follows its file, not its path: after a rename it reads the renamed file, after
//! a delete it reads the deleted file's bytes while none of its zones was reset (as an open
//! POSIX file descriptor does), then gives [`FsError::NotFound`].

use std::mem::MaybeUninit;
use std::sync::{Arc, RwLock};

use bytes::Bytes;

use crate::error::{FsError, Result};
use crate::fs::ExtentView;
use crate::ZoneFs;

/// A file opened for reading ([`ZoneFs::open_reader`]); `Send + Sync`, so one reader may be
/// shared by threads.
pub struct FileReader {
    fs: ZoneFs,
    id: u64,
    /// The path it was opened by (named in errors).
    path: String,
    view: RwLock<Arc<ExtentView>>,
}

impl std::fmt::Debug for FileReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileReader")
            .field("path", &self.path)
            .field("id", &self.id)
            .finish()
    }
}

impl ZoneFs {
    /// Opens the file at `path` for reading ([`FileReader`]).
    pub async fn open_reader(&self, path: &str) -> Result<FileReader> {
        let (id, view) = self.open_view(path).await?;
        Ok(FileReader {
            fs: self.clone(),
            id,
            path: path.to_string(),
            view: RwLock::new(Arc::new(view)),
        })
    }
}

impl FileReader {
    /// The path the reader was opened by.
    pub fn path(&self) -> &str {
        &self.path
    }

    fn view(&self) -> Arc<ExtentView> {
        self.view.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set_view(&self, view: Arc<ExtentView>) {
        *self.view.write().unwrap_or_else(|p| p.into_inner()) = view;
    }

    /// Reads up to `len` bytes at `offset` (fewer at the end of the file), as
    /// [`ZoneFs::read_at`] does, of this reader's file.
    pub async fn read_at(&self, offset: u64, len: usize) -> Result<Bytes> {
        self.fs.check_journal_now()?;
        let end = offset.saturating_add(len as u64);
        let mut view = self.view();
        loop {
            let mut range = view.covering(offset, end);
            if end > view.size() || !self.fs.extents_unchanged(&view, range.clone()) {
                // The file may have grown, or a zone of it moved: look it up by id.
                view = Arc::new(self.fs.view_of(self.id, &self.path).await?);
                self.set_view(view.clone());
                range = view.covering(offset, end);
            }
            // One piece per extent of the range, in order: their counts are the view's.
            let pieces = view.pieces(range.clone(), offset, end);
            let seen = &view.resets[range];
            if let Some(res) = self.fs.read_checked(&pieces, seen).await {
                return res;
            }
        }
    }

    /// Reads `out.len()` bytes at `offset` into `out` at once on the calling thread, given
    /// back initialised, when that needs no wait (see [`ziob::Client::read_now_into`]) and
    /// the range lies in one extent of what the reader knows of the file (a table's block
    /// does; extents are as long as the appends that made them). `None` otherwise — then
    /// read with [`read_at`](Self::read_at), which also reads past the end of the file —
    /// and nothing is promised of `out`.
    pub fn read_now_into<'a>(
        &self,
        offset: u64,
        out: &'a mut [MaybeUninit<u8>],
    ) -> Option<Result<&'a mut [u8]>> {
        if self.fs.reads_whole_blocks() {
            return None;
        }
        if let Err(e) = self.fs.check_journal_now() {
            return Some(Err(e));
        }
        let view = self.view.read().unwrap_or_else(|p| p.into_inner());
        let end = offset.checked_add(out.len() as u64)?;
        if end > view.size() {
            return None;
        }
        let range = view.covering(offset, end);
        if range.len() != 1 {
            return None; // spans extents (or reads nothing)
        }
        let i = range.start;
        let extent = &view.extents[i];
        let start = view.ends[i] - extent.len;
        let at = extent.offset + (offset - start);
        let res = self.fs.client().read_now_into(extent.zone, at, out)?;
        // From a zone reset since the view was taken, bytes or an error say nothing of the
        // file: read again.
        if !self.fs.extent_unchanged(&view, i) {
            return None;
        }
        Some(res.map_err(FsError::from))
    }
}
