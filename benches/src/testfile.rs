//! The test file: created and filled with non-zero data when missing (never sparse, so
//! `O_DIRECT` reads really reach the device), and read once to warm the page cache before
//! buffered runs. Also [`AlignedBuf`], the 4 KiB-aligned buffer the non-ZIOB runners use.

use std::alloc::Layout;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

use crate::rng::XorShift;
use crate::spec::BLOCK_SIZE_BYTES;

/// Chunk size used to fill and to warm the file, in bytes.
const CHUNK_SIZE_BYTES: usize = 1 << 20;

/// Default test file: in the system temp directory, never in the repository.
pub fn default_path(size_bytes: u64) -> PathBuf {
    std::env::temp_dir().join(format!("ziob-rt-bench-{size_bytes}.dat"))
}

/// Makes sure `path` holds `size_bytes` of allocated, non-zero data; writes it if not.
/// Returns true when the file was (re)written.
pub fn ensure(path: &Path, size_bytes: u64) -> std::io::Result<bool> {
    assert!(
        size_bytes > 0 && size_bytes.is_multiple_of(BLOCK_SIZE_BYTES),
        "file size must be a positive multiple of {BLOCK_SIZE_BYTES} bytes"
    );
    if let Ok(m) = std::fs::metadata(path) {
        // st_blocks is in 512-byte units; a fully written file has no holes.
        if m.is_file() && m.len() == size_bytes && m.blocks() * 512 >= size_bytes {
            return Ok(false);
        }
    }
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    let mut rng = XorShift::new(0xF11E);
    let mut chunk = vec![0u8; CHUNK_SIZE_BYTES];
    let mut left = size_bytes;
    while left > 0 {
        for word in chunk.chunks_exact_mut(8) {
            word.copy_from_slice(&rng.next_u64().to_le_bytes());
        }
        let n = left.min(CHUNK_SIZE_BYTES as u64) as usize;
        f.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    f.sync_all()?;
    Ok(true)
}

/// Reads the whole file through the page cache so buffered random reads hit memory.
pub fn warm_page_cache(path: &Path) -> std::io::Result<()> {
    let mut f = File::open(path)?;
    let mut chunk = vec![0u8; CHUNK_SIZE_BYTES];
    while f.read(&mut chunk)? > 0 {}
    Ok(())
}

/// A heap buffer aligned to 4 KiB (for `O_DIRECT`), fully initialised (zeroed).
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer owns its allocation exclusively, like a Box<[u8]>.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (`len > 0`) aligned to 4 KiB.
    pub fn new(len: usize) -> AlignedBuf {
        let layout = Self::layout(len);
        // SAFETY: the layout has a non-zero size (asserted in `layout`).
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len }
    }

    fn layout(len: usize) -> Layout {
        assert!(len > 0, "AlignedBuf needs a non-zero length");
        Layout::from_size_align(len, BLOCK_SIZE_BYTES as usize).expect("valid layout")
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false (buffers have a non-zero length).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Start of the memory; it never moves while the buffer lives.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Start of the memory, read-only.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_a_full_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        assert!(ensure(&p, 64 << 10).unwrap());
        assert!(!ensure(&p, 64 << 10).unwrap());
        let data = std::fs::read(&p).unwrap();
        assert_eq!(data.len(), 64 << 10);
        assert!(data.iter().any(|b| *b != 0));
        warm_page_cache(&p).unwrap();
    }

    #[test]
    fn aligned_buf_is_aligned() {
        let b = AlignedBuf::new(4096);
        assert_eq!(b.as_ptr() as usize % 4096, 0);
        assert_eq!(b.len(), 4096);
    }
}
