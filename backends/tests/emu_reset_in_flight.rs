//! emu: a reset (or finish) waits for the zone's writes in flight, so a transfer issued before
//! a reset never lands over data written after it; writes issued while it runs wait for it.
//!
//! The seeded search prints its seed; `ZIOB_SEED=N` replays one seed, `ZIOB_SEEDS=N` runs N.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use futures::future::select;
use ziob_backends::{
    EmuDevice, Geometry, LatencyModel, ZoneAction, ZoneState, ZoneTarget, ZonedDevice,
};
use ziob_runtime::DmaBuf;

mod support;
use support::{seeds, Rng};

const BS: u64 = 4096;

/// Runs `f` on a one-core runtime in a thread; fails instead of hanging after 60 s.
fn on_core_watched<F: std::future::Future<Output = ()> + 'static>(
    what: String,
    f: impl FnOnce() -> F + Send + 'static,
) {
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        let rt = ziob_runtime::Runtime::builder().cores(1).build().unwrap();
        rt.block_on(f).unwrap();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => worker.join().unwrap(),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            // The run panicked: report its message.
            if let Err(p) = worker.join() {
                std::panic::resume_unwind(p);
            }
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("{what}: hung for 60 s"),
    }
}

/// 1 MiB at 10 MB/s: the old write's transfer lands ~100 ms after it is issued.
fn slow(bytes_per_sec: u64) -> LatencyModel {
    LatencyModel {
        latency: None,
        bandwidth_bytes_per_sec: Some(bytes_per_sec),
    }
}

#[test]
fn a_write_in_flight_across_a_reset_does_not_overwrite_later_data() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("dev.zns");
    on_core_watched("reset probe".into(), move || async move {
        drop(
            EmuDevice::create(&p, &Geometry::new(2, 4 << 20))
                .await
                .unwrap(),
        );
        let dev = EmuDevice::open(&p, slow(10_000_000)).await.unwrap();
        let old = DmaBuf::from_slice(&vec![0xAAu8; 1 << 20]);
        {
            let d = dev.clone();
            let mut w = Box::pin(async move { d.write(0, 0, old).await });
            // Polled once: the write reserves its range and its transfer task starts.
            assert!(futures::poll!(w.as_mut()).is_pending());
        } // dropped: the transfer goes on
        dev.zone_action(ZoneAction::Reset, ZoneTarget::One(0))
            .await
            .unwrap();
        let (r, _) = dev.append(0, DmaBuf::from_slice(&vec![0xBBu8; 4096])).await;
        assert_eq!(r.unwrap(), 0);
        dev.flush().await.unwrap();
        ziob_runtime::sleep(Duration::from_millis(400))
            .await
            .unwrap();
        let (r, buf) = dev.read(0, 0, 4096, DmaBuf::with_capacity(4096)).await;
        r.unwrap();
        assert!(
            buf.iter().all(|&b| b == 0xBB),
            "flushed data overwritten by a write issued before the reset: first byte {:#x}",
            buf[0]
        );
    });
}

#[test]
fn a_write_issued_during_a_reset_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("dev.zns");
    on_core_watched("write during reset".into(), move || async move {
        drop(
            EmuDevice::create(&p, &Geometry::new(2, 4 << 20))
                .await
                .unwrap(),
        );
        let dev = EmuDevice::open(&p, slow(10_000_000)).await.unwrap();
        let d = dev.clone();
        let slow_write = ziob_runtime::spawn(async move {
            d.write(0, 0, DmaBuf::from_slice(&vec![0xAAu8; 1 << 20]))
                .await
                .0
        });
        ziob_runtime::yield_now().await;
        let d = dev.clone();
        let reset = ziob_runtime::spawn(async move {
            d.zone_action(ZoneAction::Reset, ZoneTarget::One(0)).await
        });
        ziob_runtime::yield_now().await;
        // Issued while the reset waits for the slow write: it waits too, and lands after it.
        let (r, _) = dev.append(0, DmaBuf::from_slice(&vec![0xBBu8; 4096])).await;
        assert_eq!(r.unwrap(), 0, "the append goes after the reset");
        slow_write.await.unwrap();
        reset.await.unwrap();
        let z = dev.report_zones(0, 1).await.unwrap()[0];
        assert_eq!(
            (z.state, z.write_pointer_bytes),
            (ZoneState::ImplicitlyOpened, 4096)
        );
    });
}

/// The bytes of write `id`: every block names the write and the block index.
fn data(id: u64, blocks: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity((blocks * BS) as usize);
    for index in 0..blocks {
        for i in 0..BS {
            out.push((id.wrapping_mul(131) ^ index.wrapping_mul(7) ^ (i / 8)) as u8);
        }
        let at = out.len() - BS as usize;
        out[at..at + 8].copy_from_slice(&id.to_le_bytes());
    }
    out
}

/// A write acknowledged with `Ok`, and the zone's reset count when it was issued.
struct Acked {
    zone: u32,
    id: u64,
    offset: u64,
    blocks: u64,
    resets_at_issue: u64,
}

