//! Issue #12 item 2: group commit. Flushes that arrive while a device cache flush is pending
//! share the next one, so N tasks that each flush after their append cost far fewer than N
//! device flushes (counted with a device whose cache flush takes 200 ms, so the tasks pile
//! up behind it; the count is deterministic in shape: one flush in progress plus one shared
//! by everyone who came during it, per round). And a shared flush keeps its promise: with
//! seeded appenders and flushers racing, a power cut (`mem` crash: unflushed writes are
//! lost) right after a seeded number of flushes completed keeps every record whose flush
//! had completed (the device's flush covers what was written when it was issued, so a
//! caller that joined a flush already running would be caught).

mod delay_support;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use delay_support::DelayMem;
use ziob::{DmaBuf, Geometry, Runtime, Ziob, ZiobConfig, ZonedDevice};

/// Records as (zone, offset, data).
type Records = Rc<RefCell<Vec<(u32, u64, Vec<u8>)>>>;

fn record(zone: u32, id: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((u64::from(zone) * 131 + id * 31 + i as u64 * 7) % 251) as u8 | 1)
        .collect()
}

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[test]
fn concurrent_flushes_share_device_flushes() {
    for seed in 0..3u64 {
        Runtime::builder()
            .cores(1)
            .build()
            .unwrap()
            .block_on(move || async move {
                let g = Geometry::new(8, 8 << 20);
                let dev = DelayMem::new(&format!("i12-group-{seed}"), &g);
                dev.c.flush_delay_ms.store(200, Ordering::SeqCst);
                let z = Ziob::with_device(dev.clone(), ZiobConfig::default())
                    .await
                    .unwrap();
                let tasks = 16 + mix(seed) % 32;
                let mut handles = Vec::new();
                for t in 0..tasks {
                    let z = z.clone();
                    handles.push(ziob::runtime::spawn(async move {
                        let zone = (mix(seed ^ t) % 8) as u32;
                        let len = 1 + (mix(seed << 8 ^ t) % 9000) as usize;
                        z.append(zone, DmaBuf::from_slice(&record(zone, t, len)))
                            .await
                            .unwrap();
                        z.flush(zone).await.unwrap();
                    }));
                }
                for h in handles {
                    h.await;
                }
                let device_flushes = dev.c.flushes_done.load(Ordering::SeqCst);
                let counted: u64 = z
                    .stats()
                    .await
                    .unwrap()
                    .iter()
                    .map(|s| s.device_flushes)
                    .sum();
                assert_eq!(
                    counted, device_flushes,
                    "seed {seed}: stats count every device flush"
                );
                assert!(
                    device_flushes * 4 <= tasks,
                    "seed {seed}: {tasks} concurrent flushes cost {device_flushes} device flushes"
                );
                z.close().await.unwrap();
            })
            .unwrap();
    }
}

#[test]
fn what_a_shared_flush_covered_survives_a_power_cut() {
    for seed in 0..24u64 {
        Runtime::builder()
            .cores(1)
            .build()
            .unwrap()
            .block_on(move || async move {
                let g = Geometry::new(8, 8 << 20);
                let dev = DelayMem::new(&format!("i12-crash-{seed}"), &g);
                dev.c
                    .flush_delay_ms
                    .store(2 + mix(seed) % 5, Ordering::SeqCst);
                let cfg = ZiobConfig {
                    writeback_unit_bytes: Some(64 << 10),
                    ..ZiobConfig::default()
                };
                let z = Ziob::with_device(dev.clone(), cfg).await.unwrap();
                // Records whose flush completed: (zone, offset, data).
                let durable: Records = Rc::default();
                let covered: Records = Rc::default();
                let crashed = Rc::new(std::cell::Cell::new(false));
                let flushes_done = Rc::new(std::cell::Cell::new(0u64));
                let cut_after = 5 + mix(seed ^ 7) % 60;
                let mut handles = Vec::new();
                for t in 0..12u64 {
                    let (z, dev, durable, covered) =
                        (z.clone(), dev.clone(), durable.clone(), covered.clone());
                    let (crashed, flushes_done) = (crashed.clone(), flushes_done.clone());
                    handles.push(ziob::runtime::spawn(async move {
                        for n in 0.. {
                            if crashed.get() {
                                return;
                            }
                            let r = mix(seed ^ t << 16 ^ n);
                            let zone = (r % 8) as u32;
                            let data = record(zone, t << 20 | n, 1 + (r >> 8) as usize % 6000);
                            let Ok(off) = z.append(zone, DmaBuf::from_slice(&data)).await else {
                                return;
                            };
                            // About a third of the appends are followed by a flush.
                            if !(r >> 32).is_multiple_of(3) {
                                continue;
                            }
                            if z.flush(zone).await.is_err() || crashed.get() {
                                return;
                            }
                            durable.borrow_mut().push((zone, off, data));
                            // The power cut comes right after the `cut_after`-th completed
                            // flush, in the same step: this caller's record must be there.
                            flushes_done.set(flushes_done.get() + 1);
                            if flushes_done.get() == cut_after {
                                crashed.set(true);
                                *covered.borrow_mut() = std::mem::take(&mut *durable.borrow_mut());
                                dev.mem.crash();
                                return;
                            }
                        }
                    }));
                }
                for h in handles {
                    h.await;
                }
                let covered = std::mem::take(&mut *covered.borrow_mut());
                assert!(
                    !covered.is_empty(),
                    "seed {seed}: no flush completed before the cut"
                );
                for (zone, off, data) in covered {
                    let a = off / 4096 * 4096;
                    let b = (off + data.len() as u64).div_ceil(4096) * 4096;
                    let (res, buf) = dev
                        .mem
                        .read(
                            zone,
                            a,
                            (b - a) as usize,
                            DmaBuf::with_capacity((b - a) as usize),
                        )
                        .await;
                    res.unwrap_or_else(|e| panic!("seed {seed}: zone {zone} @{off}: {e}"));
                    let s = (off - a) as usize;
                    assert!(
                        buf[s..s + data.len()] == data[..],
                        "seed {seed}: zone {zone} @{off}: a flushed record was lost"
                    );
                }
                let _ = z.abandon().await;
            })
            .unwrap();
    }
}
