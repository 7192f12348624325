//! The per-core buffer pool: size classes of aligned memory reused without a global allocator
//! call, and the registered (fixed) buffer arena.

use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::alloc::{heap_alloc, Mem};
use super::dma::{layout, Origin, DMA_ALIGN_BYTES};
use crate::config::FixedBufferConfig;
use crate::core::{CoreRemote, Message};
use crate::error::{Error, Result};
use crate::registry::on_ring;
use crate::ring::Ring;
use crate::ring::RingId;

/// Smallest size class: 4 KiB.
const CLASS_MIN_SHIFT: u32 = 12;
/// Largest size class: 8 MiB; bigger buffers are allocated directly.
const CLASS_MAX_SHIFT: u32 = 23;

/// Counters of one core's pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers handed out from the cache (no allocator call).
    pub reuses: u64,
    /// Buffers that needed an allocator call.
    pub allocations: u64,
    /// Fixed (registered) buffers handed out.
    pub fixed_taken: u64,
    /// Requests for a fixed buffer served by a plain one (arena full or buffer too large).
    pub fixed_fallbacks: u64,
    /// Bytes cached right now (at most the runtime's
    /// [`buffer_cache_bytes`](crate::Config::buffer_cache_bytes)).
    pub cached_bytes: usize,
    /// Buffers freed to their allocator because the cache was full: returned ones, or
    /// cached ones of another size making room for them (see `BufPool::put`).
    pub cache_overflows: u64,
    /// Buffers taken from the heap because the installed
    /// [`DmaAllocator`](super::DmaAllocator) was out of memory.
    pub external_fallbacks: u64,
    /// Pooled buffers dropped on another thread that came back to this pool (taken back
    /// when the pool next missed, see `Returns`; counted also when the cache then had no
    /// room for one).
    pub returned: u64,
}

/// Pooled buffers of one core dropped on another thread (a read's buffer made on the zone's
/// core and dropped by the caller on its own, say), waiting for their pool to take them back.
/// Freed to the allocator instead, such a buffer was faulted in again by the next allocation
/// on its core: a compaction reading 64 KiB pieces through another core had that core spend
/// half its time zeroing fresh (huge) pages. The pool takes them back when it misses, so
/// returning one costs the dropping thread a lock and no message or wake-up.
pub(crate) struct Returns {
    /// Whether `list` may hold buffers (read on every miss without the lock).
    pending: AtomicBool,
    list: Mutex<ReturnList>,
    /// Most bytes the list holds (the pool's cache size): past it a buffer is freed at once,
    /// so a core that stops missing (idle, or served by its cache) holds no more than that.
    bytes_max: usize,
}

/// The buffers of a [`Returns`], their bytes, and whether its pool is gone (then buffers are
/// freed at once).
#[derive(Default)]
struct ReturnList {
    bufs: Vec<Returned>,
    bytes: usize,
    closed: bool,
}

/// A pooled buffer on its way back: `bytes` (its class size) at `ptr`, from `mem`.
struct Returned {
    ptr: NonNull<u8>,
    bytes: usize,
    mem: Mem,
}

// SAFETY: a `Returned` owns its memory exclusively (the buffer that held it was dropped);
// any thread may free it (`Mem::free`, `DmaAllocator::free` may be called from any thread).
unsafe impl Send for Returned {}

impl Returned {
    fn free(self) {
        // SAFETY: pooled memory was allocated from `mem` with its class size, and nothing
        // else refers to it.
        unsafe { self.mem.free(self.ptr, self.bytes) }
    }
}

impl Returns {
    fn new(bytes_max: usize) -> Returns {
        Returns {
            pending: AtomicBool::new(false),
            list: Mutex::new(ReturnList::default()),
            bytes_max,
        }
    }

    /// Queues a buffer for its pool, or frees it if the pool is gone or the list full.
    fn push(&self, buf: Returned) {
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        if list.closed || list.bytes + buf.bytes > self.bytes_max {
            drop(list);
            buf.free();
            return;
        }
        list.bytes += buf.bytes;
        list.bufs.push(buf);
        // Under the lock: a pool that finds it false after taking the list finds the
        // buffer on its next look.
        self.pending.store(true, Ordering::Release);
    }

