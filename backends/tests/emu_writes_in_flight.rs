//! emu with many writes in flight: what a completed flush covered survives a crash taken while
//! later writes are still in flight; a write whose future is dropped still completes (or is
//! rolled back); host I/O errors never leave a write pointer over unwritten data nor a zone
//! Read Only.
//!
//! A crash is simulated by copying the device file while writes are in flight (the copy is
//! opened as the device after a `kill -9` at that moment). The seeded tests print their seed;
//! `ZIOB_SEED=N` replays one seed, `ZIOB_SEEDS=N` runs N seeds.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use futures::future::{select, Either};
use ziob_backends::{EmuDevice, Geometry, LatencyModel, ZoneState, ZonedDevice};
use ziob_runtime::DmaBuf;

mod support;
use support::{on_core, seeds, Rng};

const BS: u64 = 4096;

/// A block of write `id`: self-describing, so a block found below a write pointer can be
/// checked without knowing where its write landed.
fn block(zone: u32, id: u64, index: u64) -> Vec<u8> {
    let mut b = vec![0u8; BS as usize];
    b[0..4].copy_from_slice(b"ZBLK");
    b[4..8].copy_from_slice(&zone.to_le_bytes());
    b[8..16].copy_from_slice(&id.to_le_bytes());
    b[16..24].copy_from_slice(&index.to_le_bytes());
    for (i, x) in b[24..].iter_mut().enumerate() {
        *x = (id.wrapping_mul(31) ^ index.wrapping_mul(7) ^ i as u64) as u8;
    }
    b
}

fn data(zone: u32, id: u64, blocks: u64) -> Vec<u8> {
    (0..blocks).flat_map(|i| block(zone, id, i)).collect()
}

/// Checks that `bytes` (zone data from offset 0) consists of whole blocks of writes to `zone`.
fn check_blocks(zone: u32, bytes: &[u8], what: &str) {
    for (i, b) in bytes.chunks(BS as usize).enumerate() {
        let id = u64::from_le_bytes(b[8..16].try_into().unwrap());
        let index = u64::from_le_bytes(b[16..24].try_into().unwrap());
        assert!(
            b == &block(zone, id, index)[..],
            "{what}: zone {zone} block {i} (below the write pointer) is not data that was written"
        );
    }
}

async fn read_zone(dev: &EmuDevice, zone: u32, len: u64) -> Vec<u8> {
    if len == 0 {
        return Vec::new();
    }
    let (r, buf) = dev
        .read(zone, 0, len as usize, DmaBuf::with_capacity(len as usize))
        .await;
    r.unwrap();
    buf.to_vec()
}

/// A write that returned Ok: where and which.
#[derive(Debug, Clone, Copy)]
struct Acked {
    zone: u32,
    offset: u64,
    id: u64,
    blocks: u64,
}

/// Opens a copy of the device file taken now (a crash image) and checks it: every write in
/// `durable` is there byte for byte, and every block below each write pointer is a block that
/// was written.
async fn check_crash_image(live: &Path, image: &Path, durable: &[Acked], what: &str) {
    std::fs::copy(live, image).unwrap();
    let dev = EmuDevice::open(image, LatencyModel::default())
        .await
        .unwrap_or_else(|e| panic!("{what}: the crash image does not open: {e}"));
    let report = dev.report_all().await.unwrap();
    for info in &report {
        let z = info.index;
        let wp = info.write_pointer_bytes;
        let bytes = read_zone(&dev, z, wp).await;
        check_blocks(z, &bytes, what);
        for a in durable.iter().filter(|a| a.zone == z) {
            let end = a.offset + a.blocks * BS;
            assert!(
                wp >= end,
                "{what}: zone {z}: write pointer {wp} after the crash, but a completed flush \
                 covered the write [{}, {end})",
                a.offset
            );
            assert!(
                bytes[a.offset as usize..end as usize] == data(z, a.id, a.blocks)[..],
                "{what}: zone {z}: data of a flushed write at {} differs",
                a.offset
            );
        }
    }
    drop(dev);
    std::fs::remove_file(image).unwrap();
}

fn geometry(zones: u32) -> Geometry {
    let mut g = Geometry::new(zones, 4 << 20);
    g.max_append_bytes = 256 << 10;
    g
}

fn create(path: &Path, g: Geometry) {
    let p = path.to_path_buf();
    on_core(move || async move {
        EmuDevice::create(&p, &g).await.unwrap();
    });
}

