//! [`ReadCache`]: recently read file pages kept in the process, so a RocksDB block-cache miss
//! on data read before costs no round trip to a ZIOB core or the device (what the page cache
//! gives RocksDB on a local file system).
//!
//! Files are cut into pages of [`PAGE_BYTES`]; a miss reads the whole pages it touches in one
//! call (a small readahead: the next block read of the file is often in the same page).
//! Files on zones are append-only, so a *full* page stays valid while its file exists: only
//! full pages are kept (the partial last page of a file is always read again).
//!
//! The pages live in a concurrent weighted cache (`quick_cache`), keyed by
//! `(generation, page index)`. Each path has a generation, taken from one process-wide counter
//! (never reused) when the path is first read; [`forget`](ReadCache::forget) drops it when the
//! file is deleted, renamed (from or to) or created again, so the path's next read gets a new
//! generation and every page kept under the old one is unreachable (it ages out). A read
//! keeps its pages under the generation it looked up *before* reading, so a read that raced
//! with a change is not served after the change's `forget`: call `forget` once the change is
//! done.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

use bytes::Bytes;

/// Page size of the cache: 32 KiB (eight 4 KiB RocksDB blocks).
pub const PAGE_BYTES: u64 = 32 << 10;

/// `(generation, page index)` → the page's bytes.
type Pages = quick_cache::sync::Cache<(u64, u64), Bytes, PageWeight>;

/// Weighs a page by its length.
#[derive(Clone, Copy)]
struct PageWeight;

impl quick_cache::Weighter<(u64, u64), Bytes> for PageWeight {
    fn weight(&self, _: &(u64, u64), page: &Bytes) -> u64 {
        page.len() as u64
    }
}

/// File pages by path and page index, at most `capacity` bytes.
pub struct ReadCache {
    /// The pages; `None` when the cache is off.
    pages: Option<Pages>,
    /// The current generation of each path read since its last change.
    generations: RwLock<HashMap<String, u64>>,
    /// The next generation handed out.
    next: AtomicU64,
}

impl ReadCache {
    /// A cache of at most `capacity` bytes (below two pages = off).
    pub fn new(capacity: usize) -> ReadCache {
        let capacity = capacity as u64;
        let pages = (capacity >= 2 * PAGE_BYTES).then(|| {
            let items = usize::try_from(capacity / PAGE_BYTES).unwrap_or(usize::MAX);
            Pages::with_weighter(items, capacity, PageWeight)
        });
        ReadCache {
            pages,
            generations: RwLock::default(),
            next: AtomicU64::new(0),
        }
    }

    /// Whether the cache keeps anything.
    pub fn is_on(&self) -> bool {
        self.pages.is_some()
    }

    /// Most bytes one read may span to go through the cache (larger reads, e.g. compaction
    /// readahead, bypass it so that they do not push out the pages point reads use).
    pub fn max_span(&self) -> u64 {
        let capacity = self.pages.as_ref().map_or(0, Pages::capacity);
        (capacity / 8).clamp(PAGE_BYTES, 8 * PAGE_BYTES)
    }

    /// The generation of `path` if it has one (it was read since its last change), without
    /// giving it one: for looking, not for reading.
    pub fn current_generation(&self, path: &str) -> Option<u64> {
        self.generations
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(path)
            .copied()
    }

    /// The current generation of `path`: look it up *before* reading, then pass it to
    /// [`get`](Self::get) and [`insert`](Self::insert).
    pub fn generation(&self, path: &str) -> u64 {
        if !self.is_on() {
            return 0;
        }
        if let Some(g) = self
            .generations
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(path)
        {
            return *g;
        }
        *self
            .generations
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(path.to_string())
            .or_insert_with(|| self.next.fetch_add(1, Ordering::Relaxed))
    }

    /// Page `page` of the file of generation `generation`, if cached.
    pub fn get(&self, generation: u64, page: u64) -> Option<Bytes> {
        self.pages.as_ref()?.get(&(generation, page))
    }

    /// Keeps page `page` of the file of generation `generation` (`data` must be a whole page;
    /// a generation forgotten since is never looked up again). The bytes are copied: the cache
    /// never holds on to ZIOB's read buffers.
    pub fn insert(&self, generation: u64, page: u64, data: &[u8]) {
        if let Some(pages) = &self.pages {
            if data.len() as u64 == PAGE_BYTES {
                pages.insert((generation, page), Bytes::copy_from_slice(data));
            }
        }
    }

