//! Reads of a range that only the device holds (written back, no longer in the owner's
//! memory) are served straight from the device without a hop to the owner: at once on the
//! calling thread when the device can read without waiting (`ZonedDevice::read_now`), else
//! by a task on the reading core when that is not the owner. A thread that is no core of the
//! runtime reads at once also what was written back while the owner's memory still holds a
//! clean copy. The bytes are those of the
//! owner's path whatever happens meanwhile — appends, flushes, eviction, resets, and a reset
//! that lands while such a read is at the device — on either path.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use ziob::backends::{MemDevice, ZoneInfo};
use ziob::{
    Client, DmaBuf, Geometry, Runtime, ShardStats, Ziob, ZiobConfig, ZoneAction, ZoneTarget,
    ZonedDevice,
};

type DevResult<T> = std::result::Result<T, ziob::backends::DeviceError>;

const ZONE: u64 = 1 << 20;

fn config(budget: u64) -> ZiobConfig {
    ZiobConfig {
        shard_budget_bytes: budget,
        writeback_unit_bytes: Some(16 << 10),
        idle_writeback: None,
        ..ZiobConfig::default()
    }
}

/// Direct reads counted on `core`.
fn direct_reads(stats: &[ShardStats], core: usize) -> (u64, u64) {
    (stats[core].direct_reads, stats[core].direct_read_fallbacks)
}

/// A `mem` device whose next read of a chosen zone, once armed, stops at the device until
/// released (before the device reads anything). It offers `read_now` (the gate then blocks
/// the calling thread) only if `read_now` is set. Clones share the device and the gate.
#[derive(Clone)]
struct GatedMem {
    mem: MemDevice,
    gate: Arc<Gate>,
    read_now: bool,
}

impl GatedMem {
    fn new(name: &str, read_now: bool) -> GatedMem {
        GatedMem {
            mem: MemDevice::new(name, &Geometry::new(4, ZONE)).unwrap(),
            gate: Arc::new(Gate {
                armed_zone: AtomicU32::new(u32::MAX),
                ..Gate::default()
            }),
            read_now,
        }
    }
}