/// The device-level case: W1 [0,4K) completes while W2 [4K, 4K+512K) is in flight;
/// a flush then returns Ok; a crash right after must keep W1.
#[test]
fn a_flush_with_a_later_write_in_flight_keeps_the_completed_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.zns");
    create(&path, geometry(2));
    let image = dir.path().join("image.zns");
    on_core(move || async move {
        // 512 KB at 1 MB/s: W2 stays in flight for about half a second.
        let latency = LatencyModel {
            latency: None,
            bandwidth_bytes_per_sec: Some(1_000_000),
        };
        let dev = EmuDevice::open(&path, latency).await.unwrap();
        let d = dev.clone();
        let w1 = ziob_runtime::spawn(async move {
            d.write(0, 0, DmaBuf::from_slice(&data(0, 1, 1))).await.0
        });
        ziob_runtime::yield_now().await;
        let d = dev.clone();
        let w2 = ziob_runtime::spawn(async move {
            d.write(0, BS, DmaBuf::from_slice(&data(0, 2, 128))).await.0
        });
        ziob_runtime::yield_now().await;
        w1.await.unwrap();
        dev.flush().await.unwrap();
        let w1 = Acked {
            zone: 0,
            offset: 0,
            id: 1,
            blocks: 1,
        };
        check_crash_image(&path, &image, &[w1], "W2 in flight").await;
        w2.await.unwrap();
    });
}

/// Appends and writes from many tasks to a few zones, some futures dropped at random points,
/// flushes from another task, crash images taken while writes are in flight.
#[test]
fn seeded_concurrent_writes_with_drops_flushes_and_crash_images() {
    for seed in seeds(3) {
        println!("seed {seed} (ZIOB_SEED={seed} replays it)");
        run_concurrent(seed, false);
    }
}

/// The same with host I/O errors injected into random data writes: a failed write and the
/// writes issued after it fail, the rest of the contract holds, and no zone becomes Read Only.
#[test]
fn seeded_host_errors_never_cover_unwritten_data_nor_make_a_zone_read_only() {
    for seed in seeds(3) {
        println!("seed {seed} (ZIOB_SEED={seed} replays it)");
        run_concurrent(seed, true);
    }
}