    /// Keeps the whole pages that `data` covers, the bytes at file offset `offset` of the file
    /// of generation `generation`: read there (a miss, the warm-up), or written there (look
    /// the generation up *before* the read or write was issued; call this once it
    /// succeeded). Pages it covers only in part are left to a later read. For a write, what
    /// the page cache does for a local file: a table RocksDB has just written (its flush's or
    /// its compaction's) is read from memory.
    pub fn insert_range(&self, generation: u64, offset: u64, data: &[u8]) {
        if !self.is_on() {
            return;
        }
        let end = offset.saturating_add(data.len() as u64);
        let mut page = offset.div_ceil(PAGE_BYTES);
        while page.saturating_add(1).saturating_mul(PAGE_BYTES) <= end {
            let from = (page * PAGE_BYTES - offset) as usize;
            self.insert(generation, page, &data[from..from + PAGE_BYTES as usize]);
            page += 1;
        }
    }

    /// Makes everything kept of `path` unreachable (it was deleted, renamed or created again):
    /// its next read gets a new generation.
    pub fn forget(&self, path: &str) {
        if !self.is_on() {
            return;
        }
        self.generations
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(path);
    }

    /// Bytes held (pages of forgotten generations included until they age out).
    pub fn bytes(&self) -> usize {
        self.pages
            .as_ref()
            .map_or(0, |p| usize::try_from(p.weight()).unwrap_or(usize::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(v: u8) -> Vec<u8> {
        vec![v; PAGE_BYTES as usize]
    }

    #[test]
    fn keeps_whole_pages_within_capacity_and_forgets_paths() {
        let c = ReadCache::new(4 * PAGE_BYTES as usize);
        let a = c.generation("a");
        assert_eq!(c.generation("a"), a);
        for i in 0..4u64 {
            c.insert(a, i, &page(i as u8));
        }
        assert_eq!(c.bytes(), 4 * PAGE_BYTES as usize);
        assert_eq!(c.get(a, 0).unwrap()[0], 0);
        let b = c.generation("b");
        assert_ne!(a, b);
        assert!(c.get(b, 0).is_none());
        // Never more than the capacity.
        for i in 0..64u64 {
            c.insert(b, i, &page(9));
            assert!(c.bytes() <= 4 * PAGE_BYTES as usize, "{} bytes", c.bytes());
        }
        assert_eq!(c.get(b, 63).unwrap()[0], 9);
        // Forgotten: a new generation, nothing kept before is reachable.
        c.insert(a, 5, &page(5));
        c.forget("a");
        let a2 = c.generation("a");
        assert_ne!(a2, a);
        assert!((0..8).all(|i| c.get(a2, i).is_none()));
        // A read that started before the change is not kept.
        c.insert(a, 0, &page(1));
        assert!(c.get(c.generation("a"), 0).is_none());
        // A partial page is not kept.
        let cg = c.generation("c");
        c.insert(cg, 0, &[1; 100]);
        assert!(c.get(cg, 0).is_none());
    }

    /// Writes of every length at every offset keep exactly the pages they cover whole, each
    /// with the bytes at its place in the file.
    #[test]
    fn a_write_keeps_the_pages_it_covers_whole() {
        const P: u64 = PAGE_BYTES;
        let byte = |o: u64| (o % 251) as u8;
        for (offset, len) in [
            (0, P),
            (0, P - 1),
            (1, P),
            (P - 1, P + 2),
            (5, 3 * P),
            (P, 4 * P),
            (3 * P + 7, 2 * P + 100),
            (0, 0),
        ] {
            let c = ReadCache::new(64 * P as usize);
            let g = c.generation("t.sst");
            let data: Vec<u8> = (offset..offset + len).map(byte).collect();
            c.insert_range(g, offset, &data);
            for page in 0..8u64 {
                let whole = page * P >= offset && (page + 1) * P <= offset + len;
                match c.get(g, page) {
                    Some(p) => {
                        assert!(whole, "page {page} of write ({offset}, {len}) kept");
                        assert!(p.iter().zip(page * P..).all(|(b, o)| *b == byte(o)));
                    }
                    None => assert!(!whole, "page {page} of write ({offset}, {len}) missing"),
                }
            }
        }
        let off = ReadCache::new(0);
        off.insert_range(off.generation("t.sst"), 0, &[1; 4 * P as usize]);
        assert_eq!(off.bytes(), 0);
    }

    #[test]
    fn off_keeps_nothing() {
        let c = ReadCache::new(0);
        let g = c.generation("a");
        c.insert(g, 0, &page(1));
        assert!(c.get(g, 0).is_none());
        assert_eq!(c.bytes(), 0);
        assert!(!ReadCache::new(PAGE_BYTES as usize).is_on());
    }
}