    /// The queued buffers, if any.
    fn take(&self) -> Vec<Returned> {
        if !self.pending.load(Ordering::Acquire) {
            return Vec::new();
        }
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        self.pending.store(false, Ordering::Relaxed);
        list.bytes = 0;
        std::mem::take(&mut list.bufs)
    }

    /// Frees the queued buffers and every later one (the pool is gone).
    fn close(&self) {
        let bufs = {
            let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
            list.closed = true;
            list.bytes = 0;
            std::mem::take(&mut list.bufs)
        };
        bufs.into_iter().for_each(Returned::free);
    }
}

/// A registered arena: `count` slots of `slot_bytes`, alive while any buffer points into it.
pub(crate) struct FixedArena {
    ptr: NonNull<u8>,
    slot_bytes: usize,
    count: usize,
    ring: RingId,
    remote: Weak<CoreRemote>,
}

// SAFETY: the arena is plain memory; slots are handed out exclusively to one DmaBuf each.
unsafe impl Send for FixedArena {}
// SAFETY: as above; the arena itself is never read or written through a shared reference.
unsafe impl Sync for FixedArena {}

impl Drop for FixedArena {
    fn drop(&mut self) {
        // SAFETY: allocated in `BufPool::new` with exactly this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout(self.slot_bytes * self.count)) };
    }
}

/// One core's pool.
pub(crate) struct BufPool {
    ring: RingId,
    /// Where new buffers come from; every cached pointer is from here.
    pub(crate) mem: Mem,
    /// Free buffers per size class: taken from the back (the most recently returned),
    /// evicted from the front.
    classes: Vec<VecDeque<NonNull<u8>>>,
    fixed: Option<Arc<FixedArena>>,
    fixed_free: Vec<u16>,
    /// Most bytes `classes` may hold.
    cache_bytes_max: usize,
    /// This pool's buffers dropped on other threads.
    returns: Arc<Returns>,
    stats: PoolStats,
}

fn class_of(cap: usize) -> Option<usize> {
    let shift = cap
        .next_power_of_two()
        .trailing_zeros()
        .max(CLASS_MIN_SHIFT);
    (shift <= CLASS_MAX_SHIFT).then(|| (shift - CLASS_MIN_SHIFT) as usize)
}

fn class_bytes(class: usize) -> usize {
    1 << (class as u32 + CLASS_MIN_SHIFT)
}

fn memlock_limit_bytes() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } == 0 {
        r.rlim_cur
    } else {
        0
    }
}

impl BufPool {
    pub(crate) fn new(
        ring_id: RingId,
        ring: &Ring,
        fixed: FixedBufferConfig,
        cache_bytes_max: usize,
    ) -> Result<BufPool> {
        let mut pool = BufPool {
            ring: ring_id,
            mem: Mem::Heap,
            classes: (CLASS_MIN_SHIFT..=CLASS_MAX_SHIFT)
                .map(|_| VecDeque::new())
                .collect(),
            fixed: None,
            fixed_free: Vec::new(),
            cache_bytes_max,
            returns: Arc::new(Returns::new(cache_bytes_max)),
            stats: PoolStats::default(),
        };
        if fixed.count > 0 {
            let bytes = fixed.size_bytes * fixed.count as usize;
            let ptr = heap_alloc(bytes);
            let arena = Arc::new(FixedArena {
                ptr,
                slot_bytes: fixed.size_bytes,
                count: fixed.count as usize,
                ring: ring_id,
                remote: Weak::new(),
            });
            let iovecs: Vec<libc::iovec> = (0..fixed.count as usize)
                .map(|i| libc::iovec {
                    // SAFETY: slot i lies inside the arena allocation.
                    iov_base: unsafe { ptr.as_ptr().add(i * fixed.size_bytes) }.cast(),
                    iov_len: fixed.size_bytes,
                })
                .collect();
            // SAFETY: the arena is kept alive by `pool.fixed` (dropped after the ring, see
            // Core's field order) and by every DmaBuf pointing into it.
            if let Err(e) = unsafe { ring.register_buffers(&iovecs) } {
                return Err(match e.raw_os_error() {
                    Some(libc::ENOMEM) | Some(libc::EPERM) => Error::MemlockTooSmall {
                        bytes,
                        limit_bytes: memlock_limit_bytes(),
                        source: e,
                    },
                    _ => Error::Io {
                        op: "register_buffers",
                        source: e,
                    },
                });
            }
            pool.fixed_free = (0..fixed.count as u16).rev().collect();
            pool.fixed = Some(arena);
        }
        Ok(pool)
    }