fn run_concurrent(seed: u64, host_errors: bool) {
    const ZONES: u32 = 3;
    const TASKS: u64 = 12;
    const OPS_PER_TASK: u64 = 14;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.zns");
    create(&path, geometry(ZONES));
    on_core(move || async move {
        let mut rng = Rng(seed | 1);
        // 100 MB/s: a 256 KiB write takes ~2.6 ms, a 4 KiB one 41 µs, so completions reorder.
        let latency = LatencyModel {
            latency: Some(Duration::from_micros(rng.below(50))),
            bandwidth_bytes_per_sec: Some(100_000_000),
        };
        let dev = EmuDevice::open(&path, latency).await.unwrap();
        if host_errors {
            for _ in 0..6 {
                let index = rng.below(TASKS * OPS_PER_TASK);
                let errno = if rng.below(2) == 0 {
                    libc::ENOSPC
                } else {
                    libc::EIO
                };
                dev.fail_data_write(index, errno);
            }
        }
        let acked: Rc<RefCell<Vec<Acked>>> = Rc::default();
        let next_id = Rc::new(RefCell::new(1u64));
        let mut tasks = Vec::new();
        for t in 0..TASKS {
            let dev = dev.clone();
            let acked = acked.clone();
            let next_id = next_id.clone();
            let mut rng = Rng(seed ^ (t + 1).wrapping_mul(0x51_7CC1_B727_220A));
            tasks.push(ziob_runtime::spawn(async move {
                for _ in 0..OPS_PER_TASK {
                    let zone = rng.below(u64::from(ZONES)) as u32;
                    let blocks = 1 + rng.below(32);
                    let id = {
                        let mut n = next_id.borrow_mut();
                        *n += 1;
                        *n
                    };
                    let bytes = DmaBuf::from_slice(&data(zone, id, blocks));
                    let dev2 = dev.clone();
                    let append = rng.below(3) != 0;
                    let op = async move {
                        if append {
                            dev2.append(zone, bytes).await.0
                        } else {
                            // The write pointer, then the write, with no await between.
                            let wp =
                                dev2.report_zones(zone, 1).await.unwrap()[0].write_pointer_bytes;
                            dev2.write(zone, wp, bytes).await.0.map(|()| wp)
                        }
                    };
                    let outcome = if rng.below(4) == 0 {
                        // Drop the write at a random point.
                        let timer = ziob_runtime::sleep(Duration::from_micros(rng.below(3000)));
                        match select(Box::pin(op), Box::pin(timer)).await {
                            Either::Left((r, _)) => Some(r),
                            Either::Right(_) => None,
                        }
                    } else {
                        Some(op.await)
                    };
                    if let Some(Ok(offset)) = outcome {
                        acked.borrow_mut().push(Acked {
                            zone,
                            offset,
                            id,
                            blocks,
                        });
                    }
                    if rng.below(8) == 0 {
                        ziob_runtime::sleep(Duration::from_micros(rng.below(500)))
                            .await
                            .unwrap();
                    }
                }
            }));
        }
        // The flusher: what was acknowledged before a flush started is durable once it returns.
        let durable: Rc<RefCell<Vec<Acked>>> = Rc::default();
        let flusher = {
            let dev = dev.clone();
            let acked = acked.clone();
            let durable = durable.clone();
            let mut rng = Rng(seed.rotate_left(17) | 1);
            ziob_runtime::spawn(async move {
                for _ in 0..40 {
                    ziob_runtime::sleep(Duration::from_micros(200 + rng.below(2000)))
                        .await
                        .unwrap();
                    let before = acked.borrow().clone();
                    dev.flush().await.unwrap();
                    *durable.borrow_mut() = before;
                }
            })
        };
        let image = path.with_extension("image");
        for crash in 0..3 {
            ziob_runtime::sleep(Duration::from_millis(5 + rng.below(30)))
                .await
                .unwrap();
            let durable_now = durable.borrow().clone();
            let what = format!("seed {seed}, crash image {crash}");
            check_crash_image(&path, &image, &durable_now, &what).await;
        }
        for t in tasks {
            t.await;
        }
        flusher.await;
        // Dropped writes finish in the background: wait (with a watchdog) until the flushed
        // write pointers are the live ones, i.e. no zone's persisted state is frozen.
        let what = format!("seed {seed}, after the writes");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let crashed = loop {
            dev.flush().await.unwrap();
            std::fs::copy(&path, &image).unwrap();
            let crashed = EmuDevice::open(&image, LatencyModel::default())
                .await
                .unwrap();
            // Opened zones come back Closed after a crash.
            let closed = |z: ziob_backends::ZoneInfo| {
                let state = if z.state.is_open() {
                    ZoneState::Closed
                } else {
                    z.state
                };
                (z.write_pointer_bytes, state)
            };
            let live: Vec<_> = dev
                .report_all()
                .await
                .unwrap()
                .into_iter()
                .map(closed)
                .collect();
            let after: Vec<_> = crashed
                .report_all()
                .await
                .unwrap()
                .into_iter()
                .map(closed)
                .collect();
            if live == after {
                break crashed;
            }
            drop(crashed);
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: the persisted zones lag the live ones for good: {after:?} vs {live:?}"
            );
            ziob_runtime::sleep(Duration::from_millis(20))
                .await
                .unwrap();
        };
        let acked_all = acked.borrow().clone();
        for zone in 0..ZONES {
            let live = dev.report_zones(zone, 1).await.unwrap()[0];
            assert_ne!(live.state, ZoneState::ReadOnly, "{what}: zone {zone}");
            let bytes = read_zone(&dev, zone, live.write_pointer_bytes).await;
            check_blocks(zone, &bytes, &format!("{what} (live device)"));
            // The zone still takes writes (an injected fault not yet fired may hit one).
            if live.state != ZoneState::Full {
                let mut last = None;
                for _ in 0..8 {
                    let (r, _) = dev
                        .append(zone, DmaBuf::from_slice(&data(zone, 0, 1)))
                        .await;
                    match r {
                        Ok(_) => {
                            last = None;
                            break;
                        }
                        Err(e) if host_errors && e.kind() == ziob_backends::ErrorKind::Io => {
                            last = Some(e)
                        }
                        Err(e) => panic!("{what}: zone {zone} refuses an append: {e}"),
                    }
                }
                assert!(
                    last.is_none(),
                    "{what}: zone {zone} keeps failing: {last:?}"
                );
            }
        }
        drop(crashed);
        std::fs::remove_file(&image).unwrap();
        check_crash_image(&path, &image, &acked_all, &what).await;
        dev.zone_action(
            ziob_backends::ZoneAction::Reset,
            ziob_backends::ZoneTarget::All,
        )
        .await
        .unwrap();
    });
}

