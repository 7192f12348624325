//! [`DmaBuf`]: a 4 KiB-aligned buffer from the per-core pool, usable for O_DIRECT and as a
//! registered (fixed) buffer.

use std::alloc::Layout;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::Arc;

use super::alloc::{DmaAllocator, Mem};
use super::pool::{self, FixedArena, Returns};
use super::{IoBuf, IoBufMut};
use crate::ring::RingId;

/// Alignment of every [`DmaBuf`] in bytes: enough for O_DIRECT on 4Kn devices and for NVMe
/// PRPs.
pub const DMA_ALIGN_BYTES: usize = 4096;

/// Alignment a window start must keep ([`DmaBuf::set_window`]): the smallest logical block
/// size, so a window at any block boundary stays valid for O_DIRECT.
pub const WINDOW_ALIGN_BYTES: usize = 512;

/// Where a buffer's memory came from, which decides where it goes back to.
pub(crate) enum Origin {
    /// A direct allocation of exactly the buffer's capacity (larger than the pool's biggest
    /// class, taken off-core, or a heap fallback when the core's allocator ran out).
    Direct(Mem),
    /// A pool size class of the core that owns ring `ring`, from `mem`; dropped on another
    /// thread, it goes to that pool's `returns`.
    Pooled {
        ring: RingId,
        mem: Mem,
        returns: Arc<Returns>,
    },
    /// Slot `slot` of the registered arena of ring `ring`.
    Fixed {
        ring: RingId,
        slot: u16,
        arena: Arc<FixedArena>,
    },
    /// Memory shared by one writable owner and read-only views ([`DmaBuf::share`]); it goes
    /// back to where it came from when the last of them is dropped.
    Shared { mem: Arc<SharedMem>, view: bool },
}

/// The allocation behind a shared buffer ([`DmaBuf::share`]): freed to its origin when the
/// owner and every view are gone.
pub(crate) struct SharedMem {
    ptr: NonNull<u8>,
    cap: usize,
    origin: Option<Origin>,
}

// SAFETY: the struct only records where the memory came from; who may touch which bytes is
// ruled by the owner/view protocol of `DmaBuf::share`.
unsafe impl Send for SharedMem {}
// SAFETY: as above; `SharedMem` itself has no interior mutability.
unsafe impl Sync for SharedMem {}

impl Drop for SharedMem {
    fn drop(&mut self) {
        if let Some(origin) = self.origin.take() {
            pool::give_back(self.ptr, self.cap, origin);
        }
    }
}

/// An aligned, owned byte buffer: `len` initialised bytes inside `capacity` bytes.
///
/// A buffer can hand out read-only views of its initialised bytes ([`DmaBuf::share`]), e.g.
/// to write them to a device while the owner keeps appending past them.
///
/// Take one with [`DmaBuf::with_capacity`] (pooled), [`DmaBuf::zeroed`], [`DmaBuf::from_slice`]
/// or [`DmaBuf::fixed`] (from the core's registered arena when there is a free slot). Dropping
/// it returns the memory to the pool of the core it came from: at once on that core, through
/// the pool's return list from any other thread (a registered slot: through the core's
/// mailbox).
pub struct DmaBuf {
    /// Start of the memory.
    ptr: NonNull<u8>,
    /// Bytes of memory.
    cap: usize,
    /// Start of the window, in bytes from `ptr` (a multiple of [`DMA_ALIGN_BYTES`]).
    head: usize,
    /// Initialised bytes in the window.
    len: usize,
    /// High-water mark of initialised bytes, from `ptr`.
    init: usize,
    /// Owner of shared memory: bytes from `ptr` below this mark are (or were) seen by views
    /// and must not change while any view is alive. 0 for unshared buffers and views.
    frozen: usize,
    origin: Origin,
}

// SAFETY: a DmaBuf owns its memory exclusively, or shares it under the owner/view protocol
// of `DmaBuf::share` (views never write, the owner never writes below the frozen mark while a
// view is alive, so concurrent accesses from different threads touch disjoint bytes or only
// read); the fixed arena it may point into is kept alive by an Arc, and a slot freed on
// another thread goes back through the owning core's mailbox.
unsafe impl Send for DmaBuf {}
// SAFETY: shared references only read the initialised bytes.
unsafe impl Sync for DmaBuf {}

impl DmaBuf {
    /// An empty buffer with room for `capacity` bytes (rounded up to 4 KiB), from the
    /// current core's pool when called on a core.
    pub fn with_capacity(capacity: usize) -> DmaBuf {
        let cap = round_up(capacity.max(1));
        let (ptr, origin) = pool::take(cap);
        DmaBuf {
            ptr,
            cap,
            head: 0,
            len: 0,
            init: 0,
            frozen: 0,
            origin,
        }
    }

