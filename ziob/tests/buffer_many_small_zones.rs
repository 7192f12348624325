//! Issue #12 item 3: chunk memory fits the data. A zone's first chunk is one block and its
//! chunks grow toward the write-back unit, so tiny appends to 10,000 zones of a device with
//! no zone limits fit the default budget (they used to fail with `BufferFull` at zone 128,
//! each zone charged a whole unit). When memory is short, pressure write-back pads a
//! partial last block and writes it out: seeded tiny appends to many zones through a budget
//! far smaller than one block per zone all succeed, each append lands at the write pointer
//! or — after a pressure pad — at the next block boundary with zeros in between, and every
//! byte reads back. When the buffer does refuse, the message names the cause and numbers.

use ziob::backends::MemDevice;
use ziob::{DmaBuf, Geometry, Runtime, Ziob, ZiobConfig, ZonedDevice};

const BS: u64 = 4096;

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn record(zone: u32, n: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((u64::from(zone) * 131 + n * 31 + i as u64 * 7) % 251) as u8 | 1)
        .collect()
}

#[test]
fn tiny_appends_to_ten_thousand_zones_fit_the_default_budget() {
    Runtime::builder()
        .cores(1)
        .build()
        .unwrap()
        .block_on(|| async {
            let g = Geometry::new(10_000, 1 << 20);
            let dev = MemDevice::new("i12-manyzones", &g).unwrap();
            let z = Ziob::with_device(dev, ZiobConfig::default()).await.unwrap();
            let mut lens = Vec::new();
            for zone in 0..10_000u32 {
                let len = 1 + (mix(zone.into()) % 64) as usize;
                let off = z
                    .append(zone, DmaBuf::from_slice(&record(zone, 0, len)))
                    .await
                    .unwrap_or_else(|e| panic!("append to zone {zone}: {e}"));
                assert_eq!(off, 0);
                lens.push(len);
            }
            let used: u64 = z.memory_used_bytes().await.unwrap().iter().sum();
            assert!(
                used <= ziob::SHARD_BUDGET_BYTES_DEFAULT,
                "{used} bytes used"
            );
            for zone in (0..10_000u32).step_by(97) {
                let len = lens[zone as usize];
                let got = z.read(zone, 0, len).await.unwrap();
                assert!(
                    got[..] == record(zone, 0, len)[..],
                    "zone {zone} reads back"
                );
            }
            z.close().await.unwrap();
        })
        .unwrap();
}

#[test]
fn pressure_pads_and_writes_back_partial_blocks() {
    for seed in 0..4u64 {
        Runtime::builder()
            .cores(1)
            .build()
            .unwrap()
            .block_on(move || async move {
                let zones = 48u32;
                let g = Geometry::new(zones, 1 << 20);
                let dev = MemDevice::new(format!("i12-pressure-{seed}"), &g).unwrap();
                let budget = 32 * 1024; // 8 blocks for 48 zones
                let cfg = ZiobConfig {
                    writeback_unit_bytes: Some(16 * 1024),
                    shard_budget_bytes: budget,
                    idle_writeback: None,
                    ..ZiobConfig::default()
                };
                let z = Ziob::with_device(dev.clone(), cfg).await.unwrap();
                let mut model: Vec<Vec<u8>> = vec![Vec::new(); zones as usize];
                let mut padded = 0;
                for n in 0..600u64 {
                    let r = mix(seed << 32 ^ n);
                    let zone = (r % u64::from(zones)) as u32;
                    let len = 1 + (r >> 16) as usize % 300;
                    let data = record(zone, n, len);
                    let off = z
                        .append(zone, DmaBuf::from_slice(&data))
                        .await
                        .unwrap_or_else(|e| panic!("seed {seed} op {n}: zone {zone}: {e}"));
                    let m = &mut model[zone as usize];
                    let here = m.len() as u64;
                    if off != here {
                        assert_eq!(
                            off,
                            here.div_ceil(BS) * BS,
                            "seed {seed} op {n}: zone {zone} append at {off}, write pointer {here}"
                        );
                        padded += 1;
                        m.resize(off as usize, 0);
                    }
                    m.extend_from_slice(&data);
                    let used: u64 = z.memory_used_bytes().await.unwrap().iter().sum();
                    assert!(used <= budget, "seed {seed}: {used} bytes used");
                }
                assert!(
                    padded > 0,
                    "seed {seed}: memory pressure never padded a block"
                );
                for (zone, m) in model.iter().enumerate() {
                    if m.is_empty() {
                        continue;
                    }
                    let got = z.read(zone as u32, 0, m.len()).await.unwrap();
                    assert!(got[..] == m[..], "seed {seed}: zone {zone} reads back");
                }
                z.sync().await.unwrap();
                for (zone, m) in model.iter().enumerate() {
                    let whole = (m.len() as u64).div_ceil(BS) * BS;
                    if whole == 0 {
                        continue;
                    }
                    let (res, got) = dev
                        .read(
                            zone as u32,
                            0,
                            whole as usize,
                            DmaBuf::with_capacity(whole as usize),
                        )
                        .await;
                    res.unwrap();
                    assert!(
                        got[..m.len()] == m[..],
                        "seed {seed}: zone {zone} on the device"
                    );
                }
                z.close().await.unwrap();
            })
            .unwrap();
    }
}
