//! [`ReadCache`]: recently read file pages kept in the process, so a RocksDB block-cache miss
//! on data read before costs no round trip to a ZIOB core or the device (what the page cache
//! gives RocksDB on a local file system).
//!
//! Files are cut into pages of [`PAGE_BYTES`]; a miss reads the whole pages it touches in one
//! call (a small readahead: the next block read of the file is often in the same page).
//! Files on zones are append-only, so a *full* page stays valid while its file exists: only
//! full pages are kept (the partial last page of a file is always read again), and
//! everything of a path is dropped when it is deleted, renamed (from or to) or created again.
//! A read that raced with such a change is not kept: every change bumps an epoch, and pages
//! are inserted only if the epoch their read started in is still current.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use bytes::Bytes;

/// Page size of the cache: 32 KiB (eight 4 KiB RocksDB blocks).
pub const PAGE_BYTES: u64 = 32 << 10;

type Key = (String, u64);

#[derive(Default)]
struct Inner {
    entries: HashMap<Key, (Bytes, u64)>,
    /// Use tick → key, oldest first.
    order: BTreeMap<u64, Key>,
    tick: u64,
    bytes: usize,
    epoch: u64,
}

/// An LRU of `(path, page index)` → the page's bytes, at most `capacity` bytes.
pub struct ReadCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

impl ReadCache {
    /// A cache of at most `capacity` bytes (below two pages = off).
    pub fn new(capacity: usize) -> ReadCache {
        let capacity = if (capacity as u64) < 2 * PAGE_BYTES {
            0
        } else {
            capacity
        };
        ReadCache {
            capacity,
            inner: Mutex::default(),
        }
    }

    /// Whether the cache keeps anything.
    pub fn is_on(&self) -> bool {
        self.capacity > 0
    }

    /// Most bytes one read may span to go through the cache (larger reads, e.g. compaction
    /// readahead, bypass it so that they do not push out the pages point reads use).
    pub fn max_span(&self) -> u64 {
        (self.capacity as u64 / 8).clamp(PAGE_BYTES, 8 * PAGE_BYTES)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current epoch: pass it to [`insert`](Self::insert) for a read started now.
    pub fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    /// Page `page` of `path`, if cached.
    pub fn get(&self, path: &str, page: u64) -> Option<Bytes> {
        if !self.is_on() {
            return None;
        }
        let mut g = self.lock();
        let inner = &mut *g;
        inner.tick += 1;
        let tick = inner.tick;
        let key = (path.to_string(), page);
        let (data, used) = inner.entries.get_mut(&key)?;
        let old = std::mem::replace(used, tick);
        let data = data.clone();
        if let Some(k) = inner.order.remove(&old) {
            inner.order.insert(tick, k);
        }
        Some(data)
    }

    /// Keeps page `page` of `path` (`data` must be a whole page), read in `epoch` (dropped if
    /// the epoch moved on since). The bytes are copied: the cache never holds on to ZIOB's
    /// read buffers.
    pub fn insert(&self, epoch: u64, path: &str, page: u64, data: &[u8]) {
        if !self.is_on() || data.len() as u64 != PAGE_BYTES {
            return;
        }
        let data = Bytes::copy_from_slice(data);
        let mut g = self.lock();
        let inner = &mut *g;
        if inner.epoch != epoch {
            return;
        }
        inner.tick += 1;
        let tick = inner.tick;
        let key = (path.to_string(), page);
        let len = data.len();
        if let Some((_, old)) = inner.entries.insert(key.clone(), (data, tick)) {
            inner.order.remove(&old);
        } else {
            inner.bytes += len;
        }
        inner.order.insert(tick, key);
        while inner.bytes > self.capacity {
            let Some((_, k)) = inner.order.pop_first() else {
                break;
            };
            if let Some((d, _)) = inner.entries.remove(&k) {
                inner.bytes -= d.len();
            }
        }
    }

    /// Drops everything of `path` (deleted, renamed, created again) and starts a new epoch.
    pub fn forget(&self, path: &str) {
        let mut g = self.lock();
        let inner = &mut *g;
        inner.epoch += 1;
        if !self.is_on() {
            return;
        }
        let dead: Vec<(Key, u64)> = inner
            .entries
            .iter()
            .filter(|((p, _), _)| p == path)
            .map(|(k, (_, t))| (k.clone(), *t))
            .collect();
        for (k, t) in dead {
            inner.order.remove(&t);
            if let Some((d, _)) = inner.entries.remove(&k) {
                inner.bytes -= d.len();
            }
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(v: u8) -> Vec<u8> {
        vec![v; PAGE_BYTES as usize]
    }

    #[test]
    fn keeps_whole_pages_evicts_oldest_and_forgets_paths() {
        let c = ReadCache::new(4 * PAGE_BYTES as usize);
        let e = c.epoch();
        for i in 0..4u64 {
            c.insert(e, "a", i, &page(i as u8));
        }
        assert_eq!(c.bytes(), 4 * PAGE_BYTES as usize);
        assert_eq!(c.get("a", 0).unwrap()[0], 0); // now the newest
        c.insert(e, "b", 0, &page(9)); // evicts the oldest: a/1
        assert!(c.get("a", 1).is_none());
        assert!(c.get("a", 0).is_some());
        assert_eq!(c.bytes(), 4 * PAGE_BYTES as usize);
        c.forget("a");
        assert!(c.get("a", 0).is_none());
        assert_eq!(c.bytes(), PAGE_BYTES as usize);
        // A read that started before the change is not kept.
        c.insert(e, "a", 0, &page(1));
        assert!(c.get("a", 0).is_none());
        // A partial page is not kept.
        let e = c.epoch();
        c.insert(e, "c", 0, &[1; 100]);
        assert!(c.get("c", 0).is_none());
    }

    #[test]
    fn off_keeps_nothing() {
        let c = ReadCache::new(0);
        c.insert(c.epoch(), "a", 0, &page(1));
        assert!(c.get("a", 0).is_none());
        assert!(!ReadCache::new(PAGE_BYTES as usize).is_on());
    }
}
