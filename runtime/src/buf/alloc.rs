//! Where a core's [`DmaBuf`](super::DmaBuf) memory comes from: the heap by default, or an
//! external [`DmaAllocator`] a backend installs (SPDK's hugepage memory, which its userspace
//! driver can hand to the device without a copy).

use std::ptr::NonNull;
use std::sync::Arc;

use super::dma::layout;

/// A source of memory a device can DMA into, other than the heap.
///
/// A backend whose driver needs its own memory (SPDK: pinned hugepages it can translate to
/// bus addresses) installs one on each core with [`set_dma_allocator`]. From then on that
/// core's pool takes [`DmaBuf`](super::DmaBuf)s from it, and the backend can check a buffer
/// with [`DmaBuf::allocated_by`](super::DmaBuf::allocated_by) and use it in place.
pub trait DmaAllocator: Send + Sync + 'static {
    /// `bytes` (a multiple of 4 KiB) aligned to [`DMA_ALIGN_BYTES`](super::DMA_ALIGN_BYTES),
    /// or `None` when the allocator is out of memory.
    fn alloc(&self, bytes: usize) -> Option<NonNull<u8>>;

    /// Frees memory from [`alloc`](DmaAllocator::alloc).
    ///
    /// # Safety
    /// `ptr` came from `self.alloc(bytes)` and is not used afterwards. May be called from
    /// any thread.
    unsafe fn free(&self, ptr: NonNull<u8>, bytes: usize);

    /// A short name for logs.
    fn name(&self) -> &str;
}

/// The memory source of a buffer or a pool: which allocator frees it.
#[derive(Clone)]
pub(crate) enum Mem {
    /// The global allocator, with [`DMA_ALIGN_BYTES`](super::DMA_ALIGN_BYTES) alignment.
    Heap,
    /// An installed [`DmaAllocator`].
    External(Arc<dyn DmaAllocator>),
}

impl Mem {
    /// `bytes` of memory, or `None` when an external allocator is out of memory (the heap
    /// aborts through `handle_alloc_error` instead, like every Rust allocation).
    pub(crate) fn alloc(&self, bytes: usize) -> Option<NonNull<u8>> {
        match self {
            Mem::Heap => Some(heap_alloc(bytes)),
            Mem::External(a) => {
                let p = a.alloc(bytes)?;
                debug_assert_eq!(p.as_ptr() as usize % super::DMA_ALIGN_BYTES, 0);
                Some(p)
            }
        }
    }

    /// Frees `bytes` at `ptr`.
    ///
    /// # Safety
    /// `ptr` came from `self.alloc(bytes)` and is not used afterwards.
    pub(crate) unsafe fn free(&self, ptr: NonNull<u8>, bytes: usize) {
        match self {
            // SAFETY: the caller guarantees ptr came from heap_alloc(bytes), i.e. layout(bytes).
            Mem::Heap => unsafe { std::alloc::dealloc(ptr.as_ptr(), layout(bytes)) },
            // SAFETY: forwarded caller guarantee.
            Mem::External(a) => unsafe { a.free(ptr, bytes) },
        }
    }

    /// Whether both are the same source.
    pub(crate) fn same(&self, other: &Mem) -> bool {
        match (self, other) {
            (Mem::Heap, Mem::Heap) => true,
            (Mem::External(a), Mem::External(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// `bytes` from the global allocator, 4 KiB aligned.
pub(crate) fn heap_alloc(bytes: usize) -> NonNull<u8> {
    let l = layout(bytes);
    // SAFETY: `l` has a non-zero size (callers round up to at least 4 KiB).
    let p = unsafe { std::alloc::alloc(l) };
    NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(l))
}

/// Makes the current core's buffer pool take new [`DmaBuf`](super::DmaBuf)s from `alloc`
/// (`None`: the heap again). The pool's cached buffers are released first, so every buffer
/// taken afterwards comes from the new source; buffers already handed out keep theirs and
/// go back to it when dropped. When `alloc` runs out of memory the pool releases its cache
/// and retries once, then falls back to the heap for that buffer (counted in
/// [`PoolStats::external_fallbacks`](super::PoolStats)).
///
/// Panics when called off a runtime core.
pub fn set_dma_allocator(alloc: Option<Arc<dyn DmaAllocator>>) {
    let core = crate::core::current("set_dma_allocator");
    let mem = alloc.map_or(Mem::Heap, Mem::External);
    core.pool.borrow_mut().set_mem(mem);
}

/// The name of the current core's installed [`DmaAllocator`], `None` for the heap (and off
/// a core).
pub fn dma_allocator_name() -> Option<String> {
    crate::core::with_core(|c| match &c.pool.borrow().mem {
        Mem::Heap => None,
        Mem::External(a) => Some(a.name().to_string()),
    })
    .flatten()
}
