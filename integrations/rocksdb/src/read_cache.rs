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
//! Writes fill it too ([`insert_written`](ReadCache::insert_written)): the pages a write
//! covers, the page it completes that earlier writes of the same writer began (their bytes
//! carried in a [`PageCarry`]), and at a push of the writer the carried last page as the
//! tail.
//!
//! The pages live in a concurrent weighted cache (`quick_cache`), keyed by
//! `(generation, page index)`. Each path has a generation, taken from one process-wide counter
//! (never reused) when the path is first read or written through the cache;
//! [`forget`](ReadCache::forget) drops it when the file is deleted, renamed (from or to) or
//! created again, so the path's next read gets a new generation and every page kept under
//! the old one is unreachable; those up to the file's old length are dropped at once (any
//! others age out). A read keeps its pages under the generation it looked up *before*
//! reading, so a read that raced with a change is not served after the change's `forget`:
//! call `forget` once the change is done.
//!
//! Whole pages are made in buffers of a [`PagePool`]: a page dropped (evicted, or its file
//! forgotten) lends its buffer to the next, so pages kept in a steady state take no fresh
//! memory (which the kernel zeroes at its first touch).

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use bytes::{Bytes, BytesMut};

use crate::page_pool::{PagePool, PoolStats};

/// Page size of the cache: 32 KiB (eight 4 KiB RocksDB blocks).
pub const PAGE_BYTES: u64 = 32 << 10;

/// Most pages a missing read may span to keep them ([`ReadCache::max_span`]).
const MAX_SPAN_PAGES: u64 = 8;

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

/// The bytes written so far of a file's last, partial page, kept between the writes of
/// one writer ([`ReadCache::insert_written`]): a file written in pieces has pages that no
/// single piece covers whole; the carry completes them, and once the writer's pieces are
/// all in the file it is the file's tail ([`ReadCache::insert_carried_tail`]). It holds
/// views of the writes' own buffers until the page is complete (copies of what it takes
/// from buffers over 128 KiB).
#[derive(Debug)]
pub struct PageCarry {
    /// The generation of the file they belong to.
    generation: u64,
    /// File offset of that page (a page boundary); `u64::MAX` while unknown.
    page_start: u64,
    /// The file's bytes from `page_start` on, in order (less than a page in all).
    pieces: Vec<Bytes>,
    /// Bytes in `pieces`.
    len: usize,
    /// Whether it changed since it was last kept as the tail.
    changed: bool,
}

impl Default for PageCarry {
    fn default() -> PageCarry {
        PageCarry {
            generation: 0,
            page_start: u64::MAX,
            pieces: Vec::new(),
            len: 0,
            changed: false,
        }
    }
}

impl PageCarry {
    /// Whether a write of the file of `generation` at `offset` continues the carried bytes.
    fn continued_by(&self, generation: u64, offset: u64) -> bool {
        self.generation == generation
            && self.page_start.checked_add(self.len as u64) == Some(offset)
    }

    /// Starts afresh at `page_start` with `first` (empty: nothing carried).
    fn restart(&mut self, page_start: u64, first: Bytes) {
        self.pieces.clear();
        self.len = first.len();
        if !first.is_empty() {
            self.pieces.push(first);
        }
        self.page_start = page_start;
    }

    /// The carried bytes and then `more` (together a whole page), as a page of `pool`.
    fn joined_page(&self, pool: &Arc<PagePool>, more: &[u8]) -> Bytes {
        pool.page(self.pieces.iter().map(|p| &p[..]).chain([more]))
    }

    /// The carried bytes (a partial page), in one buffer of their length.
    fn joined(&self) -> Bytes {
        let mut page = BytesMut::with_capacity(self.len);
        for piece in &self.pieces {
            page.extend_from_slice(piece);
        }
        page.freeze()
    }
}

/// Most bytes of a write's buffer a [`PageCarry`] holds a view of; of a larger buffer it
/// copies what it carries (at most a page), so that a carry never keeps more than this
/// alive: the gathered hand-over of [`crate::shared::WRITE_BUF_BYTES`], not a large append.
const CARRY_VIEW_MAX: usize = 128 << 10;

