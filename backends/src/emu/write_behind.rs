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

/// What is waiting to start, and whether a task is at it. Rule: while `pending` is not empty
/// a task is running (or one is being started), except after a task was dropped before its
/// end (its runtime shutting down): the next filled chunk then starts one.
struct Queue {
    /// Whether filled chunks are queued at all.
    on: bool,
    /// Chunk ranges of the file waiting for their write-back to start, in the order filled.
    pending: VecDeque<Range<u64>>,
    /// Whether a task is starting them.
    running: bool,
}

impl Queue {
    /// Queues `range` (merged into the last range where adjacent, up to
    /// [`RANGE_BYTES_MAX`]); `true` if the caller must start a task.
    fn push(&mut self, range: Range<u64>) -> bool {
        if !self.on {
            return false;
        }
        let mut at = range.start;
        while at < range.end {
            let end = range.end.min(at + RANGE_BYTES_MAX);
            match self.pending.back_mut() {
                Some(last) if last.end == at && end - last.start <= RANGE_BYTES_MAX => {
                    last.end = end;
                }
                _ => self.pending.push_back(at..end),
            }
            at = end;
        }
        !std::mem::replace(&mut self.running, true)
    }

    /// The task's next range; `None` ends the task, and in the same step (under the same
    /// lock) records that no task is running, so that the next push starts one.
    fn next(&mut self) -> Option<Range<u64>> {
        let next = self.pending.pop_front();
        if next.is_none() {
            self.running = false;
        }
        next
    }

    /// Turns queueing on or off (off drops what is queued).
    fn set(&mut self, on: bool) {
        self.on = on;
        if !on {
            self.pending.clear();
        }
    }

    /// The task's write-back failed: off, nothing queued, and in the same step no task
    /// running (in two steps, a chunk queued in between after turning on again would have
    /// been taken by the ending task and never started, and no task started again).
    fn fail(&mut self) {
        self.set(false);
        self.running = false;
    }
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
        self.queue().set(on);
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
        if !self.queue().push(range) {
            return;
        }
        let worker = Worker {
            wb: self.clone(),
            file: file.clone(),
            ended: false,
        };
        ziob_runtime::spawn(worker.run()).detach();
    }
}

/// The task starting the queued write-backs; dropped before its end (its runtime shutting
/// down), it lets the next filled chunk start another.
struct Worker {
    wb: Arc<WriteBehind>,
    file: File,
    /// Ended by finding the queue empty (which recorded that no task runs).
    ended: bool,
}

impl Worker {
    async fn run(mut self) {
        loop {
            let Some(range) = self.wb.queue().next() else {
                self.ended = true;
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
                    self.wb.queue().fail();
                    self.ended = true;
                    return;
                }
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if !self.ended {
            // Dropped before its end: what is queued waits for the next filled chunk's task
            // (or for a flush).
            self.wb.queue().running = false;
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

    fn queue() -> Queue {
        Queue {
            on: true,
            pending: VecDeque::new(),
            running: false,
        }
    }

    /// What one step of the proptest below does.
    #[derive(Debug, Clone)]
    enum Step {
        /// A write fills `n` chunks from chunk `at` (starting a task if the push says so).
        Fill { at: u64, n: u64 },
        /// The running task takes its next range (or ends).
        Take,
        /// The running task's write-back fails (it turns the queue off and ends).
        Fail,
        /// Write-behind turned on or off (`EmuDevice::write_behind`).
        Set(bool),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0u64..200, 1u64..80).prop_map(|(at, n)| Step::Fill { at, n }),
            4 => Just(Step::Take),
            1 => Just(Step::Fail),
            1 => proptest::bool::ANY.prop_map(Step::Set),
        ]
    }

    proptest! {
        /// Any interleaving of filled chunks, a task taking them, its failure and the
        /// switch turned off and on: a queued chunk always has a task to start it, at most
        /// one runs, every range fits one op, and every chunk queued (and not dropped by
        /// turning off) is taken exactly once.
        #[test]
        fn queued_chunks_always_have_one_task(steps in proptest::collection::vec(step(), 1..200)) {
            let mut q = queue();
            let mut tasks = 0u32;
            let (mut queued, mut taken) = (0u64, 0u64);
            for s in steps {
                match s {
                    Step::Fill { at, n } => {
                        let r = at * CHUNK_BYTES..(at + n) * CHUNK_BYTES;
                        if q.on {
                            queued += r.end - r.start;
                        }
                        if q.push(r) {
                            tasks += 1;
                        }
                    }
                    Step::Fail if tasks == 1 => {
                        // What it dropped was queued and will not be taken.
                        queued -= q.pending.iter().map(|r| r.end - r.start).sum::<u64>();
                        q.fail();
                        tasks = 0;
                    }
                    Step::Fail => {}
                    Step::Set(on) => {
                        if !on {
                            queued -= q.pending.iter().map(|r| r.end - r.start).sum::<u64>();
                        }
                        q.set(on);
                    }
                    Step::Take if tasks == 1 => match q.next() {
                        Some(r) => {
                            prop_assert!(r.end - r.start <= RANGE_BYTES_MAX && r.end > r.start);
                            taken += r.end - r.start;
                        }
                        None => tasks = 0,
                    },
                    Step::Take => {}
                }
                prop_assert!(tasks <= 1, "two tasks at once");
                prop_assert!(q.pending.is_empty() || tasks == 1, "queued chunks without a task");
            }
            while tasks == 1 {
                match q.next() {
                    Some(r) => taken += r.end - r.start,
                    None => tasks = 0,
                }
            }
            prop_assert_eq!(taken, queued);
        }

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