    /// Connects the arena to the core's mailbox, so slots freed elsewhere come back.
    pub(crate) fn set_remote(&mut self, remote: &Arc<CoreRemote>) {
        if let Some(arena) = self.fixed.as_mut() {
            if let Some(a) = Arc::get_mut(arena) {
                a.remote = Arc::downgrade(remote);
            }
        }
    }

    fn take(&mut self, cap: usize) -> (NonNull<u8>, Origin) {
        let Some(class) = class_of(cap) else {
            self.stats.allocations += 1;
            let (p, mem) = match self.alloc_retrying(cap) {
                Some(p) => (p, self.mem.clone()),
                None => (self.heap_fallback(cap), Mem::Heap),
            };
            return (p, Origin::Direct(mem));
        };
        if self.classes[class].is_empty() {
            self.take_returns();
        }
        if let Some(p) = self.classes[class].pop_back() {
            self.stats.reuses += 1;
            self.stats.cached_bytes -= class_bytes(class);
            return (p, self.pooled_origin());
        }
        self.stats.allocations += 1;
        match self.alloc_retrying(class_bytes(class)) {
            Some(p) => (p, self.pooled_origin()),
            None => (self.heap_fallback(cap), Origin::Direct(Mem::Heap)),
        }
    }

    fn pooled_origin(&self) -> Origin {
        Origin::Pooled {
            ring: self.ring,
            mem: self.mem.clone(),
            returns: self.returns.clone(),
        }
    }

    /// Caches the buffers dropped on other threads since the last look (or frees them, as
    /// [`BufPool::put`] does).
    fn take_returns(&mut self) {
        for buf in self.returns.take() {
            self.stats.returned += 1;
            let Returned { ptr, bytes, mem } = buf;
            self.put(ptr, bytes, &mem);
        }
    }

    /// `bytes` from the pool's source; when an external allocator is out of memory, the
    /// cache is released to it and the allocation retried once.
    fn alloc_retrying(&mut self, bytes: usize) -> Option<NonNull<u8>> {
        if let Some(p) = self.mem.alloc(bytes) {
            return Some(p);
        }
        self.take_returns();
        self.release_cache();
        self.mem.alloc(bytes)
    }

    fn heap_fallback(&mut self, bytes: usize) -> NonNull<u8> {
        self.stats.external_fallbacks += 1;
        heap_alloc(bytes)
    }

    /// Caches a class buffer from `mem`, or frees it if the pool now takes memory from
    /// elsewhere. When the cache would exceed its bytes, the class holding the most bytes
    /// (this one included) gives up its oldest buffer until this one fits — or, if that
    /// class is this buffer's own, this buffer is freed. So the cache follows the sizes in
    /// use, instead of staying full of a size no longer taken while every buffer of the size
    /// now in use is freed on its return and faulted in again by the next take (a cache full
    /// of one size freed 417 of 591 read buffers in a 100,000 × 1 KiB overwrite).
    fn put(&mut self, ptr: NonNull<u8>, cap: usize, mem: &Mem) {
        let class = class_of(cap).expect("pooled buffers have a class");
        let bytes = class_bytes(class);
        if !mem.same(&self.mem) || bytes > self.cache_bytes_max {
            if mem.same(&self.mem) {
                self.stats.cache_overflows += 1;
            }
            // SAFETY: pooled memory was allocated from `mem` with the class size.
            unsafe { mem.free(ptr, bytes) };
            return;
        }
        // Once a buffer was evicted for this one, this one is kept (evicting more of
        // another class if need be): nothing is evicted for nothing.
        let mut evicted = false;
        while self.stats.cached_bytes + bytes > self.cache_bytes_max {
            let holds = |c: usize| self.classes[c].len() * class_bytes(c);
            let victim = (0..self.classes.len())
                .filter(|&c| c != class && holds(c) > 0)
                .max_by_key(|&c| holds(c))
                .filter(|&c| evicted || holds(c) > holds(class));
            self.stats.cache_overflows += 1;
            let Some(victim) = victim else {
                // SAFETY: as above.
                unsafe { mem.free(ptr, bytes) };
                return;
            };
            evicted = true;
            let old = self.classes[victim]
                .pop_front()
                .expect("the victim class holds buffers");
            self.stats.cached_bytes -= class_bytes(victim);
            // SAFETY: cached pointers were allocated from self.mem with their class size.
            unsafe { self.mem.free(old, class_bytes(victim)) };
        }
        self.classes[class].push_back(ptr);
        self.stats.cached_bytes += bytes;
    }