    /// A buffer of `len` zero bytes.
    pub fn zeroed(len: usize) -> DmaBuf {
        let mut b = DmaBuf::with_capacity(len);
        b.resize(len, 0);
        b
    }

    /// A buffer holding a copy of `data`.
    pub fn from_slice(data: &[u8]) -> DmaBuf {
        let mut b = DmaBuf::with_capacity(data.len());
        b.extend_from_slice(data);
        b
    }

    /// An empty buffer from the current core's registered arena if `capacity` fits a slot,
    /// one is free and no [`DmaAllocator`](super::DmaAllocator) is installed (the arena is
    /// heap memory); otherwise a pooled buffer (counted in
    /// [`PoolStats::fixed_fallbacks`](super::PoolStats)).
    pub fn fixed(capacity: usize) -> DmaBuf {
        let cap = round_up(capacity.max(1));
        match pool::take_fixed(cap) {
            Some((ptr, slot_bytes, origin)) => DmaBuf {
                ptr,
                cap: slot_bytes,
                head: 0,
                len: 0,
                init: 0,
                frozen: 0,
                origin,
            },
            None => DmaBuf::with_capacity(cap),
        }
    }

    /// Initialised bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when no byte is initialised.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Bytes of memory from the window start to the end of the buffer.
    pub fn capacity(&self) -> usize {
        self.cap - self.head
    }

    /// Moves the window (what the buffer reads, writes and derefs to) to bytes
    /// `start..end` of the whole buffer, without copying: e.g. to write back the middle of a
    /// staging buffer. `start` must be a multiple of [`WINDOW_ALIGN_BYTES`] (the window stays
    /// aligned for O_DIRECT) and `end` at most the initialised high-water mark.
    /// `set_window(0, n)` returns to the start.
    pub fn set_window(&mut self, start: usize, end: usize) {
        assert!(
            start.is_multiple_of(WINDOW_ALIGN_BYTES),
            "window start {start} is not 512-byte aligned"
        );
        assert!(
            start <= end && end <= self.init,
            "window {start}..{end} outside the {} initialised bytes",
            self.init
        );
        self.head = start;
        self.len = end - start;
    }

    /// Start of the window in bytes from the start of the buffer.
    pub fn window_start(&self) -> usize {
        self.head
    }

    /// A read-only view of bytes `start..end` of the whole buffer (same rules as
    /// [`DmaBuf::set_window`]), sharing the memory instead of copying it: e.g. to write a
    /// staging buffer's first blocks to a device while the owner keeps appending.
    ///
    /// The view derefs to those bytes and can be written to a device (it implements
    /// [`IoBuf`]); anything that would write into it panics. The owner keeps working, but
    /// while any view is alive it may only write at or past the largest `end` ever shared
    /// (appending is fine, rewriting shared bytes panics). The memory goes back to its pool
    /// when the owner and all views are dropped. Sharing a view is not possible (panics).
    pub fn share(&mut self, start: usize, end: usize) -> DmaBuf {
        assert!(
            start.is_multiple_of(WINDOW_ALIGN_BYTES),
            "view start {start} is not 512-byte aligned"
        );
        assert!(
            start <= end && end <= self.init,
            "view {start}..{end} outside the {} initialised bytes",
            self.init
        );
        let mem = match &self.origin {
            Origin::Shared { view: true, .. } => panic!("a read-only view cannot be shared"),
            Origin::Shared { mem, .. } => mem.clone(),
            _ => {
                let origin = std::mem::replace(&mut self.origin, Origin::Direct(Mem::Heap));
                let mem = Arc::new(SharedMem {
                    ptr: self.ptr,
                    cap: self.cap,
                    origin: Some(origin),
                });
                self.origin = Origin::Shared {
                    mem: mem.clone(),
                    view: false,
                };
                mem
            }
        };
        self.frozen = self.frozen.max(end);
        DmaBuf {
            ptr: self.ptr,
            cap: self.cap,
            head: start,
            len: end - start,
            init: end,
            frozen: 0,
            origin: Origin::Shared { mem, view: true },
        }
    }

    /// Whether this is a read-only view made by [`DmaBuf::share`].
    pub fn is_view(&self) -> bool {
        matches!(self.origin, Origin::Shared { view: true, .. })
    }

