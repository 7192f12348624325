//! Sequence numbers and snapshots. One [`Sequencer`] per store hands out sequence numbers
//! (all shards share it, so one number orders writes of every shard) and publishes them in
//! order: the visible sequence only passes `s` once every write numbered `s` or less is in
//! its memtables (or failed). A [`Snapshot`] is a visible sequence kept registered, so
//! compaction keeps the versions it needs.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::ikey::MAX_SEQ;

/// Allocates sequence numbers and publishes them in order.
#[derive(Debug)]
pub struct Sequencer {
    /// The next number to hand out.
    next: AtomicU64,
    /// The visible sequence: every write numbered at most this is readable.
    visible: AtomicU64,
    /// Finished ranges `start → end` (exclusive) waiting for a lower one.
    pending: Mutex<BTreeMap<u64, u64>>,
    /// The visible sequence moved.
    published: tokio::sync::Notify,
}

impl Sequencer {
    /// A sequencer whose last used (and visible) number is `last`.
    pub fn new(last: u64) -> Sequencer {
        Sequencer {
            next: AtomicU64::new(last + 1),
            visible: AtomicU64::new(last),
            pending: Mutex::new(BTreeMap::new()),
            published: tokio::sync::Notify::new(),
        }
    }

    /// Sets the last used (and visible) number after recovery, before any write.
    pub fn recover(&self, last: u64) {
        self.next.store(last + 1, Ordering::Release);
        self.visible.store(last, Ordering::Release);
    }

    /// Hands out `n` consecutive numbers; returns the first. [`finish`](Self::finish) must
    /// follow (also when the write fails), or the visible sequence stops there.
    pub fn allocate(&self, n: u64) -> u64 {
        let start = self.next.fetch_add(n, Ordering::AcqRel);
        assert!(start + n <= MAX_SEQ, "sequence numbers used up");
        start
    }

    /// The highest number handed out so far.
    pub fn last_allocated(&self) -> u64 {
        self.next.load(Ordering::Acquire) - 1
    }

    /// The write numbered `start .. start + n` is done: publish what is now contiguous.
    pub fn finish(&self, start: u64, n: u64) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        p.insert(start, start + n);
        let mut visible = self.visible.load(Ordering::Acquire);
        while let Some((&s, &e)) = p.first_key_value() {
            if s != visible + 1 {
                break;
            }
            p.remove(&s);
            visible = e - 1;
        }
        let moved = visible != self.visible.load(Ordering::Acquire);
        self.visible.store(visible, Ordering::Release);
        drop(p);
        if moved {
            self.published.notify_waiters();
        }
    }

    /// Waits until the visible sequence reaches `seq` (a write returns only once it is
    /// visible: its writer's next read sees it, even while an earlier write still waits for
    /// its sync).
    pub async fn wait_visible(&self, seq: u64) {
        // Fast path: no waiter is registered (and unregistered) when there is nothing to wait
        // for, the common case of a put.
        if self.visible() >= seq {
            return;
        }
        loop {
            let published = self.published.notified();
            tokio::pin!(published);
            published.as_mut().enable();
            if self.visible() >= seq {
                return;
            }
            published.await;
        }
    }

    /// The visible sequence.
    pub fn visible(&self) -> u64 {
        self.visible.load(Ordering::Acquire)
    }
}

/// Calls [`Sequencer::finish`] when dropped: a write publishes its numbers however it ends
/// (an error, a dropped future).
#[derive(Debug)]
pub struct Publish<'a> {
    /// The sequencer.
    pub seq: &'a Sequencer,
    /// First number of the write.
    pub start: u64,
    /// Numbers used.
    pub n: u64,
}

impl Drop for Publish<'_> {
    fn drop(&mut self) {
        self.seq.finish(self.start, self.n);
    }
}

/// The live snapshots of a store: sequence → how many handles.
#[derive(Debug, Default)]
pub struct SnapshotRegistry {
    live: Mutex<BTreeMap<u64, usize>>,
}

impl SnapshotRegistry {
    /// Registers a snapshot at the visible sequence of `seq` (read under the registry's lock,
    /// so a compaction that asks [`oldest`](Self::oldest) never misses it).
    pub fn acquire(self: &Arc<Self>, seq: &Sequencer) -> Snapshot {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let s = seq.visible();
        *live.entry(s).or_default() += 1;
        Snapshot {
            inner: Arc::new(SnapshotInner {
                seq: s,
                registry: self.clone(),
            }),
        }
    }

    /// The oldest sequence any reader may still ask for: the oldest live snapshot, or the
    /// visible sequence when there is none.
    pub fn oldest(&self, seq: &Sequencer) -> u64 {
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let v = seq.visible();
        live.keys().next().map_or(v, |&s| s.min(v))
    }

    /// Live snapshot handles (distinct sequences).
    pub fn len(&self) -> usize {
        self.live.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether no snapshot is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn release(&self, s: u64) {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = live.get_mut(&s) {
            *n -= 1;
            if *n == 0 {
                live.remove(&s);
            }
        }
    }
}

#[derive(Debug)]
struct SnapshotInner {
    seq: u64,
    registry: Arc<SnapshotRegistry>,
}

impl Drop for SnapshotInner {
    fn drop(&mut self) {
        self.registry.release(self.seq);
    }
}

/// A consistent view of the whole store (every shard) at one sequence number: reads and
/// scans through it see exactly the writes published before it was taken. Released when the
/// last clone is dropped.
#[derive(Debug, Clone)]
pub struct Snapshot {
    inner: Arc<SnapshotInner>,
}

impl Snapshot {
    /// The sequence number the snapshot sees up to.
    pub fn seq(&self) -> u64 {
        self.inner.seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishes_in_order() {
        let s = Sequencer::new(0);
        let a = s.allocate(2); // 1, 2
        let b = s.allocate(1); // 3
        let c = s.allocate(3); // 4..=6
        assert_eq!((a, b, c), (1, 3, 4));
        s.finish(b, 1);
        assert_eq!(s.visible(), 0);
        s.finish(c, 3);
        assert_eq!(s.visible(), 0);
        s.finish(a, 2);
        assert_eq!(s.visible(), 6);
        assert_eq!(s.last_allocated(), 6);
    }

    #[test]
    fn snapshots_hold_the_oldest() {
        let s = Sequencer::new(10);
        let r = Arc::new(SnapshotRegistry::default());
        let snap = r.acquire(&s);
        let x = s.allocate(5);
        s.finish(x, 5);
        assert_eq!(r.oldest(&s), 10);
        let again = snap.clone();
        drop(snap);
        assert_eq!(r.oldest(&s), 10);
        drop(again);
        assert_eq!(r.oldest(&s), 15);
        assert!(r.is_empty());
    }
}
