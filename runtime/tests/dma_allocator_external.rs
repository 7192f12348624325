//! An installed `DmaAllocator` supplies a core's buffers: they are recognisable, usable for
//! I/O, freed back to it from any thread, and the pool falls back to the heap when it runs
//! out. Every allocation is balanced by a free.

use std::alloc::Layout;
use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use ziob_runtime::buf::{pool_stats, IoBuf};
use ziob_runtime::{
    dma_allocator_name, fs::OpenOptions, set_dma_allocator, DmaAllocator, DmaBuf, Runtime,
};

/// A heap-backed allocator with a byte limit that records every live allocation.
struct Counting {
    limit_bytes: usize,
    live: Mutex<HashMap<usize, usize>>,
    allocs: Mutex<u64>,
}

impl Counting {
    fn new(limit_bytes: usize) -> Arc<Counting> {
        Arc::new(Counting {
            limit_bytes,
            live: Mutex::new(HashMap::new()),
            allocs: Mutex::new(0),
        })
    }
    fn live_bytes(&self) -> usize {
        self.live.lock().unwrap().values().sum()
    }
    fn owns(&self, p: *const u8) -> bool {
        let a = p as usize;
        self.live
            .lock()
            .unwrap()
            .iter()
            .any(|(&s, &n)| a >= s && a < s + n)
    }
}

impl DmaAllocator for Counting {
    fn alloc(&self, bytes: usize) -> Option<NonNull<u8>> {
        let mut live = self.live.lock().unwrap();
        if live.values().sum::<usize>() + bytes > self.limit_bytes {
            return None;
        }
        let l = Layout::from_size_align(bytes, 4096).unwrap();
        // SAFETY: non-zero size.
        let p = NonNull::new(unsafe { std::alloc::alloc(l) })?;
        live.insert(p.as_ptr() as usize, bytes);
        *self.allocs.lock().unwrap() += 1;
        Some(p)
    }
    unsafe fn free(&self, ptr: NonNull<u8>, bytes: usize) {
        let n = self
            .live
            .lock()
            .unwrap()
            .remove(&(ptr.as_ptr() as usize))
            .expect("free of memory this allocator did not hand out");
        assert_eq!(n, bytes, "freed with a different size than allocated");
        // SAFETY: allocated above with this layout.
        unsafe { std::alloc::dealloc(ptr.as_ptr(), Layout::from_size_align(n, 4096).unwrap()) };
    }
    fn name(&self) -> &str {
        "counting"
    }
}

#[test]
fn buffers_come_from_the_installed_allocator_and_go_back_to_it() {
    let alloc = Counting::new(64 << 20);
    let rt = Runtime::builder().cores(2).build().unwrap();
    let a: Arc<dyn DmaAllocator> = alloc.clone();
    let path = std::env::temp_dir().join(format!("ziob-dma-alloc-{}", std::process::id()));
    let p = path.clone();
    let (kept, stats) = rt
        .run_on(0, move || async move {
            // A heap buffer cached before the switch must not be handed out afterwards.
            drop(DmaBuf::with_capacity(8192));
            assert_eq!(dma_allocator_name(), None);
            set_dma_allocator(Some(a.clone()));
            assert_eq!(dma_allocator_name().as_deref(), Some("counting"));
            let mut b = DmaBuf::with_capacity(8192);
            assert!(b.allocated_by(&a));
            // Big (unpooled) buffers come from it too.
            let big = DmaBuf::with_capacity(16 << 20);
            assert!(big.allocated_by(&a));
            drop(big);
            // The memory works for O_DIRECT I/O through the ring.
            b.extend_from_slice(&[0x5a; 8192]);
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .direct(true)
                .open(&p)
                .await
                .unwrap();
            let (r, b) = f.write_at(b, 0).await;
            assert_eq!(r.unwrap(), 8192);
            let (r, back) = f.read_at(DmaBuf::with_capacity(8192), 0).await;
            assert_eq!(r.unwrap(), 8192);
            assert!(back.allocated_by(&a));
            assert!(back.iter().all(|&x| x == 0x5a));
            // A buffer dropped and taken again is reused from the cache.
            let before = pool_stats().reuses;
            drop(back);
            let again = DmaBuf::with_capacity(8192);
            assert!(again.allocated_by(&a));
            assert_eq!(pool_stats().reuses, before + 1);
            (b, pool_stats())
        })
        .unwrap();
    assert_eq!(stats.external_fallbacks, 0);
    assert!(alloc.owns(kept.as_ptr()));
    // Core 1 never installed it: its buffers are heap memory.
    let a2: Arc<dyn DmaAllocator> = alloc.clone();
    let other = rt
        .run_on(1, move || async move {
            DmaBuf::with_capacity(4096).allocated_by(&a2)
        })
        .unwrap();
    assert!(!other);
    // Dropped off-core (here, on the test thread), the buffer goes back to core 0's pool
    // (not to the allocator): core 0's next take of its size reuses it.
    let live = alloc.live_bytes();
    let kept_at = kept.as_ptr() as usize;
    drop(kept);
    assert_eq!(alloc.live_bytes(), live);
    let a3: Arc<dyn DmaAllocator> = alloc.clone();
    let (again_at, ours, stats) = rt
        .run_on(0, move || async move {
            let held: Vec<DmaBuf> = (0..2).map(|_| DmaBuf::with_capacity(8192)).collect();
            let at = held.iter().map(|b| b.as_ptr() as usize).collect::<Vec<_>>();
            let ours = held.iter().all(|b| b.allocated_by(&a3));
            (at, ours, pool_stats())
        })
        .unwrap();
    assert!(ours);
    assert!(
        again_at.contains(&kept_at),
        "the returned buffer was not reused"
    );
    assert_eq!(stats.returned, 1);
    // One more dropped off-core and never taken back: freed when the core stops.
    let last = rt
        .run_on(0, || async { DmaBuf::with_capacity(4096) })
        .unwrap();
    drop(last);
    drop(rt);
    assert_eq!(
        alloc.live_bytes(),
        0,
        "the pool's cache went back at shutdown"
    );
    std::fs::remove_file(path).unwrap();
}

