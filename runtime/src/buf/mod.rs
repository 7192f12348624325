//! Buffers the kernel reads from and writes into.
//!
//! I/O takes a buffer by value and returns it with the result, so the buffer cannot be
//! touched — or freed — while the kernel owns it. [`DmaBuf`] is the aligned buffer of the
//! project (4 KiB aligned, pooled per core, optionally registered with the ring); plain
//! `Vec<u8>` and `Box<[u8]>` work too for buffered I/O.

pub(crate) mod alloc;
pub(crate) mod dma;
pub(crate) mod pool;

pub use alloc::{dma_allocator_name, set_dma_allocator, DmaAllocator};
pub use dma::{DmaBuf, DMA_ALIGN_BYTES, WINDOW_ALIGN_BYTES};
pub use pool::{pool_stats, PoolStats};

/// A buffer whose memory stays put while it is moved around (heap or static memory).
///
/// # Safety
/// `stable_ptr` must point to `bytes_init` initialised bytes that do not move or get freed
/// while the value is alive, even when the value itself is moved.
pub unsafe trait IoBuf: Unpin + 'static {
    /// Start of the memory.
    fn stable_ptr(&self) -> *const u8;
    /// Initialised bytes: what a write sends.
    fn bytes_init(&self) -> usize;
    /// The registered buffer index, if this buffer lives in the current core's fixed arena.
    fn fixed_index(&self) -> Option<u16> {
        None
    }
}

/// A buffer the kernel may fill.
///
/// # Safety
/// `stable_mut_ptr` must point to `bytes_total` writable bytes with the stability guarantee
/// of [`IoBuf`].
pub unsafe trait IoBufMut: IoBuf {
    /// Start of the memory.
    fn stable_mut_ptr(&mut self) -> *mut u8;
    /// Capacity: what a read may fill.
    fn bytes_total(&self) -> usize;
    /// Marks the first `n` bytes initialised (after the kernel wrote them).
    ///
    /// # Safety
    /// The first `n` bytes must really be initialised.
    unsafe fn set_init(&mut self, n: usize);
}

// SAFETY: a Vec's heap memory does not move when the Vec is moved; len bytes are initialised.
unsafe impl IoBuf for Vec<u8> {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
}

// SAFETY: capacity bytes are allocated and writable; set_init is only called with counts the
// kernel reported as written.
unsafe impl IoBufMut for Vec<u8> {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn bytes_total(&self) -> usize {
        self.capacity()
    }
    unsafe fn set_init(&mut self, n: usize) {
        if n > self.len() {
            // SAFETY: the caller guarantees the first n bytes are initialised; n <= capacity.
            unsafe { self.set_len(n) };
        }
    }
}

// SAFETY: a boxed slice's memory is fixed and fully initialised.
unsafe impl IoBuf for Box<[u8]> {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
}

// SAFETY: as above; every byte is already initialised, so set_init has nothing to record.
unsafe impl IoBufMut for Box<[u8]> {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn bytes_total(&self) -> usize {
        self.len()
    }
    unsafe fn set_init(&mut self, _n: usize) {}
}

// SAFETY: static memory never moves or gets freed.
unsafe impl IoBuf for &'static [u8] {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
}

/// A buffer the kernel may fill only up to `limit` bytes: a read of exactly that many bytes
/// into a larger buffer (a [`DmaBuf`]'s capacity is a whole number of 4 KiB blocks).
pub struct Limited<B> {
    buf: B,
    limit: usize,
}

impl<B> Limited<B> {
    /// `buf`, of which reads fill at most the first `limit` bytes.
    pub fn new(buf: B, limit: usize) -> Limited<B> {
        Limited { buf, limit }
    }

    /// The buffer.
    pub fn into_inner(self) -> B {
        self.buf
    }
}

// SAFETY: the memory is `buf`'s, with its stability; fewer bytes are claimed initialised.
unsafe impl<B: IoBuf> IoBuf for Limited<B> {
    fn stable_ptr(&self) -> *const u8 {
        self.buf.stable_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.buf.bytes_init().min(self.limit)
    }
    fn fixed_index(&self) -> Option<u16> {
        self.buf.fixed_index()
    }
}

// SAFETY: at most `buf`'s writable bytes are claimed; `set_init` is passed on with the
// caller's guarantee (n is at most `bytes_total`, so within `limit`).
unsafe impl<B: IoBufMut> IoBufMut for Limited<B> {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.buf.stable_mut_ptr()
    }
    fn bytes_total(&self) -> usize {
        self.buf.bytes_total().min(self.limit)
    }
    unsafe fn set_init(&mut self, n: usize) {
        // SAFETY: the caller guarantees the first n bytes are initialised.
        unsafe { self.buf.set_init(n) }
    }
}
