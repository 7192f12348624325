//! A zone flush racing a reset of the same zone that the device refuses: the zone keeps its
//! data, so the flush may return only once that data is durable. (The flush used to stop
//! waiting for its write-back as soon as the reset began, and then flushed the device cache
//! before the write-back had landed: after a power cut the "flushed" data was gone.)
//! The zone's write-back is held at the device until the reset has begun; seeded: the
//! record's size and how long the write-back is held after that.

mod delay_support;
mod shard_support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use delay_support::DelayMem;
use shard_support::{mix, record, seeds};
use ziob::{DmaBuf, Geometry, Runtime, Ziob, ZiobConfig, ZoneAction, ZoneTarget};

#[test]
fn a_flush_racing_a_failed_reset_keeps_its_promise() {
    for seed in seeds(0..12) {
        Runtime::builder()
            .cores(1)
            .build()
            .unwrap()
            .block_on(move || async move {
                let g = Geometry::new(4, 64 << 20);
                // Zone 0's writes are held at the device until released below, and the
                // device refuses resets.
                let dev = DelayMem::new(&format!("mem:failed-reset-{seed}"), &g);
                dev.c.held_zone.store(0, Ordering::SeqCst);
                dev.c.refuse_resets.store(true, Ordering::SeqCst);
                let mem = dev.mem.clone();
                let c = dev.c.clone();
                let cfg = ZiobConfig {
                    writeback_unit_bytes: Some(64 << 10),
                    ..ZiobConfig::default()
                };
                let z = Ziob::with_device(dev, cfg).await.unwrap();
                let data = record(0, seed, 1000 + (mix(seed ^ 1) % 20_000) as usize);
                let off = z.append(0, DmaBuf::from_slice(&data)).await.unwrap();
                // Another zone's write-backs complete meanwhile and wake every waiter of the
                // core (as on a busy core): a waiter must re-check, not trust being woken.
                let stop = std::rc::Rc::new(std::cell::Cell::new(false));
                let noise = {
                    let z = z.clone();
                    let stop = stop.clone();
                    ziob::runtime::spawn(async move {
                        // Whole write-back units, no flushes (a flush would flush the
                        // device cache and hide what this test looks for).
                        let mut n = 0;
                        while !stop.get() && n < 500 {
                            let r = record(1, n, 64 << 10);
                            if z.append(1, DmaBuf::from_slice(&r)).await.is_err() {
                                return;
                            }
                            let _ = ziob::runtime::sleep(Duration::from_micros(100)).await;
                            n += 1;
                        }
                    })
                };
                let flusher = {
                    let z = z.clone();
                    ziob::runtime::spawn(async move { z.flush(0).await })
                };
                // The reset starts while the flush's write-back is held at the device.
                let _ = ziob::runtime::sleep(Duration::from_micros(500)).await;
                let reset = {
                    let z = z.clone();
                    ziob::runtime::spawn(async move {
                        z.zone_action(ZoneAction::Reset, ZoneTarget::One(0)).await
                    })
                };
                let held = Duration::from_micros(500 + mix(seed ^ 2) % 3000);
                let _ = ziob::runtime::sleep(held).await;
                c.held_zone.store(u64::MAX, Ordering::SeqCst);
                let reset = reset.await;
                assert!(reset.is_err(), "seed {seed}: the device refuses resets");
                stop.set(true);
                flusher.await.unwrap();
                noise.await;
                // The power cut.
                z.abandon().await.unwrap();
                mem.crash();
                let z = Ziob::with_device(mem.clone(), ZiobConfig::default())
                    .await
                    .unwrap();
                let got = z.read(0, off, data.len()).await.unwrap();
                assert!(
                    got[..] == data[..],
                    "seed {seed}: the flushed record did not survive the power cut"
                );
                z.close().await.unwrap();
            })
            .unwrap();
    }
}
