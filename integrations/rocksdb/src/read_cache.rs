//! [`ReadCache`]: recently read file pages kept in the process, so a RocksDB block-cache miss
//! on data read before costs no round trip to a ZIOB core or the device (what the page cache
//! gives RocksDB on a local file system).
//!
//! Files are cut into pages of [`PAGE_BYTES`]; a miss reads the whole pages it touches in one
//! call (a small readahead: the next block read of the file is often in the same page).
//! Files on zones are append-only (no truncation, no overwrite), so the bytes a page holds
//! stay valid while its file exists: full pages are kept, and so is a file's last page
//! where a read found the file ending in it (its *tail*: a table's footer, index and filter,
//! read one after the other when the table is opened). A read that reaches past what a
//! tail holds misses and reads the page again (the file has grown, or it asks past the end).
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
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

use bytes::{Bytes, BytesMut};

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

    /// Most bytes a missing read may span to keep its pages (larger reads, e.g. compaction
    /// readahead, are served from the cache when all their pages are there, but a miss does
    /// not keep them, so that they do not push out the pages point reads use).
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

    /// The `len` bytes at file offset `offset` of the file of generation `generation`, if
    /// every page they touch is cached: within one page a view of it, else a copy of exactly
    /// those bytes.
    pub fn get_range(&self, generation: u64, offset: u64, len: usize) -> Option<Bytes> {
        let index = offset / PAGE_BYTES;
        let from = (offset - index * PAGE_BYTES) as usize;
        if from + len <= PAGE_BYTES as usize {
            let page = self.get(generation, index)?;
            return (from + len <= page.len()).then(|| page.slice(from..from + len));
        }
        let mut out = BytesMut::with_capacity(len);
        self.for_each_part(generation, offset, len, |_, part| {
            out.extend_from_slice(part)
        })
        .then(|| out.freeze())
    }

    /// Copies the bytes at file offset `offset` of the file of generation `generation` into
    /// `out` if every page they touch is cached, and says whether it did: then all of `out`
    /// is written; else what it holds is unspecified. Only the bytes asked for are copied,
    /// also where they span pages.
    pub fn copy_into(&self, generation: u64, offset: u64, out: &mut [MaybeUninit<u8>]) -> bool {
        self.for_each_part(generation, offset, out.len(), |at, part| {
            out[at..at + part.len()].write_copy_of_slice(part);
        })
    }

    /// Whether every page the `len` bytes at file offset `offset` of the file of generation
    /// `generation` touch is cached, with those bytes (a tail may end before them).
    pub fn holds(&self, generation: u64, offset: u64, len: usize) -> bool {
        self.for_each_part(generation, offset, len, |_, _| {})
    }

    /// Hands the `len` bytes at file offset `offset` of the file of generation `generation`
    /// to `part` piece by piece (each with its offset within the range), page by page, while
    /// the pages are cached; says whether they all were.
    fn for_each_part(
        &self,
        generation: u64,
        offset: u64,
        len: usize,
        mut part: impl FnMut(usize, &[u8]),
    ) -> bool {
        let Some(pages) = &self.pages else {
            return false;
        };
        let (mut at, mut done) = (offset, 0);
        while done < len {
            let index = at / PAGE_BYTES;
            let Some(page) = pages.get(&(generation, index)) else {
                return false;
            };
            let from = (at - index * PAGE_BYTES) as usize;
            let n = (PAGE_BYTES as usize - from).min(len - done);
            // A tail that ends before the bytes asked for: a miss.
            let Some(bytes) = page.get(from..from + n) else {
                return false;
            };
            part(done, bytes);
            done += n;
            at += n as u64;
        }
        true
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

    /// Keeps what a read found: `data`, the bytes at file offset `offset` (a page boundary)
    /// of the file of generation `generation`, read up to `asked` bytes. Its whole pages are
    /// kept, and so is its last partial page when the read came back short, i.e. the file
    /// ends there (look the generation up *before* the read). A shorter copy of a tail
    /// already kept may replace a longer one: both hold the file's bytes.
    pub fn insert_read(&self, generation: u64, offset: u64, data: &[u8], asked: usize) {
        let Some(pages) = &self.pages else {
            return;
        };
        debug_assert!(offset.is_multiple_of(PAGE_BYTES), "read at {offset}");
        self.insert_range(generation, offset, data);
        let whole = data.len() / PAGE_BYTES as usize * PAGE_BYTES as usize;
        if data.len() < asked && whole < data.len() && offset.is_multiple_of(PAGE_BYTES) {
            let page = (offset + whole as u64) / PAGE_BYTES;
            pages.insert((generation, page), Bytes::copy_from_slice(&data[whole..]));
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

    /// Every range copies exactly its bytes when all the pages it touches are cached, and is
    /// refused when one of them is not.
    #[test]
    fn copies_any_range_of_cached_pages_and_refuses_the_rest() {
        const P: u64 = PAGE_BYTES;
        let byte = |o: u64| (o % 251) as u8;
        let c = ReadCache::new(64 * P as usize);
        let g = c.generation("t.sst");
        // Pages 0..4 and 5 cached, page 4 not.
        let file: Vec<u8> = (0..6 * P).map(byte).collect();
        c.insert_range(g, 0, &file[..4 * P as usize]);
        c.insert(g, 5, &file[5 * P as usize..]);
        let lens = [1, 100, 4096, P - 1, P, P + 1, 2 * P + 3];
        let offsets = (0..6 * P).step_by(4093).chain([P - 1, 4 * P - 1, 5 * P]);
        for offset in offsets {
            for len in lens {
                let end = offset + len;
                let mut out = vec![0xEE_u8; len as usize];
                let copied = c.for_each_part(g, offset, len as usize, |at, part| {
                    out[at..at + part.len()].copy_from_slice(part)
                });
                let cached = end <= 6 * P && (offset / P..=(end - 1) / P).all(|i| i != 4);
                assert_eq!(copied, cached, "({offset}, {len})");
                if copied {
                    let want: Vec<u8> = (offset..end).map(byte).collect();
                    assert!(out == want, "({offset}, {len}): wrong bytes");
                }
                let mut uninit = vec![MaybeUninit::uninit(); len as usize];
                assert_eq!(c.copy_into(g, offset, &mut uninit), cached);
            }
        }
        assert!(!ReadCache::new(0).copy_into(0, 0, &mut [MaybeUninit::new(0)]));
    }

    /// A read that found the file ending keeps the tail; the tail serves the bytes it holds
    /// and no more, and a later read of the grown file replaces it.
    #[test]
    fn a_files_tail_serves_only_the_bytes_it_holds() {
        const P: u64 = PAGE_BYTES;
        let byte = |o: u64| (o % 251) as u8;
        let file = |len: u64| -> Vec<u8> { (0..len).map(byte).collect() };
        let c = ReadCache::new(64 * P as usize);
        let g = c.generation("t.sst");
        let f = file(2 * P + 100);
        c.insert_read(g, P, &f[P as usize..], 2 * P as usize);
        let range = |o: u64, l: u64| Some(Bytes::copy_from_slice(&f[o as usize..(o + l) as usize]));
        assert_eq!(c.get_range(g, 2 * P, 100), range(2 * P, 100));
        assert_eq!(c.get_range(g, 2 * P + 50, 50), range(2 * P + 50, 50));
        assert_eq!(c.get_range(g, 2 * P - 10, 110), range(2 * P - 10, 110));
        assert_eq!(c.get_range(g, 2 * P, 101), None);
        assert_eq!(c.get_range(g, 2 * P - 10, 111), None);
        assert!(!c.copy_into(g, 2 * P + 99, &mut [MaybeUninit::uninit(); 2]));
        // The file grew: a read of the tail's page replaces it.
        let f = file(2 * P + 500);
        c.insert_read(g, 2 * P, &f[2 * P as usize..], P as usize);
        let got = c.get_range(g, 2 * P + 400, 100).unwrap();
        assert_eq!(got[..], f[(2 * P + 400) as usize..]);
        // A read that came back whole keeps no partial page.
        let h = c.generation("u.sst");
        c.insert_read(h, 0, &file(P), P as usize);
        assert!(c.get(h, 0).is_some() && c.get(h, 1).is_none());
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
