//! Issue #11 item 3: `Ziob::close` must first refuse new calls, wait for the ones in flight,
//! then sync, then stop. Appenders on both cores race a close made from core 0; every append
//! that returned `Ok` must be on the device after close (checked after a simulated power loss,
//! through a new instance), and every append refused must be refused with `Closed`.

mod shard_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use shard_support::{record, watchdog, Rng, SlowMem};
use ziob::{DmaBuf, Geometry, Runtime, Ziob, ZiobConfig, ZiobError};

const ZONES: u32 = 8;

/// (zone, offset, record id, length) of every acknowledged append.
type Acked = Arc<Mutex<Vec<(u32, u64, u64, usize)>>>;

#[test]
fn every_append_acknowledged_before_close_is_durable_after_it() {
    for seed in shard_support::seeds(0..12) {
        Runtime::builder()
            .cores(2)
            .build()
            .unwrap()
            .block_on(move || async move {
                let g = Geometry::new(ZONES, 8 << 20);
                let dev = SlowMem::new("mem:close", &g, seed);
                let z = Ziob::with_device(dev.clone(), ZiobConfig::default())
                    .await
                    .unwrap();
                let acked: Acked = Arc::default();
                let mut cores = Vec::new();
                for core in 0..2usize {
                    let (z, acked) = (z.clone(), acked.clone());
                    cores.push(ziob::runtime::spawn(async move {
                        ziob::runtime::call_on(core, move || async move {
                            let mut tasks = Vec::new();
                            for t in 0..8u64 {
                                let (z, acked) = (z.clone(), acked.clone());
                                let id0 = (core as u64 * 8 + t) << 32;
                                tasks.push(ziob::runtime::spawn(async move {
                                    let mut rng = Rng::new(seed ^ id0);
                                    for n in 0.. {
                                        let zone = rng.below(u64::from(ZONES)) as u32;
                                        let len = 1 + rng.below(3000) as usize;
                                        let data = record(zone, id0 | n, len);
                                        match z.append(zone, DmaBuf::from_slice(&data)).await {
                                            Ok(off) => {
                                                acked.lock().unwrap().push((zone, off, id0 | n, len))
                                            }
                                            Err(ZiobError::Closed) => return,
                                            Err(e) => panic!("seed {seed}: append: {e}"),
                                        }
                                    }
                                }));
                            }
                            for t in tasks {
                                t.await;
                            }
                        })
                        .await
                        .unwrap();
                    }));
                }
                let mut rng = Rng::new(seed);
                ziob::runtime::sleep(Duration::from_micros(200 + rng.below(3000)))
                    .await
                    .unwrap();
                watchdog(30, "close", z.close()).await.unwrap();
                watchdog(30, "appenders", futures::future::join_all(cores)).await;
                // Power loss: the device keeps only what was flushed.
                dev.mem.crash();
                let z = Ziob::with_device(dev, ZiobConfig::default()).await.unwrap();
                let acked = std::mem::take(&mut *acked.lock().unwrap());
                assert!(!acked.is_empty());
                for (zone, off, id, len) in acked {
                    let got = z.read(zone, off, len).await.unwrap();
                    assert!(
                        got[..] == record(zone, id, len)[..],
                        "seed {seed}: append to zone {zone} at {off} ({len} bytes) acknowledged before close, lost after it"
                    );
                }
                z.close().await.unwrap();
            })
            .unwrap();
    }
}