/// `part` (a slice of `data`) to carry: a view of `data`'s buffer, or a copy when that buffer
/// is larger than [`CARRY_VIEW_MAX`].
fn carried(data: &Bytes, part: &[u8]) -> Bytes {
    if data.len() <= CARRY_VIEW_MAX {
        data.slice_ref(part)
    } else {
        Bytes::copy_from_slice(part)
    }
}

/// How much of a range the cache holds ([`ReadCache::held`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Every byte.
    All,
    /// The bytes up to this file offset, where a tail ends.
    UpTo(u64),
    /// Not every byte up to the end of a tail: a page is missing.
    Not,
}

/// File pages by path and page index, at most `capacity` bytes.
pub struct ReadCache {
    /// The pages; `None` when the cache is off.
    pages: Option<Pages>,
    /// The buffers of its whole pages.
    pool: Arc<PagePool>,
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
            // Headroom of a largest miss: a page made for an insert into the full cache
            // is in use before the one it evicts comes back, and that one is kept.
            pool: PagePool::new(PAGE_BYTES as usize, capacity + MAX_SPAN_PAGES * PAGE_BYTES),
            generations: RwLock::default(),
            // From 1: a default `PageCarry`'s 0 is never a file's.
            next: AtomicU64::new(1),
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
        (capacity / 8).clamp(PAGE_BYTES, MAX_SPAN_PAGES * PAGE_BYTES)
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
        // Looked up before the buffer is allocated: a miss allocates nothing.
        if !self.holds(generation, offset, len) {
            return None;
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
        self.held(generation, offset, len) == Held::All
    }

    /// How much of the `len` bytes at file offset `offset` of the file of generation
    /// `generation` is cached: all of it, none from some page on (a page missing), or the
    /// bytes up to the end of a tail (a short page), all of the file's if it ends there.
    pub fn held(&self, generation: u64, offset: u64, len: usize) -> Held {
        let mut tail_end = None;
        let all = self.for_each_part_until(
            generation,
            offset,
            len,
            |_, _| {},
            |end| tail_end = Some(end),
        );
        match (all, tail_end) {
            (true, _) => Held::All,
            (false, Some(end)) => Held::UpTo(end),
            (false, None) => Held::Not,
        }
    }

    /// Hands the `len` bytes at file offset `offset` of the file of generation `generation`
    /// to `part` piece by piece (each with its offset within the range), page by page, while
    /// the pages are cached; says whether they all were.
    fn for_each_part(
        &self,
        generation: u64,
        offset: u64,
        len: usize,
        part: impl FnMut(usize, &[u8]),
    ) -> bool {
        self.for_each_part_until(generation, offset, len, part, |_| {})
    }

