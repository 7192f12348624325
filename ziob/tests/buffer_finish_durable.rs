//! A completed finish is durable: every byte appended before it, and the zone's Full state,
//! survive a power loss. Seeded search over the ways a zone reaches its finish: filled to
//! capacity by appends (the write-back then makes the device zone Full by its writes, and
//! there is no device finish to send), or partly filled (padding, a device finish), with or
//! without a flush or an idle write-back in between, several zones finishing at once on both
//! cores. After the finishes a simulated power loss (`MemDevice::crash`) keeps only what the
//! device made durable; a new instance must see every zone Full with its data.
//! Seeds: `ZIOB_SHARD_SEEDS` (see `shard_support::seeds`).

mod shard_support;

use std::time::Duration;

use shard_support::{record, watchdog, Rng, SlowMem};
use ziob::{DmaBuf, Geometry, Runtime, Ziob, ZiobConfig, ZoneState};

const ZONES: u32 = 4;

#[test]
fn a_completed_finish_survives_a_power_loss() {
    for seed in shard_support::seeds(0..24) {
        Runtime::builder()
            .cores(2)
            .build()
            .unwrap()
            .block_on(move || async move {
                let mut rng = Rng::new(seed);
                let mut g = Geometry::new(ZONES, 64 << 10);
                g.zone_capacity_bytes = (8 + rng.below(9)) * 4096; // 32..64 KiB
                let cap = g.zone_capacity_bytes;
                let dev = SlowMem::new("mem:finish", &g, seed);
                let config = ZiobConfig {
                    writeback_unit_bytes: Some(4096 << rng.below(3)),
                    shard_budget_bytes: 256 << 10,
                    idle_writeback: (rng.below(2) == 0).then(|| Duration::from_millis(1)),
                    ..ZiobConfig::default()
                };
                let z = Ziob::with_device(dev.clone(), config.clone())
                    .await
                    .unwrap();
                // Per zone, its records (offset, id, len): filled to capacity, or not.
                let mut tasks = Vec::new();
                for zone in 0..ZONES {
                    let z = z.clone();
                    let zseed = rng.next();
                    tasks.push(ziob::runtime::spawn(async move {
                        let mut rng = Rng::new(zseed);
                        let fill = rng.below(3) != 0;
                        let goal = if fill { cap } else { 1 + rng.below(cap - 4096) };
                        let mut at = 0;
                        let mut acked = Vec::new();
                        for id in 0.. {
                            if at >= goal {
                                break;
                            }
                            let len = (1 + rng.below(6000)).min(goal - at) as usize;
                            let off = z
                                .append(zone, DmaBuf::from_slice(&record(zone, id, len)))
                                .await
                                .unwrap_or_else(|e| panic!("seed {seed}: append zone {zone}: {e}"));
                            acked.push((off, id, len));
                            at = off + len as u64;
                            match rng.below(8) {
                                0 => {
                                    z.flush(zone).await.unwrap();
                                    at = at.div_ceil(4096) * 4096; // padded
                                }
                                1 => {
                                    ziob::runtime::sleep(Duration::from_millis(2)).await.unwrap();
                                }
                                _ => {}
                            }
                        }
                        if rng.below(2) == 0 {
                            // Let the write-back reach the end first (to capacity: Full).
                            ziob::runtime::sleep(Duration::from_millis(3)).await.unwrap();
                        }
                        z.zone(zone)
                            .finish()
                            .await
                            .unwrap_or_else(|e| panic!("seed {seed}: finish zone {zone}: {e}"));
                        (zone, fill, acked)
                    }));
                }
                let done = watchdog(30, format!("seed {seed}: finishes"), async {
                    let mut out = Vec::new();
                    for t in tasks {
                        out.push(t.await);
                    }
                    out
                })
                .await;
                // Power loss right after the finishes returned.
                z.abandon().await.unwrap();
                dev.mem.crash();
                let z = Ziob::with_device(dev, config).await.unwrap();
                for (zone, fill, acked) in done {
                    let info = z.zone(zone).report().await.unwrap();
                    assert_eq!(
                        info.state,
                        ZoneState::Full,
                        "seed {seed}: zone {zone} (filled to capacity: {fill}) was finished but came back {:?} at {}",
                        info.state,
                        info.write_pointer_bytes
                    );
                    for (off, id, len) in acked {
                        let got = z.read(zone, off, len).await.unwrap();
                        assert!(
                            got[..] == record(zone, id, len)[..],
                            "seed {seed}: zone {zone} (filled to capacity: {fill}): record {id} at {off} (+{len}) lost after a completed finish"
                        );
                    }
                }
            })
            .unwrap();
    }
}
