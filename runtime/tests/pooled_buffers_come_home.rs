//! A pooled buffer dropped on another thread (another core, a plain thread) goes back to the
//! pool of the core it came from: that core's next takes reuse it instead of asking the
//! allocator for fresh memory (which the kernel then faults in and zeroes again).

use ziob_runtime::buf::pool_stats;
use ziob_runtime::{DmaBuf, Runtime};

/// Seeded rounds: core 0 takes buffers of random size classes; each is dropped on core 0,
/// on core 1 or on a plain thread; then core 0 takes the same sizes again. Every buffer
/// dropped elsewhere comes back: the second takes need no allocation, and the pool counts
/// the returns.
#[test]
fn buffers_dropped_on_other_threads_are_reused_by_their_core() {
    let rt = Runtime::builder().cores(2).build().unwrap();
    let handle = rt.handle();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for round in 0..24 {
        let mut sizes = Vec::new();
        for _ in 0..1 + (rng % 12) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            // 4 KiB ..= 1 MiB, not always a whole class.
            sizes.push((4096usize << ((rng >> 20) % 9)) - (rng as usize % 3) * 512);
        }
        let where_ = rng % 3;
        let taken_sizes = sizes.clone();
        let (bufs, before) = rt
            .run_on(0, move || async move {
                let bufs: Vec<DmaBuf> = taken_sizes
                    .iter()
                    .map(|&n| DmaBuf::with_capacity(n))
                    .collect();
                (bufs, pool_stats())
            })
            .unwrap();
        match where_ {
            0 => drop(bufs),
            1 => {
                // Core 1's drop is a task there: wait until it ran.
                let (done, dropped) = std::sync::mpsc::channel();
                handle
                    .spawn_on(1, move || async move {
                        drop(bufs);
                        done.send(()).unwrap();
                    })
                    .unwrap();
                dropped.recv().unwrap();
            }
            _ => std::thread::spawn(move || drop(bufs)).join().unwrap(),
        }
        let n = sizes.len() as u64;
        let after = rt
            .run_on(0, move || async move {
                let again: Vec<DmaBuf> = sizes.iter().map(|&n| DmaBuf::with_capacity(n)).collect();
                let s = pool_stats();
                drop(again);
                s
            })
            .unwrap();
        assert_eq!(
            after.allocations,
            before.allocations,
            "round {round} (dropped {}): the second takes asked the allocator",
            ["off the runtime", "on core 1", "on a plain thread"][where_ as usize]
        );
        assert_eq!(after.reuses, before.reuses + n, "round {round}");
        assert_eq!(after.cache_overflows, 0);
    }
    let total = rt.run_on(0, || async { pool_stats() }).unwrap();
    assert!(total.returned > 0, "no round dropped a buffer elsewhere");
}