#[test]
fn out_of_external_memory_releases_the_cache_then_falls_back_to_the_heap() {
    let alloc = Counting::new(64 << 10);
    let rt = Runtime::builder().cores(1).build().unwrap();
    let a: Arc<dyn DmaAllocator> = alloc.clone();
    let al = alloc.clone();
    rt.run_on(0, move || async move {
        set_dma_allocator(Some(a.clone()));
        // Fill the cache with 16 KiB buffers: 64 KiB, the whole limit.
        let v: Vec<DmaBuf> = (0..4).map(|_| DmaBuf::with_capacity(16 << 10)).collect();
        assert!(v.iter().all(|b| b.allocated_by(&a)));
        drop(v);
        assert_eq!(al.live_bytes(), 64 << 10);
        // A 32 KiB buffer only fits after the cache is released.
        let b = DmaBuf::with_capacity(32 << 10);
        assert!(b.allocated_by(&a));
        assert_eq!(pool_stats().cached_bytes, 0);
        assert_eq!(pool_stats().external_fallbacks, 0);
        // Two more 32 KiB buffers cannot all fit: one falls back to the heap, still usable.
        let c = DmaBuf::with_capacity(32 << 10);
        let mut d = DmaBuf::with_capacity(32 << 10);
        assert!(c.allocated_by(&a));
        assert!(!d.allocated_by(&a));
        assert_eq!(pool_stats().external_fallbacks, 1);
        d.extend_from_slice(&[1; 32 << 10]);
        assert_eq!(d.len(), 32 << 10);
        drop((b, c, d));
        // Switching back to the heap releases the external cache.
        set_dma_allocator(None);
        assert_eq!(al.live_bytes(), 0);
        assert!(!DmaBuf::with_capacity(4096).allocated_by(&a));
    })
    .unwrap();
}

#[test]
fn fixed_buffers_come_from_the_allocator_once_one_is_installed() {
    // The registered arena is heap memory: a device that needs its own DMA memory must not
    // get arena slots (it would have to copy every one).
    let alloc = Counting::new(1 << 20);
    let rt = Runtime::builder()
        .cores(1)
        .fixed_buffers(4, 64 << 10)
        .build()
        .unwrap();
    let a: Arc<dyn DmaAllocator> = alloc.clone();
    rt.run_on(0, move || async move {
        let before = DmaBuf::fixed(64 << 10);
        assert!(!before.allocated_by(&a));
        assert_eq!(pool_stats().fixed_taken, 1);
        set_dma_allocator(Some(a.clone()));
        let after = DmaBuf::fixed(64 << 10);
        assert!(after.allocated_by(&a));
        assert_eq!(after.fixed_index(), None);
        assert_eq!(pool_stats().fixed_taken, 1);
        assert_eq!(pool_stats().fixed_fallbacks, 1);
        drop((before, after));
        set_dma_allocator(None);
        assert!(DmaBuf::fixed(64 << 10).fixed_index().is_some());
    })
    .unwrap();
}