/// What the run saw: per zone, how many resets were issued (counted when the reset is
/// first polled, before it can take effect); the acknowledged writes.
#[derive(Default)]
struct Seen {
    resets: Vec<u64>,
    acked: Vec<Acked>,
}

#[test]
fn seeded_writes_dropped_at_random_polls_with_concurrent_resets_never_overwrite_later_data() {
    for seed in seeds(12) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("dev.zns");
        let what = format!("seed {seed} (replay: ZIOB_SEED={seed})");
        eprintln!("{what}");
        on_core_watched(what.clone(), move || run_seed(seed, p, what));
    }
}

async fn run_seed(seed: u64, path: std::path::PathBuf, what: String) {
    const ZONES: u32 = 2;
    let mut rng = Rng(seed);
    drop(
        EmuDevice::create(&path, &Geometry::new(ZONES, 4 << 20))
            .await
            .unwrap(),
    );
    // 20 MB/s: a 256 KiB write is in flight for ~13 ms.
    let dev = EmuDevice::open(&path, slow(20_000_000)).await.unwrap();
    let seen = Rc::new(RefCell::new(Seen {
        resets: vec![0; ZONES as usize],
        acked: Vec::new(),
    }));
    let mut tasks = Vec::new();
    for id in 1..=40u64 {
        let zone = rng.below(u64::from(ZONES)) as u32;
        match rng.below(10) {
            // An append that is awaited in a task of its own.
            0..=3 => {
                let blocks = 1 + rng.below(64);
                let (d, seen) = (dev.clone(), seen.clone());
                tasks.push(ziob_runtime::spawn(async move {
                    let resets_at_issue = seen.borrow().resets[zone as usize];
                    let buf = DmaBuf::from_slice(&data(id, blocks));
                    if let (Ok(offset), _) = d.append(zone, buf).await {
                        seen.borrow_mut().acked.push(Acked {
                            zone,
                            id,
                            offset,
                            blocks,
                            resets_at_issue,
                        });
                    }
                }));
            }
            // An append dropped after a random number of polls (zero: never issued).
            4..=6 => {
                let blocks = 1 + rng.below(64);
                let polls = rng.below(4);
                let d = dev.clone();
                let mut w =
                    Box::pin(
                        async move { d.append(zone, DmaBuf::from_slice(&data(id, blocks))).await },
                    );
                let mut finished = false;
                for _ in 0..polls {
                    if futures::poll!(w.as_mut()).is_ready() {
                        finished = true;
                        break;
                    }
                    ziob_runtime::yield_now().await;
                }
                // Or dropped by a timer racing it.
                if !finished && rng.below(2) == 0 {
                    let t = Duration::from_micros(rng.below(3000));
                    let _ = select(w, Box::pin(ziob_runtime::sleep(t))).await;
                }
            }
            // A reset (sometimes of every zone) or a finish, concurrent with the writes.
            7..=8 => {
                let action = if rng.below(5) == 0 {
                    ZoneAction::Finish
                } else {
                    ZoneAction::Reset
                };
                let target = if rng.below(4) == 0 {
                    ZoneTarget::All
                } else {
                    ZoneTarget::One(zone)
                };
                let (d, seen) = (dev.clone(), seen.clone());
                tasks.push(ziob_runtime::spawn(async move {
                    if action == ZoneAction::Reset {
                        let mut s = seen.borrow_mut();
                        match target {
                            ZoneTarget::One(z) => s.resets[z as usize] += 1,
                            ZoneTarget::All => s.resets.iter_mut().for_each(|r| *r += 1),
                        }
                    }
                    d.zone_action(action, target).await.unwrap();
                }));
            }
            _ => dev.flush().await.unwrap(),
        }
        let pause = rng.below(3000);
        if pause > 1000 {
            let _ = ziob_runtime::sleep(Duration::from_micros(pause)).await;
        } else {
            ziob_runtime::yield_now().await;
        }
    }
    for t in tasks {
        t.await;
    }
    // Every transfer of a dropped write has landed by now (the largest takes ~13 ms).
    let _ = ziob_runtime::sleep(Duration::from_millis(300)).await;
    let seen = Rc::try_unwrap(seen)
        .ok()
        .expect("every task has ended")
        .into_inner();
    let mut survivors: Vec<&Acked> = seen
        .acked
        .iter()
        .filter(|a| a.resets_at_issue == seen.resets[a.zone as usize])
        .collect();
    survivors.sort_by_key(|a| (a.zone, a.offset));
    for pair in survivors.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        assert!(
            a.zone != b.zone || a.offset + a.blocks * BS <= b.offset,
            "{what}: writes {} and {} of zone {} were both acknowledged at overlapping ranges",
            a.id,
            b.id,
            a.zone
        );
    }
    for a in survivors {
        let len = (a.blocks * BS) as usize;
        let (r, buf) = dev
            .read(a.zone, a.offset, len, DmaBuf::with_capacity(len))
            .await;
        r.unwrap();
        if buf[..] != data(a.id, a.blocks)[..] {
            let bad = (0..a.blocks as usize)
                .find(|&b| {
                    buf[b * 4096..(b + 1) * 4096] != data(a.id, a.blocks)[b * 4096..(b + 1) * 4096]
                })
                .unwrap();
            let found = u64::from_le_bytes(buf[bad * 4096..bad * 4096 + 8].try_into().unwrap());
            panic!(
                "{what}: write {} (zone {}, offset {}, acknowledged, no reset after it) lost block \
                 {bad}: it holds write {found}'s data",
                a.id, a.zone, a.offset
            );
        }
    }
}