    /// Frees every cached buffer to the pool's source.
    fn release_cache(&mut self) {
        for (class, list) in self.classes.iter_mut().enumerate() {
            for p in list.drain(..) {
                // SAFETY: cached pointers were allocated from self.mem with their class size.
                unsafe { self.mem.free(p, class_bytes(class)) };
            }
        }
        self.stats.cached_bytes = 0;
    }

    /// Switches the source of new buffers (see [`super::set_dma_allocator`]).
    pub(crate) fn set_mem(&mut self, mem: Mem) {
        self.release_cache();
        self.mem = mem;
    }

    pub(crate) fn return_fixed(&mut self, slot: u16) {
        self.fixed_free.push(slot);
    }

    pub(crate) fn stats(&self) -> PoolStats {
        self.stats
    }
}

impl Drop for BufPool {
    fn drop(&mut self) {
        self.returns.close();
        self.release_cache();
    }
}

/// Takes `cap` bytes (a multiple of 4 KiB) from the current core's pool, or the heap off-core.
pub(crate) fn take(cap: usize) -> (NonNull<u8>, Origin) {
    crate::core::with_core(|c| c.pool.borrow_mut().take(cap))
        .unwrap_or_else(|| (heap_alloc(cap), Origin::Direct(Mem::Heap)))
}

/// Takes a fixed slot of at least `cap` bytes from the current core's arena.
pub(crate) fn take_fixed(cap: usize) -> Option<(NonNull<u8>, usize, Origin)> {
    crate::core::with_core(|c| {
        let mut pool = c.pool.borrow_mut();
        let arena = pool.fixed.clone()?;
        // The arena is heap memory: with a DMA allocator installed, buffers must come from it.
        if cap > arena.slot_bytes || matches!(pool.mem, Mem::External(_)) {
            pool.stats.fixed_fallbacks += 1;
            return None;
        }
        let Some(slot) = pool.fixed_free.pop() else {
            pool.stats.fixed_fallbacks += 1;
            return None;
        };
        pool.stats.fixed_taken += 1;
        // SAFETY: slot < count, so the offset lies inside the arena.
        let ptr = unsafe { arena.ptr.as_ptr().add(slot as usize * arena.slot_bytes) };
        let slot_bytes = arena.slot_bytes;
        let ring = arena.ring;
        Some((
            NonNull::new(ptr).expect("arena pointer is non-null"),
            slot_bytes,
            Origin::Fixed { ring, slot, arena },
        ))
    })
    .flatten()
}

/// Returns memory to where it came from.
pub(crate) fn give_back(ptr: NonNull<u8>, cap: usize, origin: Origin) {
    match origin {
        Origin::Direct(mem) => {
            // SAFETY: direct buffers were allocated from `mem` with exactly `cap` bytes.
            unsafe { mem.free(ptr, cap) }
        }
        Origin::Pooled { ring, mem, returns } => {
            let returned = on_ring(ring, |c| {
                let Ok(mut pool) = c.pool.try_borrow_mut() else {
                    return false;
                };
                pool.put(ptr, cap, &mem);
                true
            })
            .unwrap_or(false);
            if !returned {
                let bytes = class_of(cap).map(class_bytes).unwrap_or(cap);
                returns.push(Returned { ptr, bytes, mem });
            }
        }
        // The shared allocation goes back when its last holder drops (`SharedMem::drop`).
        Origin::Shared { mem, .. } => drop(mem),
        Origin::Fixed { ring, slot, arena } => {
            let returned = on_ring(ring, |c| {
                let Ok(mut pool) = c.pool.try_borrow_mut() else {
                    return false;
                };
                if !pool.fixed.as_ref().is_some_and(|a| Arc::ptr_eq(a, &arena)) {
                    return false;
                }
                pool.return_fixed(slot);
                true
            })
            .unwrap_or(false);
            if !returned {
                if let Some(remote) = arena.remote.upgrade() {
                    let _ = remote.send(Message::ReturnFixed(slot));
                }
            }
        }
    }
}

