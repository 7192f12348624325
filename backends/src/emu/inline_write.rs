//! Inline writes: short writes through the page cache, copied by one `pwrite` on the
//! calling core instead of an io_uring op.
//!
//! Through the page cache (`direct=0`) a write is a memory copy, but ext4 does not take
//! buffered writes without blocking (`RWF_NOWAIT` is refused with `EOPNOTSUPP`), so io_uring
//! hands each one to an io-wq worker thread and the core waits for the worker's wake-up:
//! 40–140 µs per write on this project's machine, against 5–10 µs for the copy. A synced
//! store's flush writes one short log block and one zone-table slot, each a handoff. So a
//! write of at most [`INLINE_WRITE_BYTES_MAX`] is copied inline.
//!
//! A copy can block: when the host throttles dirty pages (up to some 200 ms), waits for its
//! journal, or the inode lock is held by an io-wq write or a hole punch of the same file. If
//! one takes longer than [`SLOW_WRITE`], inline writes pause for [`PAUSE`] (writes go through
//! io_uring meanwhile), so a slow host costs the core at most one slow write per pause (a
//! write preempted past 1 ms on a busy machine also pauses them: only speed is lost).

use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Longer writes go through io_uring (the copy would hold the core longer than the handoff
/// costs).
const INLINE_WRITE_BYTES_MAX: usize = 64 * 1024;
/// An inline write slower than this pauses inline writes.
const SLOW_WRITE: Duration = Duration::from_millis(1);
/// How long inline writes pause after a slow one.
const PAUSE: Duration = Duration::from_secs(1);

/// Inline writes to the device file (present only for a page-cache device without a latency
/// model).
#[derive(Debug)]
pub(super) struct InlineWrites {
    /// A descriptor of the device file (a duplicate of the one the ring's ops use; the
    /// device lock is on a descriptor of its own).
    file: std::fs::File,
    /// When `paused_until` is counted from.
    epoch: Instant,
    /// Nanoseconds after `epoch` until which inline writes are paused (0: not paused).
    paused_until: AtomicU64,
}

impl InlineWrites {
    /// Inline writes through a duplicate of `file`'s descriptor.
    pub(super) fn new(file: &std::fs::File) -> std::io::Result<InlineWrites> {
        Ok(InlineWrites {
            file: file.try_clone()?,
            epoch: Instant::now(),
            paused_until: AtomicU64::new(0),
        })
    }

    /// Inline writes through a duplicate of `file`'s descriptor, or none (logged) if the
    /// descriptor cannot be duplicated: writes then all go through io_uring.
    pub(super) fn new_or_none(file: &std::fs::File, path: &std::path::Path) -> Option<Self> {
        InlineWrites::new(file)
            .inspect_err(|e| {
                tracing::warn!(
                    path = %path.display(),
                    error = %e,
                    "no descriptor for inline writes: every write goes through io_uring"
                );
            })
            .ok()
    }

    /// Writes all of `bytes` at `pos` inline, if they are short enough and inline writes are
    /// not paused; `None`: the caller writes them through io_uring.
    pub(super) fn write(&self, bytes: &[u8], pos: u64) -> Option<std::io::Result<()>> {
        if bytes.len() > INLINE_WRITE_BYTES_MAX {
            return None;
        }
        let start = Instant::now();
        let now = self.nanos(start);
        if now < self.paused_until.load(Ordering::Relaxed) {
            return None;
        }
        let res = self.file.write_all_at(bytes, pos);
        let took = start.elapsed();
        if took > SLOW_WRITE {
            let until = now + took.as_nanos() as u64 + PAUSE.as_nanos() as u64;
            self.paused_until.store(until, Ordering::Relaxed);
            tracing::debug!(
                ?took,
                "a slow inline write: writes go through io_uring for 1 s"
            );
        }
        Some(res)
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn short_writes_land_and_long_ones_are_left_to_the_ring() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(dir.path().join("f"))
            .unwrap();
        let inline = InlineWrites::new(&f).unwrap();
        inline.write(b"abc", 4096).unwrap().unwrap();
        let mut got = [0u8; 3];
        f.read_exact_at(&mut got, 4096).unwrap();
        assert_eq!(&got, b"abc");
        assert!(inline
            .write(&vec![0; INLINE_WRITE_BYTES_MAX + 1], 0)
            .is_none());
    }

    #[test]
    fn a_paused_device_leaves_writes_to_the_ring() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(dir.path().join("f")).unwrap();
        let inline = InlineWrites::new(&f).unwrap();
        inline.paused_until.store(u64::MAX, Ordering::Relaxed);
        assert!(inline.write(b"x", 0).is_none());
    }
}