    /// Panics unless bytes from `from` (from `ptr`) on may be written now: never in a view;
    /// in a shared owner only at or past the frozen mark while a view is alive.
    fn check_writable(&mut self, from: usize) {
        if let Origin::Shared { mem, view } = &mut self.origin {
            assert!(!*view, "a read-only DmaBuf view cannot be written");
            // `get_mut` succeeds only when no view is alive, and synchronises with their
            // drops (on any thread), so their reads happened before our writes.
            if from < self.frozen {
                assert!(
                    Arc::get_mut(mem).is_some(),
                    "DmaBuf write at {from} below {} bytes shared with a live view",
                    self.frozen
                );
            }
        }
    }

    /// The origin that decides where the memory goes back (looking through sharing).
    fn root_origin(&self) -> Option<&Origin> {
        match &self.origin {
            Origin::Shared { mem, .. } => mem.origin.as_ref(),
            o => Some(o),
        }
    }

    fn base(&self) -> *mut u8 {
        // SAFETY: head <= cap, so the result stays inside (or one past) the allocation.
        unsafe { self.ptr.as_ptr().add(self.head) }
    }

    fn mark_init(&mut self) {
        self.init = self.init.max(self.head + self.len);
    }
    /// Drops all bytes (keeps the memory).
    pub fn clear(&mut self) {
        self.len = 0;
    }
    /// Shortens to `len` bytes (no-op if already shorter).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }
    /// Appends `data`. Panics if it does not fit the capacity (buffers never reallocate: the
    /// kernel may hold their address).
    pub fn extend_from_slice(&mut self, data: &[u8]) {
        self.check_writable(self.head + self.len);
        assert!(
            self.len + data.len() <= self.capacity(),
            "DmaBuf overflow: {} + {} > capacity {}",
            self.len,
            data.len(),
            self.capacity()
        );
        // SAFETY: the destination range lies inside our allocation (checked above) and
        // cannot overlap `data`, which is borrowed immutably while we hold `&mut self`.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.base().add(self.len), data.len())
        };
        self.len += data.len();
        self.mark_init();
    }
    /// Grows or shrinks to `len` bytes, filling new bytes with `value`. Panics past capacity.
    pub fn resize(&mut self, len: usize, value: u8) {
        assert!(
            len <= self.capacity(),
            "DmaBuf resize to {len} past capacity {}",
            self.capacity()
        );
        if len > self.len {
            self.check_writable(self.head + self.len);
            // SAFETY: the range [self.len, len) lies inside our allocation.
            unsafe { std::ptr::write_bytes(self.base().add(self.len), value, len - self.len) };
        }
        self.len = len;
        self.mark_init();
    }
    /// Whether the memory is in a registered arena.
    pub fn is_fixed(&self) -> bool {
        matches!(self.root_origin(), Some(Origin::Fixed { .. }))
    }

    /// Whether the memory came from `alloc` (see [`set_dma_allocator`](super::set_dma_allocator)):
    /// a backend whose driver needs its own DMA memory uses such a buffer in place instead
    /// of copying it.
    pub fn allocated_by(&self, alloc: &Arc<dyn DmaAllocator>) -> bool {
        match self.root_origin() {
            Some(Origin::Direct(Mem::External(a)))
            | Some(Origin::Pooled {
                mem: Mem::External(a),
                ..
            }) => Arc::ptr_eq(a, alloc),
            _ => false,
        }
    }
}

/// Rounds `n` up to a multiple of [`DMA_ALIGN_BYTES`].
pub(crate) fn round_up(n: usize) -> usize {
    n.div_ceil(DMA_ALIGN_BYTES) * DMA_ALIGN_BYTES
}

/// Layout of a heap allocation of `cap` bytes.
pub(crate) fn layout(cap: usize) -> Layout {
    Layout::from_size_align(cap, DMA_ALIGN_BYTES).expect("buffer size overflows Layout")
}

impl Deref for DmaBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the first `len` bytes are initialised and owned by us.
        unsafe { std::slice::from_raw_parts(self.base(), self.len) }
    }
}

impl DerefMut for DmaBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.check_writable(self.head);
        // SAFETY: the first `len` bytes are initialised and, after the check above (no view
        // sees them, or this is not shared memory), ours exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.base(), self.len) }
    }
}

impl std::fmt::Debug for DmaBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DmaBuf")
            .field("len", &self.len)
            .field("capacity", &self.capacity())
            .field("window_start", &self.head)
            .field("fixed", &self.is_fixed())
            .field("view", &self.is_view())
            .finish()
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        let origin = std::mem::replace(&mut self.origin, Origin::Direct(Mem::Heap));
        pool::give_back(self.ptr, self.cap, origin);
    }
}