/// Counters of the current core's pool (zeros off-core).
pub fn pool_stats() -> PoolStats {
    crate::core::with_core(|c| c.pool.borrow().stats()).unwrap_or_default()
}

const _: () = assert!(DMA_ALIGN_BYTES == 1 << CLASS_MIN_SHIFT);

#[cfg(test)]
mod tests {
    use super::pool_stats;
    use crate::{DmaBuf, Runtime, BUFFER_CACHE_BYTES_DEFAULT};

    /// Seeded random takes and drops of every size class (and larger): the free memory the
    /// pool keeps never exceeds the configured cap, and the cache is still used.
    fn cache_stays_under(cap: Option<usize>) {
        let mut b = Runtime::builder().cores(1);
        if let Some(cap) = cap {
            b = b.buffer_cache_bytes(cap);
        }
        let limit = cap.unwrap_or(BUFFER_CACHE_BYTES_DEFAULT);
        let rt = b.build().unwrap();
        rt.block_on(move || async move {
            let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ limit as u64;
            let mut held: Vec<DmaBuf> = Vec::new();
            let mut held_bytes = 0usize;
            for step in 0..4000 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                // Hold up to 1.5 × the cap (plus 32 MiB), then release a random share of it.
                if held_bytes < limit + limit / 2 + (32 << 20) && !rng.is_multiple_of(3) {
                    let shift = 12 + (rng >> 8) % 13; // 4 KiB ..= 16 MiB
                    let b = DmaBuf::with_capacity(1 << shift);
                    held_bytes += b.capacity();
                    held.push(b);
                } else {
                    let n = (rng >> 16) as usize % (held.len() + 1);
                    for b in held.drain(..n) {
                        held_bytes -= b.capacity();
                    }
                }
                let s = pool_stats();
                assert!(
                    s.cached_bytes <= limit,
                    "step {step}: {} bytes cached, cap {limit}",
                    s.cached_bytes
                );
            }
            drop(held);
            // Whatever the random phase did: give back more than the cap in one go.
            let fill: Vec<DmaBuf> = (0..(limit >> 20) + 8)
                .map(|_| DmaBuf::with_capacity(1 << 20))
                .collect();
            drop(fill);
            let s = pool_stats();
            assert!(s.cached_bytes <= limit);
            if limit > 0 {
                assert!(s.reuses > 0, "the cache was never used");
            } else {
                assert_eq!(s.reuses, 0);
            }
            assert!(s.cache_overflows > 0, "the test never filled the cache");
        })
        .unwrap();
    }

    /// A cache filled with buffers of one size that is no longer taken still keeps the
    /// buffers of the size now in use: each round's take reuses the last round's buffer
    /// (seeded sizes for both).
    #[test]
    fn a_size_no_longer_used_gives_way_to_the_size_in_use() {
        let limit = 8 << 20;
        let rt = Runtime::builder()
            .cores(1)
            .buffer_cache_bytes(limit)
            .build()
            .unwrap();
        rt.block_on(move || async move {
            let mut rng = 0x853c_49e6_748f_ea9bu64;
            for _ in 0..16 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let old = 4096usize << (rng % 9); // 4 KiB ..= 1 MiB
                let new = 4096usize << ((rng >> 8) % 9);
                if old == new {
                    continue;
                }
                // Fill the cache with `old` buffers.
                let fill: Vec<DmaBuf> = (0..2 * limit / old)
                    .map(|_| DmaBuf::with_capacity(old))
                    .collect();
                drop(fill);
                assert!(
                    pool_stats().cached_bytes + old > limit,
                    "the cache is not full"
                );
                drop(DmaBuf::with_capacity(new));
                let before = pool_stats();
                for round in 0..8 {
                    drop(DmaBuf::with_capacity(new));
                    let s = pool_stats();
                    assert_eq!(
                        s.allocations, before.allocations,
                        "{old} B buffers filled the cache; round {round} of {new} B allocated"
                    );
                    assert!(s.cached_bytes <= limit);
                }
            }
        })
        .unwrap();
    }

    #[test]
    fn the_pool_keeps_at_most_the_default_cache_bytes() {
        cache_stays_under(None);
    }

    #[test]
    fn the_pool_keeps_at_most_the_configured_cache_bytes() {
        cache_stays_under(Some(5 << 20));
        cache_stays_under(Some(0));
    }
}