/// A write future dropped after 0..8 polls (before, during and after its modelled delay and
/// its file I/O): once polled it has its place and still completes, the next append lands
/// after its data, the data reads back, and a flush persists the zone up to the live write
/// pointer (nothing frozen, nothing unwritten below it).
#[test]
fn a_write_dropped_after_any_number_of_polls_still_completes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.zns");
    create(&path, geometry(2));
    let image = dir.path().join("image.zns");
    on_core(move || async move {
        // 64 KiB at 10 MB/s: ~6.5 ms of modelled transfer, so early polls find it in flight.
        let latency = LatencyModel {
            latency: Some(Duration::from_micros(200)),
            bandwidth_bytes_per_sec: Some(10_000_000),
        };
        let dev = EmuDevice::open(&path, latency).await.unwrap();
        let mut id = 0;
        let mut expected_end = 0u64;
        for polls in 0..8u32 {
            for append in [false, true] {
                id += 1;
                let bytes = DmaBuf::from_slice(&data(0, id, 16));
                let mut fut: std::pin::Pin<Box<dyn std::future::Future<Output = u64>>> = if append {
                    let d = dev.clone();
                    Box::pin(async move { d.append(0, bytes).await.0.unwrap() })
                } else {
                    let d = dev.clone();
                    let at = expected_end;
                    Box::pin(async move {
                        d.write(0, at, bytes).await.0.unwrap();
                        at
                    })
                };
                let mut finished = false;
                for _ in 0..polls {
                    if futures::poll!(fut.as_mut()).is_ready() {
                        finished = true;
                        break;
                    }
                    ziob_runtime::yield_now().await;
                }
                drop(fut);
                let issued = polls > 0;
                let what =
                    format!("dropped after {polls} polls (append {append}, done {finished})");
                // The next append waits for the dropped write (writes complete in zone order).
                id += 1;
                let (r, _) = dev.append(0, DmaBuf::from_slice(&data(0, id, 1))).await;
                let at = r.unwrap();
                let dropped_end = expected_end + if issued { 16 * BS } else { 0 };
                assert_eq!(at, dropped_end, "{what}: the next append's place");
                expected_end = at + BS;
                if issued {
                    let (r, buf) = dev
                        .read(
                            0,
                            dropped_end - 16 * BS,
                            (16 * BS) as usize,
                            DmaBuf::with_capacity((16 * BS) as usize),
                        )
                        .await;
                    r.unwrap();
                    assert!(buf[..] == data(0, id - 1, 16)[..], "{what}: its data");
                }
                dev.flush().await.unwrap();
                std::fs::copy(&path, &image).unwrap();
                let crashed = EmuDevice::open(&image, LatencyModel::default())
                    .await
                    .unwrap();
                let wp = crashed.report_zones(0, 1).await.unwrap()[0].write_pointer_bytes;
                assert_eq!(wp, expected_end, "{what}: the persisted write pointer");
                let bytes = read_zone(&crashed, 0, wp).await;
                check_blocks(0, &bytes, &what);
                drop(crashed);
                std::fs::remove_file(&image).unwrap();
            }
        }
    });
}

/// A write polled off the runtime's cores is refused before it reserves anything.
#[test]
fn a_write_off_a_core_is_refused_and_reserves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.zns");
    create(&path, geometry(2));
    let rt = ziob_runtime::Runtime::builder().cores(1).build().unwrap();
    let p = path.clone();
    let dev = rt
        .block_on(
            move || async move { EmuDevice::open(&p, LatencyModel::default()).await.unwrap() },
        )
        .unwrap();
    let off_core = dev.clone();
    let e = std::thread::spawn(move || {
        futures::executor::block_on(off_core.write(0, 0, DmaBuf::from_slice(&data(0, 1, 1))))
            .0
            .unwrap_err()
    })
    .join()
    .unwrap();
    assert_eq!(e.kind(), ziob_backends::ErrorKind::Io, "{e}");
    rt.block_on(move || async move {
        let (r, _) = dev.append(0, DmaBuf::from_slice(&data(0, 2, 1))).await;
        assert_eq!(r.unwrap(), 0, "nothing was reserved by the refused write");
    })
    .unwrap();
}