// SAFETY: the memory is owned by the DmaBuf (or shared, kept alive by the Arc) and never
// moves; `len` bytes are initialised, and in shared memory they do not change while a view
// is alive (`check_writable`).
unsafe impl IoBuf for DmaBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.base()
    }
    fn bytes_init(&self) -> usize {
        self.len
    }
    fn fixed_index(&self) -> Option<u16> {
        match self.root_origin() {
            // Only on the ring it is registered with (not core 0 of another runtime).
            Some(Origin::Fixed { ring, slot, .. }) if crate::registry::is_current(*ring) => {
                Some(*slot)
            }
            _ => None,
        }
    }
}

// SAFETY: `cap` bytes are allocated and writable; set_init is bounded by the capacity.
unsafe impl IoBufMut for DmaBuf {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.check_writable(self.head);
        self.base()
    }
    fn bytes_total(&self) -> usize {
        self.capacity()
    }
    unsafe fn set_init(&mut self, n: usize) {
        self.check_writable(self.head);
        self.len = n.min(self.capacity());
        self.mark_init();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_bounded() {
        let mut b = DmaBuf::with_capacity(100);
        assert_eq!(b.capacity(), 4096);
        assert_eq!(b.stable_ptr() as usize % DMA_ALIGN_BYTES, 0);
        b.extend_from_slice(b"hello");
        assert_eq!(&b[..], b"hello");
        b.resize(10, 7);
        assert_eq!(&b[5..], &[7; 5]);
        b.truncate(2);
        assert_eq!(&b[..], b"he");
    }

    #[test]
    fn window_moves_without_copying() {
        let mut b = DmaBuf::with_capacity(3 * 4096);
        let data: Vec<u8> = (0..3 * 4096).map(|i| (i / 4096) as u8).collect();
        b.extend_from_slice(&data);
        b.set_window(4096, 2 * 4096 + 100);
        assert_eq!(b.len(), 4096 + 100);
        assert_eq!(b.capacity(), 2 * 4096);
        assert!(b[..4096].iter().all(|&x| x == 1));
        assert_eq!(b.stable_ptr() as usize % DMA_ALIGN_BYTES, 0);
        b.set_window(0, 3 * 4096);
        assert!(b[..] == data[..]);
    }

    #[test]
    #[should_panic(expected = "outside the")]
    fn window_cannot_expose_uninitialised_bytes() {
        let mut b = DmaBuf::with_capacity(2 * 4096);
        b.extend_from_slice(&[1; 10]);
        b.set_window(0, 4096);
    }

    #[test]
    fn views_share_memory_while_the_owner_appends() {
        let mut b = DmaBuf::with_capacity(3 * 4096);
        b.extend_from_slice(&[1; 4096 + 10]);
        let view = b.share(0, 4096);
        assert!(view.is_view() && !b.is_view());
        assert_eq!(view.stable_ptr(), b.stable_ptr());
        assert_eq!(view.bytes_init(), 4096);
        b.extend_from_slice(&[2; 4096]);
        assert!(
            view.iter().all(|&x| x == 1),
            "the view's bytes do not change"
        );
        assert_eq!(&b[4096..4106], &[1; 10]);
        let second = b.share(4096, 2 * 4096);
        assert_eq!(second.stable_ptr() as usize % DMA_ALIGN_BYTES, 0);
        drop(b);
        assert!(
            second[..10].iter().all(|&x| x == 1),
            "memory outlives the owner"
        );
        drop((view, second));
    }

    #[test]
    #[should_panic(expected = "shared with a live view")]
    fn the_owner_cannot_rewrite_shared_bytes() {
        let mut b = DmaBuf::with_capacity(4096);
        b.extend_from_slice(&[1; 512]);
        let _view = b.share(0, 512);
        b.truncate(0);
        b.extend_from_slice(&[2; 10]);
    }

    #[test]
    fn the_owner_may_rewrite_once_views_are_gone() {
        let mut b = DmaBuf::with_capacity(4096);
        b.extend_from_slice(&[1; 512]);
        drop(b.share(0, 512));
        b[0] = 9;
        assert_eq!(b[0], 9);
    }

    #[test]
    #[should_panic(expected = "read-only")]
    fn a_view_cannot_be_written() {
        let mut b = DmaBuf::with_capacity(4096);
        b.extend_from_slice(&[1; 512]);
        let mut v = b.share(0, 512);
        v[0] = 2;
    }

    #[test]
    #[should_panic(expected = "DmaBuf overflow")]
    fn never_grows_past_capacity() {
        let mut b = DmaBuf::with_capacity(4096);
        b.extend_from_slice(&[0; 4097]);
    }
}
