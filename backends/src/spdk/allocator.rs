//! SPDK's DMA memory: the allocator installed in the runtime (zero copy), the bounce
//! buffers of data that is not SPDK memory, and the counters of both.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use ziob_runtime::DmaAllocator;

use super::ffi;
use crate::model::error::{DeviceError, Result};

/// Smallest bounce buffer, and their alignment.
pub(super) const DMA_MIN_BYTES: usize = 4096;

/// `spdk_dma_malloc`/`spdk_dma_free` as a [`DmaAllocator`] for the runtime's buffer pool.
struct SpdkDmaAllocator;

impl DmaAllocator for SpdkDmaAllocator {
    fn alloc(&self, bytes: usize) -> Option<NonNull<u8>> {
        // SAFETY: plain allocation call; the environment is initialised before this
        // allocator is installed.
        NonNull::new(
            unsafe { ffi::ziob_spdk_dma_alloc(bytes, ziob_runtime::DMA_ALIGN_BYTES) }.cast(),
        )
    }
    unsafe fn free(&self, ptr: NonNull<u8>, _bytes: usize) {
        // SAFETY: the caller guarantees `ptr` came from `alloc` and is not used again;
        // spdk_dma_free may be called from any thread.
        unsafe { ffi::ziob_spdk_dma_free(ptr.as_ptr().cast()) }
    }
    fn name(&self) -> &str {
        "spdk_dma_malloc"
    }
}

/// The process's one SPDK allocator (buffers are recognised by it).
pub(super) fn spdk_allocator() -> &'static Arc<dyn DmaAllocator> {
    static ALLOC: OnceLock<Arc<dyn DmaAllocator>> = OnceLock::new();
    ALLOC.get_or_init(|| Arc::new(SpdkDmaAllocator))
}

/// Makes every runtime core take its [`DmaBuf`]s from SPDK memory (once per core).
pub(super) async fn install_allocator_on_every_core() -> Result<()> {
    for core in 0..ziob_runtime::num_cores() {
        ziob_runtime::call_on(core, || async {
            if ziob_runtime::dma_allocator_name().as_deref() != Some("spdk_dma_malloc") {
                ziob_runtime::set_dma_allocator(Some(spdk_allocator().clone()));
            }
        })
        .await
        .map_err(|e| DeviceError::io("spdk: install DMA allocator", std::io::Error::other(e)))?;
    }
    Ok(())
}

/// One thread's transfer counters: written only by that thread (no shared cache line on
/// the I/O path), summed by [`transfer_stats`].
#[derive(Default)]
pub(super) struct TransferCounters {
    pub(super) zero_copy_cmds: AtomicU64,
    pub(super) bounced_cmds: AtomicU64,
    pub(super) bounced_bytes: AtomicU64,
}

impl TransferCounters {
    /// Adds `n` to a counter of the current thread (its only writer: no atomic add needed).
    pub(super) fn add(counter: impl Fn(&TransferCounters) -> &AtomicU64, n: u64) {
        THREAD_COUNTERS.with(|c| {
            let a = counter(c);
            a.store(a.load(Ordering::Relaxed) + n, Ordering::Relaxed);
        });
    }
}

/// Every thread's counters, kept after the thread exits so the totals never go back.
static ALL_COUNTERS: Mutex<Vec<Arc<TransferCounters>>> = Mutex::new(Vec::new());

thread_local! {
    static THREAD_COUNTERS: Arc<TransferCounters> = {
        let c = Arc::new(TransferCounters::default());
        ALL_COUNTERS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(c.clone());
        c
    };
}

/// How the data of this process's `spdk:` reads, writes and appends reached the device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransferStats {
    /// Commands that used the caller's [`DmaBuf`](ziob_runtime::DmaBuf) in place (it was SPDK memory).
    pub zero_copy_cmds: u64,
    /// Commands that copied through an SPDK DMA buffer.
    pub bounced_cmds: u64,
    /// Bytes those copies moved.
    pub bounced_bytes: u64,
}

/// Counters of zero-copy and copied data commands since the process started.
pub fn transfer_stats() -> TransferStats {
    let all = ALL_COUNTERS.lock().unwrap_or_else(|e| e.into_inner());
    let sum = |f: fn(&TransferCounters) -> &AtomicU64| {
        all.iter().map(|c| f(c).load(Ordering::Relaxed)).sum()
    };
    TransferStats {
        zero_copy_cmds: sum(|c| &c.zero_copy_cmds),
        bounced_cmds: sum(|c| &c.bounced_cmds),
        bounced_bytes: sum(|c| &c.bounced_bytes),
    }
}

/// A buffer from SPDK's DMA allocator.
pub(super) struct DmaChunk {
    /// Start of the buffer.
    pub(super) ptr: *mut u8,
    /// Its size in bytes (a power of two, at least [`DMA_MIN_BYTES`]).
    pub(super) cap: usize,
}

impl DmaChunk {
    pub(super) fn alloc(len: usize) -> Option<DmaChunk> {
        let cap = len.max(DMA_MIN_BYTES).next_power_of_two();
        // SAFETY: plain allocation call.
        let ptr = unsafe { ffi::ziob_spdk_dma_alloc(cap, DMA_MIN_BYTES) } as *mut u8;
        (!ptr.is_null()).then_some(DmaChunk { ptr, cap })
    }
    pub(super) fn slice(&self, len: usize) -> &[u8] {
        assert!(len <= self.cap);
        // SAFETY: `ptr` points to `cap` bytes owned by this chunk.
        unsafe { std::slice::from_raw_parts(self.ptr, len) }
    }
    pub(super) fn slice_mut(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= self.cap);
        // SAFETY: as above, and `&mut self` is unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, len) }
    }
}

impl Drop for DmaChunk {
    fn drop(&mut self) {
        // SAFETY: allocated by ziob_spdk_dma_alloc, freed once.
        unsafe { ffi::ziob_spdk_dma_free(self.ptr.cast()) }
    }
}