#[test]
fn a_zone_action_whose_table_write_fails_is_not_applied() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("dev.zns");
    on_core_watched("failed table write".into(), move || async move {
        drop(
            EmuDevice::create(&p, &Geometry::new(4, 1 << 20))
                .await
                .unwrap(),
        );
        let actions = [
            ZoneAction::Reset,
            ZoneAction::Finish,
            ZoneAction::Open,
            ZoneAction::Close,
        ];
        for (zone, &action) in actions.iter().enumerate() {
            let zone = zone as u32;
            let dev = EmuDevice::open(&p, LatencyModel::default()).await.unwrap();
            let (r, _) = dev.append(zone, DmaBuf::from_slice(&[9; 4096])).await;
            r.unwrap();
            if action == ZoneAction::Open {
                dev.zone_action(ZoneAction::Close, ZoneTarget::One(zone))
                    .await
                    .unwrap();
            }
            dev.flush().await.unwrap();
            let before = dev.report_zones(zone, 1).await.unwrap()[0];
            dev.fail_table_write(libc::EIO);
            let e = dev
                .zone_action(action, ZoneTarget::One(zone))
                .await
                .expect_err("the table write fails");
            assert!(e.to_string().contains("injected"), "{action}: {e}");
            let after = dev.report_zones(zone, 1).await.unwrap()[0];
            assert_eq!(
                after, before,
                "{action} was applied although it is not durable"
            );
            if action == ZoneAction::Reset {
                let (r, _) = dev.append(zone, DmaBuf::from_slice(&[7; 4096])).await;
                assert_eq!(r.unwrap(), 4096, "an append after the failed reset");
                dev.flush().await.unwrap();
            }
            // Without the fault the action is applied and durable.
            dev.zone_action(action, ZoneTarget::One(zone))
                .await
                .unwrap();
            let applied = dev.report_zones(zone, 1).await.unwrap()[0];
            assert_ne!(applied.state, before.state, "{action}");
            drop(dev);
            let dev = EmuDevice::open(&p, LatencyModel::default()).await.unwrap();
            let reopened = dev.report_zones(zone, 1).await.unwrap()[0];
            let expected = match action {
                ZoneAction::Reset => ZoneState::Empty,
                ZoneAction::Finish => ZoneState::Full,
                // Opened zones come back Closed after a power cycle.
                ZoneAction::Open | ZoneAction::Close => ZoneState::Closed,
                _ => unreachable!(),
            };
            assert_eq!(reopened.state, expected, "{action} after reopen");
        }
    });
}

#[test]
fn writes_held_back_by_a_reset_are_accepted_in_issue_order() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("dev.zns");
    on_core_watched("issue order".into(), move || async move {
        drop(
            EmuDevice::create(&p, &Geometry::new(2, 4 << 20))
                .await
                .unwrap(),
        );
        let dev = EmuDevice::open(&p, slow(10_000_000)).await.unwrap();
        let d = dev.clone();
        let slow_write = ziob_runtime::spawn(async move {
            d.write(0, 0, DmaBuf::from_slice(&vec![0xAAu8; 1 << 20]))
                .await
                .0
        });
        ziob_runtime::yield_now().await;
        let d = dev.clone();
        let reset = ziob_runtime::spawn(async move {
            d.zone_action(ZoneAction::Reset, ZoneTarget::One(0)).await
        });
        ziob_runtime::yield_now().await;
        let append = |n: u8| {
            let d = dev.clone();
            Box::pin(async move { d.append(0, DmaBuf::from_slice(&[n; 4096])).await.0 })
        };
        // Issued (first polled) while the reset holds the zone: they wait, in this order.
        let (mut first, mut second) = (append(1), append(2));
        assert!(futures::poll!(first.as_mut()).is_pending());
        assert!(futures::poll!(second.as_mut()).is_pending());
        slow_write.await.unwrap();
        reset.await.unwrap();
        // A third one issued before the waiting ones are polled again still goes after them.
        let mut third = append(3);
        let _ = futures::poll!(third.as_mut());
        let (first, second) = (first.await.unwrap(), second.await.unwrap());
        let third = third.await.unwrap();
        assert_eq!(
            (first, second, third),
            (0, 4096, 8192),
            "accepted out of issue order"
        );
        // A waiting write that is dropped leaves the queue.
        let d = dev.clone();
        let reset = ziob_runtime::spawn(async move {
            d.zone_action(ZoneAction::Reset, ZoneTarget::One(0)).await
        });
        ziob_runtime::yield_now().await;
        let mut dropped = append(4);
        if futures::poll!(dropped.as_mut()).is_pending() {
            drop(dropped);
        }
        reset.await.unwrap();
        assert_eq!(append(5).await.unwrap(), 0, "the zone takes writes again");
    });
}
