//! Write-behind: through the page cache, starting the host's write-back of each MiB of the
//! device file as soon as the device's data writes have filled it.
//!
//! A page-cache device (`direct=0`) leaves its writes as dirty pages until a flush's
//! `fdatasync` writes back everything dirty in the file: every zone's data written since the
//! last flush, not only that of the zone a caller flushes (a store's table sync waits for the
//! write-back of its WAL and of a compaction still under way). So once a data write fills a
//! [`CHUNK_BYTES`] chunk of the file, the device queues that chunk, and one task per device
//! starts the queued chunks' write-back one after another (`sync_file_range` with
//! `SYNC_FILE_RANGE_WRITE`, which may block in an io_uring worker while the disk's queue is
//! full: one at a time, write-behind never holds more than one worker). A later `fdatasync`
//! then finds less to write. RocksDB does the same for its files with `bytes_per_sync`.
//!
//! Durability does not change: only a flush makes data durable. The write-back errors the
//! kernel records stay for the flush's `fdatasync` to report (`SYNC_FILE_RANGE_WRITE` without
//! `SYNC_FILE_RANGE_WAIT_AFTER` does not consume them). Zeros written ahead of short writes
//! start nothing. On a file system without write-back (tmpfs) the calls do nothing. On by
//! default; the spec option `write_behind=0` turns it off.

use std::collections::VecDeque;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use ziob_runtime::File;

/// The unit of write-behind: a write that fills a chunk of the device file (chunks are
/// aligned in the file, as the page cache's large folios are) queues it.
pub(super) const CHUNK_BYTES: u64 = 1 << 20;

/// The longest range one `sync_file_range` is given (adjacent queued chunks are merged up to
/// this).
const RANGE_BYTES_MAX: u64 = 64 * CHUNK_BYTES;

/// The chunks of the device file that a data write of `len` bytes at file position `pos`
/// fills: from the chunk `pos` is in up to the chunk the write ends in (not included). A zone
/// is written in order, so the part of the first chunk before `pos` belongs to earlier writes
/// of the zone (one still in flight there leaves its pages to the next flush). A chunk across
/// two zones (the data region starts 4 KiB-aligned) is queued by the later zone's write; what
/// the earlier zone writes there afterwards waits for a flush. A chunk written again (after a
/// reset, or after a failed write rolled the write pointer back) is queued again.
pub(super) fn chunks_filled(pos: u64, len: u64) -> Option<Range<u64>> {
    let start = pos - pos % CHUNK_BYTES;
    let end = pos + len;
    let end = end - end % CHUNK_BYTES;
    (end > start).then_some(start..end)
}

/// A device's write-behind, shared with the task that starts the write-backs. That task holds
/// the device file, not the device: a write-back lands no data, so the device may close (and
/// be opened again) while one is under way.
pub(super) struct WriteBehind {
    path: PathBuf,
    queue: Mutex<Queue>,
    /// Bytes whose write-back was started.
    started_bytes: AtomicU64,
}

struct Queue {
    on: bool,
    /// Chunk ranges of the file waiting for their write-back to start, in the order filled.
    pending: VecDeque<Range<u64>>,
    /// Whether a task is starting them.
    running: bool,
}

impl WriteBehind {
    /// Write-behind for the device file at `path`, on or off.
    pub(super) fn new(path: PathBuf, on: bool) -> Arc<WriteBehind> {
        Arc::new(WriteBehind {
            path,
            queue: Mutex::new(Queue {
                on,
                pending: VecDeque::new(),
                running: false,
            }),
            started_bytes: AtomicU64::new(0),
        })
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        // Every change leaves the queue consistent, so a poisoned lock is too.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Turns write-behind on or off (off drops what is queued).
    pub(super) fn set(&self, on: bool) {
        let mut q = self.queue();
        q.on = on;
        if !on {
            q.pending.clear();
        }
    }

    /// Bytes whose write-back was started.
    pub(super) fn started_bytes(&self) -> u64 {
        self.started_bytes.load(Ordering::Relaxed)
    }

    /// After a data write of `len` bytes at file position `pos` of `file` completed: queues
    /// the chunks it filled and, unless a task is at it already, starts one on this core.
    pub(super) fn wrote(self: &Arc<Self>, file: &File, pos: u64, len: u64) {
        let Some(range) = chunks_filled(pos, len) else {
            return;
        };
        let mut q = self.queue();
        if !q.on {
            return;
        }
        let mut at = range.start;
        while at < range.end {
            let end = range.end.min(at + RANGE_BYTES_MAX);
            match q.pending.back_mut() {
                Some(last) if last.end == at && end - last.start <= RANGE_BYTES_MAX => {
                    last.end = end;
                }
                _ => q.pending.push_back(at..end),
            }
            at = end;
        }
        if q.running {
            return;
        }
        q.running = true;
        drop(q);
        let worker = Worker {
            wb: self.clone(),
            file: file.clone(),
        };
        ziob_runtime::spawn(worker.run()).detach();
    }
}

/// The task starting the queued write-backs; dropped (its runtime shutting down), it lets
/// the next write start another.
struct Worker {
    wb: Arc<WriteBehind>,
    file: File,
}

impl Worker {
    async fn run(self) {
        loop {
            let Some(range) = self.wb.queue().pending.pop_front() else {
                return;
            };
            // At most RANGE_BYTES_MAX (64 MiB): fits the op's 32-bit length.
            let len = (range.end - range.start) as u32;
            match self.file.start_write_back(range.start, len).await {
                Ok(()) => {
                    self.wb
                        .started_bytes
                        .fetch_add(u64::from(len), Ordering::Relaxed);
                }
                Err(e) => {
                    // Only a hint: the next flush writes the pages back all the same.
                    tracing::warn!(
                        path = %self.wb.path.display(),
                        error = %e,
                        "starting write-back (sync_file_range) failed; write-behind turned off for this device"
                    );
                    self.wb.set(false);
                    return;
                }
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let mut q = self.wb.queue();
        q.running = false;
        if !q.pending.is_empty() {
            // Only when dropped before its end (the runtime shutting down): a write-back not
            // started waits for a flush.
            q.pending.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_write_fills_the_chunks_it_ends_past() {
        let c = CHUNK_BYTES;
        assert_eq!(chunks_filled(0, c - 1), None);
        assert_eq!(chunks_filled(0, c), Some(0..c));
        assert_eq!(chunks_filled(c - 4096, 4096), Some(0..c));
        assert_eq!(chunks_filled(c, 4096), None);
        assert_eq!(chunks_filled(c / 2, 2 * c), Some(0..2 * c));
    }

    proptest! {
        /// A zone written from any position by writes of any lengths: the chunks its writes
        /// fill are disjoint, in order, never reach past the data written so far, and together
        /// are every chunk the data reaches past.
        #[test]
        fn sequential_writes_fill_each_chunk_once(
            start in 0u64..1000 * CHUNK_BYTES,
            lens in proptest::collection::vec(1u64..3 * CHUNK_BYTES, 1..40),
        ) {
            let mut pos = start;
            let mut filled_to = start - start % CHUNK_BYTES;
            for len in lens {
                if let Some(r) = chunks_filled(pos, len) {
                    prop_assert_eq!(r.start, filled_to, "a gap or an overlap");
                    prop_assert!(r.end <= pos + len, "past the data written");
                    filled_to = r.end;
                }
                pos += len;
            }
            prop_assert_eq!(filled_to, (pos - pos % CHUNK_BYTES).max(start - start % CHUNK_BYTES));
        }
    }
}
