//! [`PagePool`]: the buffers of the read cache's whole pages, reused once a page is dropped
//! (evicted, or its file deleted), so that a new page takes memory the process has touched
//! already instead of fresh memory that the kernel must zero at its first touch. Without it
//! a quarter to two fifths of a ZIOB core's time in readwhilewriting went to zeroing such pages
//! (`clear_page_erms` under the hand-over's cache inserts; docs/ROCKSDB-BENCH.md §3m).
//!
//! A page is a [`Bytes`] over a `PooledPage`: dropping its last view returns the buffer,
//! which is kept only while the buffers in use and kept together stay within the pool's
//! `limit_bytes` (the read cache's capacity and a little headroom), else freed. Buffers in
//! use are not capped: a page is always made, from a new buffer when none is kept.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

/// Counts of a [`PagePool`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Pages made from a new buffer.
    pub allocated: u64,
    /// Pages made from a reused buffer.
    pub reused: u64,
    /// Buffers kept for reuse now.
    pub free_buffers: usize,
}

/// Reusable page buffers of `page_bytes` each.
pub struct PagePool {
    /// Bytes of each buffer.
    page_bytes: usize,
    /// Most bytes of buffers in use plus kept that a returned buffer may bring them to.
    limit_bytes: u64,
    /// Buffers kept for reuse (empty, with `page_bytes` of capacity).
    free: Mutex<Vec<Vec<u8>>>,
    /// Buffers handed out and not returned.
    in_use: AtomicU64,
    /// [`PoolStats::allocated`].
    allocated: AtomicU64,
    /// [`PoolStats::reused`].
    reused: AtomicU64,
}

/// A buffer of a [`PagePool`] holding one page; returns to the pool when dropped.
struct PooledPage {
    /// The page's bytes.
    buf: Vec<u8>,
    /// Where the buffer goes back.
    pool: Arc<PagePool>,
}

impl AsRef<[u8]> for PooledPage {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for PooledPage {
    fn drop(&mut self) {
        self.pool.give_back(std::mem::take(&mut self.buf));
    }
}

impl PagePool {
    /// A pool of `page_bytes` buffers that keeps a returned buffer while the buffers in use
    /// and kept take at most `limit_bytes`.
    pub fn new(page_bytes: usize, limit_bytes: u64) -> Arc<PagePool> {
        Arc::new(PagePool {
            page_bytes,
            limit_bytes,
            free: Mutex::default(),
            in_use: AtomicU64::new(0),
            allocated: AtomicU64::new(0),
            reused: AtomicU64::new(0),
        })
    }

    /// A page holding `parts` one after the other (`page_bytes` in all; more is a bug,
    /// fewer is allowed but wastes the rest of the buffer), in a reused buffer when one is
    /// kept.
    pub fn page<'a>(self: &Arc<Self>, parts: impl IntoIterator<Item = &'a [u8]>) -> Bytes {
        let kept = {
            let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
            // Counted in use before the lock is let go: a buffer is always in one count.
            self.in_use.fetch_add(1, Ordering::Relaxed);
            free.pop()
        };
        let mut buf = match kept {
            Some(buf) => {
                self.reused.fetch_add(1, Ordering::Relaxed);
                buf
            }
            None => {
                self.allocated.fetch_add(1, Ordering::Relaxed);
                Vec::with_capacity(self.page_bytes)
            }
        };
        for part in parts {
            buf.extend_from_slice(part);
        }
        debug_assert!(buf.len() <= self.page_bytes, "page of {} bytes", buf.len());
        Bytes::from_owner(PooledPage {
            buf,
            pool: Arc::clone(self),
        })
    }

    /// Takes `buf` back: kept (emptied) while buffers in use and kept stay within the
    /// limit, else freed.
    fn give_back(&self, mut buf: Vec<u8>) {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let in_use = self.in_use.fetch_sub(1, Ordering::Relaxed) - 1;
        let held = (in_use + free.len() as u64 + 1) * self.page_bytes as u64;
        if held <= self.limit_bytes && buf.capacity() >= self.page_bytes {
            buf.clear();
            free.push(buf);
        }
    }

    /// Its counts.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            allocated: self.allocated.load(Ordering::Relaxed),
            reused: self.reused.load(Ordering::Relaxed),
            free_buffers: self.free.lock().unwrap_or_else(|p| p.into_inner()).len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_page_lends_its_buffer_to_the_next() {
        let pool = PagePool::new(8, 64);
        let a = pool.page([&b"abcd"[..], b"efgh"]);
        assert_eq!(&a[..], b"abcdefgh");
        let view = a.slice(2..4);
        drop(a);
        // A view keeps the buffer.
        assert_eq!(pool.stats().free_buffers, 0);
        assert_eq!(&view[..], b"cd");
        drop(view);
        assert_eq!(pool.stats().free_buffers, 1);
        let b = pool.page([&b"12345678"[..]]);
        assert_eq!(&b[..], b"12345678");
        assert_eq!(
            pool.stats(),
            PoolStats {
                allocated: 1,
                reused: 1,
                free_buffers: 0
            }
        );
        // Nothing of the page before shows through a shorter one.
        drop(b);
        assert_eq!(&pool.page([&b"xy"[..]])[..], b"xy");
    }

    #[test]
    fn buffers_in_use_and_kept_stay_within_the_limit() {
        // Room for 4 buffers of 8 bytes.
        let pool = PagePool::new(8, 32);
        let pages: Vec<Bytes> = (0..6u8).map(|i| pool.page([&[i; 8][..]])).collect();
        drop(pages);
        assert_eq!(pool.stats().free_buffers, 4);
        let again: Vec<Bytes> = (0..6u8).map(|i| pool.page([&[i; 8][..]])).collect();
        assert_eq!(pool.stats().reused, 4);
        assert!(again.iter().enumerate().all(|(i, p)| p[..] == [i as u8; 8]));
        // Pages from another thread come back too.
        std::thread::spawn(move || drop(again)).join().unwrap();
        assert_eq!(pool.stats().free_buffers, 4);
    }
}