impl Gate {
    /// Whether this read of `zone` is the armed one (it then waits for the release).
    fn stops(&self, zone: u32) -> bool {
        let hit = self
            .armed_zone
            .compare_exchange(zone, u32::MAX, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if hit {
            self.entered.store(true, Ordering::SeqCst);
        }
        hit
    }
}

#[derive(Default)]
struct Gate {
    /// The zone whose next read stops (`u32::MAX`: none).
    armed_zone: AtomicU32,
    entered: AtomicBool,
    released: AtomicBool,
}

impl ZonedDevice for GatedMem {
    fn geometry(&self) -> &Geometry {
        self.mem.geometry()
    }
    fn name(&self) -> &str {
        self.mem.name()
    }
    async fn report_zones(&self, first: u32, count: u32) -> DevResult<Vec<ZoneInfo>> {
        self.mem.report_zones(first, count).await
    }
    async fn read(
        &self,
        zone: u32,
        offset_bytes: u64,
        len: usize,
        buf: DmaBuf,
    ) -> (DevResult<()>, DmaBuf) {
        if self.gate.stops(zone) {
            while !self.gate.released.load(Ordering::SeqCst) {
                ziob::runtime::sleep(Duration::from_millis(1))
                    .await
                    .unwrap();
            }
        }
        self.mem.read(zone, offset_bytes, len, buf).await
    }
    fn read_now(&self, zone: u32, offset_bytes: u64, len: usize) -> Option<DevResult<Vec<u8>>> {
        if !self.read_now {
            return None;
        }
        if self.gate.stops(zone) {
            while !self.gate.released.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        self.mem.read_now(zone, offset_bytes, len)
    }
    async fn write(&self, zone: u32, offset_bytes: u64, buf: DmaBuf) -> (DevResult<()>, DmaBuf) {
        self.mem.write(zone, offset_bytes, buf).await
    }
    async fn append(&self, zone: u32, buf: DmaBuf) -> (DevResult<u64>, DmaBuf) {
        self.mem.append(zone, buf).await
    }
    async fn zone_action(&self, action: ZoneAction, target: ZoneTarget) -> DevResult<()> {
        self.mem.zone_action(action, target).await
    }
    async fn flush(&self) -> DevResult<()> {
        self.mem.flush().await
    }
}

/// An instance on `dev` after `data` was appended to zone 0, synced and the instance closed:
/// zone 0 holds `data` on the device only.
fn reopened_after_writing(rt: &Runtime, dev: &GatedMem, data: Vec<u8>) -> Ziob<GatedMem> {
    let d = dev.clone();
    rt.block_on(move || async move {
        let z = Ziob::with_device(d.clone(), config(4 << 20)).await.unwrap();
        z.append(0, DmaBuf::from_slice(&data)).await.unwrap();
        z.close().await.unwrap();
        Ziob::with_device(d, config(4 << 20)).await.unwrap()
    })
    .unwrap()
}

/// A client of an instance on `dev` after `data` was appended to zone 0 and flushed: the
/// device has it, and the owner's memory still holds it (the budget is far above it).
fn written_back_still_in_memory(rt: &Runtime, dev: GatedMem, data: Vec<u8>) -> Client<GatedMem> {
    rt.block_on(move || async move {
        let c = Ziob::with_device(dev, config(4 << 20))
            .await
            .unwrap()
            .client();
        c.append(0, data.into()).await.unwrap();
        c.flush(0).await.unwrap();
        c
    })
    .unwrap()
}

/// A read of core 0's zone from core 1 that is at the device when the zone is reset and
/// written again (the new bytes still in the owner's memory) gives the new bytes, never the
/// reset zone's zeros: the reader sees the reset and reads again through the owner. By a
/// task on core 1.
#[test]
fn a_reset_during_a_direct_read_is_never_read_as_the_empty_zone() {
    reset_during_a_direct_read(false);
}

/// The same for a read done at once on the calling thread (`read_now`).
#[test]
fn a_reset_during_a_direct_read_now_is_never_read_as_the_empty_zone() {
    reset_during_a_direct_read(true);
}

/// Once `read` (of zone 0's first 8 KiB) is stopped at the device: resets zone 0 and writes
/// 0xBB, less than a write-back unit, which stays in the owner's memory only (not written
/// back, so not readable from the device); then lets the read go on. It must give 0xBB,
/// counted on `counted_on` as a direct read that went to the owner after all. Closes `c`.
fn reset_and_rewrite_under_the_read<D: ZonedDevice, B: AsRef<[u8]>>(
    rt: &Runtime,
    c: &Client<D>,
    gate: &Gate,
    read: std::thread::JoinHandle<B>,
    counted_on: usize,
) {
    while !gate.entered.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let w = c.clone();
    rt.block_on(move || async move {
        w.reset(0).await.unwrap();
        w.append(0, vec![0xBB; 12 << 10].into()).await.unwrap();
    })
    .unwrap();
    gate.released.store(true, Ordering::SeqCst);
    let got = read.join().unwrap();
    let got = got.as_ref();
    assert!(
        got.iter().all(|&b| b == 0xBB),
        "read across a reset gave {:#x?}… (expected the new bytes 0xBB)",
        &got[..8]
    );
    let stats = futures::executor::block_on(c.stats()).unwrap();
    assert_eq!(
        direct_reads(&stats, counted_on),
        (0, 1),
        "the read went to the device and then to the owner: {stats:?}"
    );
    futures::executor::block_on(c.close()).unwrap();
}

fn reset_during_a_direct_read(read_now: bool) {
    let rt = Runtime::builder().cores(2).build().unwrap();
    let dev = GatedMem::new("gated", read_now);
    let gate = dev.gate.clone();
    // Zone 0 holds 0xAA on the device only: written, synced, and the instance reopened.
    let c = reopened_after_writing(&rt, &dev, vec![0xAA; 64 << 10]).client();
    gate.armed_zone.store(0, Ordering::SeqCst);
    let (reader, handle) = (c.clone(), rt.handle());
    // The read runs on core 1, not on the owner.
    let read = std::thread::spawn(move || {
        futures::executor::block_on(
            handle.call(1, move || async move { reader.read(0, 0, 8192).await }),
        )
        .unwrap()
        .unwrap()
    });
    reset_and_rewrite_under_the_read(&rt, &c, &gate, read, 1);
}

/// A plain thread reading, from the device, bytes that were written back while the owner's
/// memory still holds them, when the zone is reset and written again during that device
/// read (the new bytes in the owner's memory only): it gets the new bytes, never the reset
/// zone's zeros or the old bytes — it sees the reset and reads again through the owner.
#[test]
fn a_reset_during_a_plain_threads_read_of_a_clean_copy_gives_the_new_bytes() {
    let rt = Runtime::builder().cores(2).build().unwrap();
    let dev = GatedMem::new("gated-clean", true);
    let gate = dev.gate.clone();
    // Zone 0 holds 0xAA written back, and still in the owner's memory.
    let c = written_back_still_in_memory(&rt, dev, vec![0xAA; 64 << 10]);
    gate.armed_zone.store(0, Ordering::SeqCst);
    let reader = c.clone();
    // The read runs on a plain thread.
    let read =
        std::thread::spawn(move || futures::executor::block_on(reader.read(0, 0, 8192)).unwrap());
    // A plain thread's direct reads count with core 0's.
    reset_and_rewrite_under_the_read(&rt, &c, &gate, read, 0);
}

/// Reopened, a zone is on the device only. `Client::read` reads it directly everywhere when
/// the device reads at once, and from the other core only when it does not (the owner's
/// read is the device read then); `Ziob::read` reads directly from the other core. All give
/// the bytes written.
#[test]
fn reads_of_ranges_on_the_device_only_are_direct() {
    // (device offers read_now, core, direct reads expected: 3 Client and 3 Ziob reads)
    for (read_now, core, want_direct) in [(true, 1, 6), (true, 0, 3), (false, 1, 6), (false, 0, 0)]
    {
        direct_reads_on_a_reopened_zone(read_now, core, want_direct);
    }
}

fn direct_reads_on_a_reopened_zone(read_now: bool, core: usize, want_direct: u64) {
    let rt = Runtime::builder().cores(2).build().unwrap();
    let dev = GatedMem::new("direct", read_now);
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let z = reopened_after_writing(&rt, &dev, data.clone());
    let want = data;
    rt.block_on(move || async move {
        let c = z.client();
        let (c2, z2, want) = (c.clone(), z.clone(), want.clone());
        ziob::runtime::call_on(core, move || async move {
            // Unaligned ranges; the big one goes past 64 KiB (no copy into a Vec).
            for (o, l) in [(1usize, 4095usize), (4096, 4096), (777, 100_000)] {
                assert!(c2.read(0, o as u64, l).await.unwrap()[..] == want[o..o + l]);
                assert!(z2.read(0, o as u64, l).await.unwrap()[..] == want[o..o + l]);
            }
        })
        .await
        .unwrap();
        let stats = z.stats().await.unwrap();
        let other = 1 - core;
        assert_eq!(
            (stats[core].direct_reads, stats[other].direct_reads),
            (want_direct, 0),
            "read_now {read_now}, reads on core {core}: {stats:?}"
        );
        z.close().await.unwrap();
    })
    .unwrap();
}

/// A range written back to the device while the owner's memory still holds a clean copy of
/// it: when the device reads without waiting (a page cache, RAM), every thread but the
/// owner's core reads it from the device at once — a plain thread (say RocksDB's, behind
/// `BlockingClient`) and another core of the runtime (say kv-demo's shard core reading a
/// table on its background core's zones) — rather than wait for the owner's core; the
/// owner reads its memory. When the device read would wait, the runtime's cores leave it to
/// the owner's memory.
#[test]
fn clean_copies_in_memory_are_read_at_once_by_every_thread_but_the_owner() {
    let ranges = [(0usize, 4096usize), (5000, 60_000), (777, 200_000)];
    for read_now in [true, false] {
        let rt = Runtime::builder().cores(2).build().unwrap();
        let dev = GatedMem::new("clean-copy", read_now);
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        let more = vec![0x5A; 5000];
        // The flush pads the last block (to 303,104); `more` stays in memory only.
        let mut want = data.clone();
        want.resize(303_104, 0);
        want.extend_from_slice(&more);
        let c = written_back_still_in_memory(&rt, dev, data);
        let m = c.clone();
        rt.block_on(move || async move {
            assert_eq!(m.append(0, more.into()).await.unwrap(), 303_104);
        })
        .unwrap();
        // This thread is no core of the runtime: the ranges, then the padding (written
        // back, so direct) and a range past what was written back (through the owner).
        for (o, l) in ranges.into_iter().chain([(300_000, 3104), (302_000, 4000)]) {
            let got = futures::executor::block_on(c.read(0, o as u64, l)).unwrap();
            assert!(got[..] == want[o..o + l], "{o}+{l}");
        }
        let plain = futures::executor::block_on(c.stats()).unwrap();
        let (c2, want2) = (c.clone(), want.clone());
        rt.block_on(move || async move {
            for core in [1, 0] {
                let (c, want) = (c2.clone(), want2.clone());
                ziob::runtime::call_on(core, move || async move {
                    for (o, l) in ranges {
                        assert!(c.read(0, o as u64, l).await.unwrap()[..] == want[o..o + l]);
                    }
                })
                .await
                .unwrap();
            }
        })
        .unwrap();
        let stats = futures::executor::block_on(c.stats()).unwrap();
        assert!(
            stats[0].memory_used_bytes >= 300_000,
            "the owner's memory still holds the data: {stats:?}"
        );
        // Direct reads of threads that are no core count with core 0's.
        let direct = if read_now { 4 } else { 0 };
        assert_eq!(
            (plain[0].direct_reads, plain[0].read_hits),
            (direct, 5 - direct),
            "read_now {read_now}: the plain thread: {plain:?}"
        );
        // Core 1 reads the 3 ranges from the device at once when it can; the owner, core 0,
        // from its memory.
        let other_core = if read_now { 3 } else { 0 };
        assert_eq!(
            (
                stats[0].direct_reads,
                stats[1].direct_reads,
                stats[0].read_hits - plain[0].read_hits
            ),
            (direct, other_core, 6 - other_core),
            "read_now {read_now}: {stats:?}"
        );
        futures::executor::block_on(c.close()).unwrap();
    }
}

#[derive(Debug, Clone)]
enum Op {
    Append(usize),
    Flush,
    Reset,
    /// A read from core 0 or 1, or (2) from a thread that is no core of the runtime, at the
    /// given per mille of the data's length.
    Read(u8, usize, usize),
}

/// Random appends, flushes, resets and reads of core 0's zone from both cores and a plain
/// thread, on a budget
/// small enough that data is written back and evicted: every read gives the model's bytes
/// (what was appended, flush padding zeros, zeros past the write pointer), and some reads
/// do go to the device directly. Reads done at once (`read_now`).
#[test]
fn direct_and_owner_reads_match_a_model_across_resets() {
    reads_match_a_model(true);
}

/// The same when the device cannot read at once: direct reads from core 1 by a task there.
#[test]
fn direct_task_and_owner_reads_match_a_model_across_resets() {
    reads_match_a_model(false);
}

fn reads_match_a_model(read_now: bool) {
    let rt = Runtime::builder().cores(2).build().unwrap();
    let dev = GatedMem::new("model", read_now);
    let d = dev.clone();
    let c: Client<GatedMem> = rt
        .block_on(move || async move {
            Ziob::with_device(d, config(64 << 10))
                .await
                .unwrap()
                .client()
        })
        .unwrap();
    let mut runner = TestRunner::new(Config {
        cases: 32,
        ..Config::default()
    });
    let op = prop_oneof![
        4 => (1usize..40_000).prop_map(Op::Append),
        1 => Just(Op::Flush),
        1 => Just(Op::Reset),
        8 => (0u8..3, 0usize..1100, 1usize..(80 << 10))
            .prop_map(|(from, at, l)| Op::Read(from, at, l)),
    ];
    runner
        .run(&proptest::collection::vec(op, 1..120), |ops| {
            let c = c.clone();
            rt.block_on(move || async move {
                c.reset(0).await.unwrap();
                let mut model: Vec<u8> = Vec::new();
                for op in ops {
                    match op {
                        Op::Append(n) => {
                            if model.len() + n > ZONE as usize {
                                continue;
                            }
                            let data: Vec<u8> =
                                (0..n).map(|i| (model.len() + i) as u8 | 1).collect();
                            let off = c.append(0, data.clone().into()).await.unwrap();
                            model.resize(off as usize, 0); // flush padding
                            model.extend_from_slice(&data);
                        }
                        Op::Flush => c.flush(0).await.unwrap(),
                        Op::Reset => {
                            c.reset(0).await.unwrap();
                            model.clear();
                        }
                        Op::Read(from, at, l) => {
                            let o = (model.len() * at / 1000).min(ZONE as usize - 1);
                            let l = l.min(ZONE as usize - o);
                            let c2 = c.clone();
                            let got = if from == 2 {
                                // A plain thread; this core keeps running meanwhile (the
                                // read may need the owner, core 0).
                                let (tx, rx) = futures::channel::oneshot::channel();
                                std::thread::spawn(move || {
                                    let _ = tx
                                        .send(futures::executor::block_on(c2.read(0, o as u64, l)));
                                });
                                rx.await.unwrap().unwrap()
                            } else {
                                ziob::runtime::call_on(usize::from(from), move || async move {
                                    c2.read(0, o as u64, l).await
                                })
                                .await
                                .unwrap()
                                .unwrap()
                            };
                            let want: Vec<u8> = (o..o + l)
                                .map(|i| model.get(i).copied().unwrap_or(0))
                                .collect();
                            prop_assert!(
                                got[..] == want[..],
                                "read {o}+{l} from {}",
                                ["core 0", "core 1", "a plain thread"][usize::from(from)]
                            );
                        }
                    }
                }
                Ok(())
            })
            .unwrap()
        })
        .unwrap();
    let stats = futures::executor::block_on(c.stats()).unwrap();
    let (direct, _) = direct_reads(&stats, 1);
    assert!(direct > 0, "no read was direct: {:?}", stats[1]);
    if !read_now {
        assert_eq!(direct_reads(&stats, 0).0, 0, "core 0 owns the zone");
    }
    futures::executor::block_on(c.close()).unwrap();
}

/// Once the runtime stopped, a read of a range the device alone holds fails like every other
/// call (`RuntimeStopped`), even though the device could still be read at once.
#[test]
fn after_the_runtime_stops_direct_reads_fail_like_other_calls() {
    let rt = Runtime::builder().cores(2).build().unwrap();
    let dev = GatedMem::new("stopped", true);
    let c = reopened_after_writing(&rt, &dev, vec![7; 8192]).client();
    // Served at once from a plain thread while the runtime runs.
    assert!(futures::executor::block_on(c.read(0, 0, 4096)).unwrap()[..] == [7; 4096]);
    drop(rt);
    let e = futures::executor::block_on(c.read(0, 0, 4096)).unwrap_err();
    assert!(
        matches!(e, ziob::ZiobError::RuntimeStopped { .. }),
        "a read after the runtime stopped: {e}"
    );
}