    /// [`for_each_part`](Self::for_each_part), telling `short` the file offset where the
    /// cached bytes end when they stop at a tail (a page shorter than the bytes asked for).
    fn for_each_part_until(
        &self,
        generation: u64,
        offset: u64,
        len: usize,
        mut part: impl FnMut(usize, &[u8]),
        short: impl FnOnce(u64),
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
                short(index * PAGE_BYTES + page.len() as u64);
                return false;
            };
            part(done, bytes);
            done += n;
            at += n as u64;
        }
        true
    }

    /// Keeps page `page` of the file of generation `generation` (`data` must be a whole page;
    /// a generation forgotten since is never looked up again). The bytes are copied (into a
    /// buffer of the cache's [`PagePool`]): the cache never holds on to ZIOB's read buffers.
    pub fn insert(&self, generation: u64, page: u64, data: &[u8]) {
        if let Some(pages) = &self.pages {
            if data.len() as u64 == PAGE_BYTES {
                pages.insert((generation, page), self.pool.page([data]));
            }
        }
    }

    /// Keeps what a read found: `data`, the bytes at file offset `offset` (a page boundary)
    /// of the file of generation `generation`, read up to `asked` bytes. Its whole pages are
    /// kept, and so is its last partial page when the read came back short, i.e. the file
    /// ends there (look the generation up *before* the read), unless a longer copy of that
    /// page is kept already (a writer may have completed it since the read; the check is
    /// not atomic with the insert, so that copy may still be replaced by the shorter one,
    /// which holds the same bytes).
    pub fn insert_read(&self, generation: u64, offset: u64, data: &[u8], asked: usize) {
        let Some(pages) = &self.pages else {
            return;
        };
        debug_assert!(offset.is_multiple_of(PAGE_BYTES), "read at {offset}");
        self.insert_range(generation, offset, data);
        let whole = data.len() / PAGE_BYTES as usize * PAGE_BYTES as usize;
        if data.len() < asked && whole < data.len() && offset.is_multiple_of(PAGE_BYTES) {
            let key = (generation, (offset + whole as u64) / PAGE_BYTES);
            // A writer may have completed the page, or kept a longer tail, since this read:
            // that entry holds more of the same bytes (checked, not atomically: one that
            // lands between the check and the insert is replaced, and read again later).
            if pages
                .peek(&key)
                .is_none_or(|kept| kept.len() < data.len() - whole)
            {
                pages.insert(key, Bytes::copy_from_slice(&data[whole..]));
            }
        }
    }

    /// Keeps what a write put at file offset `offset` of the file of generation `generation`
    /// (look the generation up *before* the write was issued; call this once it succeeded):
    /// the whole pages `data` covers, and the page it completes that earlier writes began
    /// (their bytes are in `carry`, which then holds the bytes of the file's new last,
    /// partial page). A writer's writes must come in file order, each where the last ended;
    /// one that does not (or of another generation) only starts the carry afresh.
    pub fn insert_written(
        &self,
        generation: u64,
        offset: u64,
        data: &Bytes,
        carry: &mut PageCarry,
    ) {
        let Some(pages) = &self.pages else {
            return;
        };
        if data.is_empty() {
            return;
        }
        self.insert_range(generation, offset, data);
        let continued = carry.continued_by(generation, offset);
        let end = offset.saturating_add(data.len() as u64);
        let last_page = end / PAGE_BYTES * PAGE_BYTES;
        if continued && carry.len > 0 && last_page > carry.page_start {
            // `data` reaches the end of the carried page: complete it.
            if let Some(head) = data.get(..PAGE_BYTES as usize - carry.len) {
                let page = carry.joined_page(&self.pool, head);
                pages.insert((generation, carry.page_start / PAGE_BYTES), page);
            }
        }
        carry.generation = generation;
        carry.changed = true;
        // The bytes of `data` from the new last page's start, if that start is within it
        // (or where it ends).
        let rest = last_page
            .checked_sub(offset)
            .and_then(|from| data.get(usize::try_from(from).ok()?..));
        match rest {
            Some(rest) => carry.restart(last_page, carried(data, rest)),
            // Still within the carried page.
            None if continued => {
                carry.len += data.len();
                carry.pieces.push(carried(data, data));
            }
            // Within a page whose first bytes are unknown here.
            None => carry.restart(u64::MAX, Bytes::new()),
        }
    }

    /// Keeps the carried bytes of a file's last page as its tail (once the writer's
    /// hand-overs are all in the file: the file ends there for now; should it grow, reads
    /// past them miss), unless they were kept so since the last write.
    pub fn insert_carried_tail(&self, carry: &mut PageCarry) {
        if let Some(pages) = &self.pages {
            if carry.changed && carry.len > 0 && carry.page_start != u64::MAX {
                pages.insert(
                    (carry.generation, carry.page_start / PAGE_BYTES),
                    carry.joined(),
                );
            }
            carry.changed = false;
        }
    }

    /// Keeps the whole pages that `data` covers, the bytes at file offset `offset` of the file
    /// of generation `generation`: read there (a miss, the warm-up), or written there (look
    /// the generation up *before* the read or write was issued; call this once it
    /// succeeded). Pages it covers only in part are left to a later read (a writer's writes
    /// use [`insert_written`](Self::insert_written), which completes them). For a write, what
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
    /// its next read gets a new generation. The pages it held up to `len` bytes (its length
    /// before the change, 0 if unknown) are dropped at once, so their buffers serve the next
    /// pages kept (those beyond, and any that a read racing with the change keeps, age out).
    pub fn forget(&self, path: &str, len: u64) {
        let Some(pages) = &self.pages else {
            return;
        };
        let generation = self
            .generations
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(path);
        if let Some(generation) = generation {
            // One removal per page (2,048 for a 64 MiB table), once per file.
            for page in 0..len.div_ceil(PAGE_BYTES) {
                pages.remove(&(generation, page));
            }
        }
    }

    /// The counts of its page buffers.
    pub fn pool_stats(&self) -> PoolStats {
        self.pool.stats()
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
        c.forget("a", 0);
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

    /// Writes of random lengths in file order keep every page they complete, whole pages
    /// across writes included, and never a page with wrong bytes; a write that does not
    /// continue the carry (a jump, another generation) keeps only what it covers whole.
    #[test]
    fn written_pieces_keep_every_completed_page_with_the_files_bytes() {
        const P: u64 = PAGE_BYTES;
        let byte = |o: u64| (o.wrapping_mul(31) % 251) as u8;
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for round in 0..40 {
            let c = ReadCache::new(1024 * P as usize);
            let g = c.generation("t.sst");
            let mut carry = PageCarry::default();
            let mut at = 0u64;
            // Pages whose bytes before some write were not handed to the carry.
            let mut unknown_from = None;
            while at < 40 * P {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let len = match x % 4 {
                    0 => 1 + x % 300,
                    1 => 1 + x % 9000,
                    2 => 1 + x % (3 * P),
                    _ => P,
                };
                if round % 5 == 4 && x.is_multiple_of(17) {
                    // A write the carry did not see (as after a reopen).
                    unknown_from.get_or_insert(at);
                    at += len;
                    continue;
                }
                let data: Bytes = (at..at + len).map(byte).collect();
                c.insert_written(g, at, &data, &mut carry);
                at += len;
            }
            c.insert_carried_tail(&mut carry);
            let whole = at / P;
            for i in 0..=whole {
                let Some(page) = c.get(g, i) else {
                    // Only pages a skipped write touched may be missing.
                    assert!(
                        unknown_from.is_some_and(|u| (i + 1) * P > u),
                        "round {round}: page {i} missing"
                    );
                    continue;
                };
                let want: Vec<u8> = (i * P..(i * P + page.len() as u64).min(at))
                    .map(byte)
                    .collect();
                assert!(
                    page[..] == want[..],
                    "round {round}: page {i} has wrong bytes"
                );
                assert!(
                    page.len() == P as usize || i == whole,
                    "round {round}: page {i} short"
                );
            }
        }
        // Another generation never completes this one's page.
        let c = ReadCache::new(64 * P as usize);
        let (a, b) = (c.generation("a.sst"), c.generation("b.sst"));
        let mut carry = PageCarry::default();
        c.insert_written(a, 0, &Bytes::from(vec![1; 100]), &mut carry);
        c.insert_written(b, 100, &Bytes::from(vec![2; P as usize]), &mut carry);
        assert!(c.get(a, 0).is_none() && c.get(b, 0).is_none());
    }

    /// A read that came back short keeps its tail only where no longer copy of the page is
    /// kept (a writer completed the page meanwhile); `held` tells where a tail ends.
    #[test]
    fn a_short_read_never_replaces_a_longer_page() {
        const P: u64 = PAGE_BYTES;
        let c = ReadCache::new(64 * P as usize);
        let g = c.generation("t.sst");
        let whole: Vec<u8> = (0..P).map(|o| o as u8).collect();
        c.insert(g, 1, &whole);
        c.insert_read(g, P, &whole[..100], P as usize);
        assert_eq!(c.get(g, 1).map(|p| p.len()), Some(P as usize));
        c.insert_read(g, 2 * P, &whole[..100], P as usize);
        c.insert_read(g, 2 * P, &whole[..50], P as usize);
        assert_eq!(c.get(g, 2).map(|p| p.len()), Some(100));
        assert_eq!(c.held(g, P, 2 * P as usize), Held::UpTo(2 * P + 100));
        assert_eq!(c.held(g, P, P as usize + 100), Held::All);
        assert_eq!(c.held(g, 0, 10), Held::Not);
    }

    /// A deleted file's pages leave the cache at once (tail included), and the next pages
    /// kept take their buffers instead of new memory.
    #[test]
    fn forgetting_a_file_drops_its_pages_and_lends_their_buffers() {
        const P: u64 = PAGE_BYTES;
        let c = ReadCache::new(64 * P as usize);
        let a = c.generation("a.sst");
        let file: Vec<u8> = (0..8 * P + 100).map(|o| (o % 249) as u8).collect();
        c.insert_read(a, 0, &file, 9 * P as usize);
        assert_eq!(c.bytes(), file.len());
        c.forget("a.sst", file.len() as u64);
        assert_eq!(c.bytes(), 0);
        assert_eq!(c.pool_stats().free_buffers, 8);
        let b = c.generation("b.sst");
        c.insert_range(b, 0, &file[..8 * P as usize]);
        let stats = c.pool_stats();
        assert_eq!(
            (stats.allocated, stats.reused, stats.free_buffers),
            (8, 8, 0)
        );
        assert!(c.holds(b, 0, 8 * P as usize));
        // A length short of the pages kept drops those it covers; the others age out.
        c.forget("b.sst", P + 1);
        assert_eq!(c.bytes(), 6 * P as usize);
    }

    /// Seeded random files written, read, deleted and written again under a small cache:
    /// every range served holds its file's bytes, whichever buffers the pages reused.
    #[test]
    fn reused_buffers_never_serve_another_files_bytes() {
        const P: u64 = PAGE_BYTES;
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let c = ReadCache::new(24 * P as usize);
        // Per path: its contents' seed and length, while it exists.
        let mut files: HashMap<String, (u64, u64)> = HashMap::new();
        let byte = |seed: u64, o: u64| (o.wrapping_mul(seed | 1) >> 3) as u8;
        // Ranges served, held on to (views of pages the cache may drop meanwhile): their
        // bytes must not change while they are held.
        let mut held: Vec<(Bytes, u64, u64)> = Vec::new();
        for step in 0..3000 {
            if step % 50 == 0 {
                for (got, seed, offset) in held.drain(..) {
                    assert!(
                        got.iter().zip(offset..).all(|(b, o)| *b == byte(seed, o)),
                        "step {step}: a range held since changed"
                    );
                }
            }
            let path = format!("{}.sst", next() % 6);
            match next() % 4 {
                0 => {
                    // Written again: new bytes at the same path.
                    if let Some((_, len)) = files.remove(&path) {
                        c.forget(&path, len);
                    }
                    let (seed, len) = (next(), 1 + next() % (6 * P));
                    let g = c.generation(&path);
                    let mut carry = PageCarry::default();
                    let mut at = 0;
                    while at < len {
                        let n = (1 + next() % (2 * P)).min(len - at);
                        let data: Bytes = (at..at + n).map(|o| byte(seed, o)).collect();
                        c.insert_written(g, at, &data, &mut carry);
                        at += n;
                    }
                    c.insert_carried_tail(&mut carry);
                    files.insert(path, (seed, len));
                }
                1 => {
                    if let Some((_, len)) = files.remove(&path) {
                        c.forget(&path, if next() % 2 == 0 { len } else { 0 });
                    }
                }
                _ => {
                    let Some(&(seed, len)) = files.get(&path) else {
                        continue;
                    };
                    let g = c.generation(&path);
                    let offset = next() % len;
                    let n = 1 + next() % (len - offset).min(3 * P);
                    match c.get_range(g, offset, n as usize) {
                        Some(got) => {
                            assert!(
                                got.iter().zip(offset..).all(|(b, o)| *b == byte(seed, o)),
                                "step {step}: {path} at {offset}+{n}: another file's bytes"
                            );
                            held.push((got, seed, offset));
                        }
                        None => {
                            // A miss reads the file's pages and keeps them.
                            let from = offset / P * P;
                            let data: Vec<u8> = (from..len).map(|o| byte(seed, o)).collect();
                            c.insert_read(g, from, &data, data.len() + 1);
                        }
                    }
                }
            }
            assert!(c.bytes() <= 24 * P as usize);
        }
        assert!(c.pool_stats().reused > 0, "{:?}", c.pool_stats());
    }

    /// In a full cache, the page an insert evicts lends its buffer to the next insert.
    #[test]
    fn a_full_cache_reuses_the_buffers_it_evicts() {
        let c = ReadCache::new(8 * PAGE_BYTES as usize);
        let g = c.generation("a.sst");
        for i in 0..64u64 {
            c.insert(g, i, &page(i as u8));
        }
        let stats = c.pool_stats();
        assert!(stats.reused >= 48, "{stats:?}");
        assert!(c.bytes() <= 8 * PAGE_BYTES as usize);
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
