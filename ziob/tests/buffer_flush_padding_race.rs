//! Issue #11 item 6: a flush pads the partial last block with zeros. The padding must be
//! decided and applied in one step (no wait between), cover only the current partial block,
//! and the flush must wait for exactly the padded end. Seeded: appenders of odd-sized
//! records and flushers on the same zones from both cores, over `mem` (with device calls
//! that take a while) and `emu` (with latency). Checks: every flush succeeds and the device's
//! write pointer is block aligned and covers the zone up to a block boundary; records never
//! overlap and every gap between them is zero padding up to the next block boundary; each
//! record reads back; nothing hangs (watchdog).

mod shard_support;

use std::sync::{Arc, Mutex};

use shard_support::{record, watchdog, Rng, SlowMem};
use ziob::{AnyDevice, DmaBuf, Geometry, Runtime, Ziob, ZiobConfig, ZonedDevice};

const ZONES: u32 = 4;
const BS: u64 = 4096;

type Acked = Arc<Mutex<Vec<(u32, u64, u64, usize)>>>; // (zone, offset, id, len)

async fn workload<D: ZonedDevice>(z: Ziob<D>, device: D, seed: u64) {
    let acked: Acked = Arc::default();
    let mut cores = Vec::new();
    for core in 0..2usize {
        let (z, device, acked) = (z.clone(), device.clone(), acked.clone());
        cores.push(ziob::runtime::spawn(async move {
            ziob::runtime::call_on(core, move || async move {
                let mut tasks = Vec::new();
                for t in 0..6u64 {
                    let (z, device, acked) = (z.clone(), device.clone(), acked.clone());
                    let id0 = (core as u64 * 16 + t) << 24;
                    tasks.push(ziob::runtime::spawn(async move {
                        let mut rng = Rng::new(seed ^ id0);
                        for n in 0..60u64 {
                            let zone = rng.below(u64::from(ZONES)) as u32;
                            if t % 3 == 0 {
                                // A flusher.
                                z.flush(zone).await.unwrap_or_else(|e| {
                                    panic!("seed {seed}: flush of zone {zone}: {e}")
                                });
                                let info = device.report_zones(zone, 1).await.unwrap()[0];
                                assert_eq!(
                                    info.write_pointer_bytes % BS,
                                    0,
                                    "seed {seed}: device write pointer off block"
                                );
                            } else {
                                let len = 1 + rng.below(7000) as usize;
                                let id = id0 | n;
                                let data = record(zone, id, len);
                                let off = z
                                    .append(zone, DmaBuf::from_slice(&data))
                                    .await
                                    .unwrap_or_else(|e| {
                                        panic!("seed {seed}: append to zone {zone}: {e}")
                                    });
                                acked.lock().unwrap().push((zone, off, id, len));
                            }
                            if rng.below(4) == 0 {
                                ziob::runtime::yield_now().await;
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
    watchdog(
        30,
        format!("seed {seed}: appenders and flushers"),
        futures::future::join_all(cores),
    )
    .await;
    let acked = std::mem::take(&mut *acked.lock().unwrap());
    for zone in 0..ZONES {
        watchdog(30, "final flush", z.flush(zone)).await.unwrap();
        let wp = z.report(zone, 1).await.unwrap()[0].write_pointer_bytes;
        assert_eq!(wp % BS, 0, "seed {seed}: zone {zone} wp {wp} after a flush");
        let mut recs: Vec<_> = acked.iter().filter(|r| r.0 == zone).collect();
        recs.sort_by_key(|r| r.1);
        let all = z.read(zone, 0, wp as usize).await.unwrap();
        let mut at = 0u64;
        for &&(_, off, id, len) in &recs {
            let gap = &all[at as usize..off as usize];
            assert!(
                off == at || (off == at.div_ceil(BS) * BS && off > at),
                "seed {seed}: zone {zone}: record at {off} after data ending at {at} (not the next block boundary)"
            );
            assert!(
                gap.iter().all(|&b| b == 0),
                "seed {seed}: zone {zone}: non-zero gap before {off}"
            );
            let want = record(zone, id, len);
            assert!(
                all[off as usize..off as usize + len] == want[..],
                "seed {seed}: zone {zone}: record at {off} damaged"
            );
            at = off + len as u64;
        }
        assert!(
            all[at as usize..].iter().all(|&b| b == 0),
            "seed {seed}: zone {zone}: data past the last record"
        );
        // What the flush made durable is on the device, block aligned.
        let dev = device.report_zones(zone, 1).await.unwrap()[0];
        assert_eq!(dev.write_pointer_bytes, wp, "seed {seed}: zone {zone}");
    }
    watchdog(30, "close", z.close()).await.unwrap();
}

#[test]
fn concurrent_flushes_pad_only_the_current_partial_block_on_mem() {
    for seed in shard_support::seeds(0..6) {
        Runtime::builder()
            .cores(2)
            .build()
            .unwrap()
            .block_on(move || async move {
                let g = Geometry::new(ZONES, 8 << 20);
                let dev = SlowMem::new("mem:slow", &g, seed);
                let cfg = ZiobConfig {
                    writeback_unit_bytes: Some(16 << 10),
                    ..ZiobConfig::default()
                };
                let z = Ziob::with_device(dev.clone(), cfg).await.unwrap();
                workload(z, dev, seed).await;
            })
            .unwrap();
    }
}

#[test]
fn concurrent_flushes_pad_only_the_current_partial_block_on_emu() {
    for seed in shard_support::seeds(200..210) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pad.zns");
        Runtime::builder()
            .cores(2)
            .build()
            .unwrap()
            .block_on(move || async move {
                let g = Geometry::new(ZONES, 8 << 20);
                ziob::backends::EmuDevice::create(&path, &g).await.unwrap();
                let spec = format!("emu:{},lat_us=40", path.display());
                let dev = ziob::backends::open_device(&spec).await.unwrap();
                let cfg = ZiobConfig {
                    writeback_unit_bytes: Some(16 << 10),
                    ..ZiobConfig::default()
                };
                let z: Ziob<AnyDevice> = Ziob::with_device(dev.clone(), cfg).await.unwrap();
                workload(z, dev, seed).await;
            })
            .unwrap();
    }
}
