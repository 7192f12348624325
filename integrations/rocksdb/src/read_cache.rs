//! [`ReadCache`]: recently read file ranges kept in the process, so a RocksDB block-cache
//! miss on a block read before costs no round trip to a ZIOB core or the device (what the
//! page cache gives RocksDB on a local file system).
//!
//! Files on zones are append-only: a range read in full stays valid while the file exists.
//! So only full-length reads are kept, and everything of a path is dropped when it is
//! deleted, renamed (from or to) or created again. A read that raced with such a change is
//! not kept: every change bumps an epoch, and a read is inserted only if the epoch it started
//! in is still current.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use bytes::Bytes;

type Key = (String, u64, usize);

#[derive(Default)]
struct Inner {
    entries: HashMap<Key, (Bytes, u64)>,
    /// Use tick → key, oldest first.
    order: BTreeMap<u64, Key>,
    tick: u64,
    bytes: usize,
    epoch: u64,
}

/// An LRU of `(path, offset, len)` → bytes, at most `capacity` bytes.
pub struct ReadCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

impl ReadCache {
    /// A cache of at most `capacity` bytes (0 = off).
    pub fn new(capacity: usize) -> ReadCache {
        ReadCache {
            capacity,
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current epoch: pass it to [`insert`](Self::insert) for a read started now.
    pub fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    /// The cached bytes of this exact range, if any.
    pub fn get(&self, path: &str, offset: u64, len: usize) -> Option<Bytes> {
        if self.capacity == 0 {
            return None;
        }
        let mut g = self.lock();
        let inner = &mut *g;
        inner.tick += 1;
        let tick = inner.tick;
        let key = (path.to_string(), offset, len);
        let (data, used) = inner.entries.get_mut(&key)?;
        let old = std::mem::replace(used, tick);
        let data = data.clone();
        if let Some(k) = inner.order.remove(&old) {
            inner.order.insert(tick, k);
        }
        Some(data)
    }

    /// Keeps a full-length read made in `epoch` (dropped if the epoch moved on since).
    pub fn insert(&self, epoch: u64, path: &str, offset: u64, data: Bytes) {
        let len = data.len();
        if self.capacity == 0 || len == 0 || len > self.capacity / 8 {
            return;
        }
        let mut g = self.lock();
        let inner = &mut *g;
        if inner.epoch != epoch {
            return;
        }
        inner.tick += 1;
        let tick = inner.tick;
        let key = (path.to_string(), offset, len);
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
        if self.capacity == 0 {
            return;
        }
        let dead: Vec<(Key, u64)> = inner
            .entries
            .iter()
            .filter(|((p, _, _), _)| p == path)
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

    #[test]
    fn keeps_exact_ranges_evicts_oldest_and_forgets_paths() {
        let c = ReadCache::new(8 * 100);
        let e = c.epoch();
        for i in 0..8u64 {
            c.insert(e, "a", i * 100, Bytes::from(vec![i as u8; 100]));
        }
        assert_eq!(c.bytes(), 800);
        assert_eq!(c.get("a", 0, 100).unwrap()[0], 0); // now the newest
        assert!(c.get("a", 0, 99).is_none());
        c.insert(e, "b", 0, Bytes::from(vec![9; 100])); // evicts the oldest: a@100
        assert!(c.get("a", 100, 100).is_none());
        assert!(c.get("a", 0, 100).is_some());
        assert_eq!(c.bytes(), 800);
        c.forget("a");
        assert!(c.get("a", 0, 100).is_none());
        assert_eq!(c.bytes(), 100);
        // A read that started before the change is not kept.
        c.insert(e, "a", 0, Bytes::from(vec![1; 100]));
        assert!(c.get("a", 0, 100).is_none());
        // Too big for the cache (over 1/8 of it): not kept.
        let e = c.epoch();
        c.insert(e, "c", 0, Bytes::from(vec![1; 101]));
        assert!(c.get("c", 0, 101).is_none());
    }

    #[test]
    fn off_keeps_nothing() {
        let c = ReadCache::new(0);
        c.insert(c.epoch(), "a", 0, Bytes::from_static(b"x"));
        assert!(c.get("a", 0, 1).is_none());
    }
}
