//! Issue #12 item 1: a write-back shares the chunk's memory with the buffer (the device
//! reads a view) instead of taking it away. With a device whose writes take 2 s and a
//! write-back in flight — started by a flush of a partial chunk, by a full write-back unit,
//! or by memory pressure — appends to the zone and reads of any buffered byte, including
//! the bytes being written, must complete from memory: each must finish within 500 ms (a
//! hang detector far below the device delay, not a speed check). Seeded record sizes; after
//! the device catches up, everything reads back and a flush covers it.

mod delay_support;

use std::sync::atomic::Ordering;

use delay_support::{within_ms, DelayMem};
use ziob::{DmaBuf, Geometry, Runtime, Ziob, ZiobConfig, ZonedDevice};

const DEVICE_DELAY_MS: u64 = 2000;
const OP_LIMIT_MS: u64 = 500;
const UNIT: u64 = 64 << 10;

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8 | 1)
        .collect()
}

#[derive(Clone, Copy, Debug)]
enum Trigger {
    /// A flush of a partly filled chunk, running in the background.
    Flush,
    /// A chunk filled to the write-back unit.
    FullUnit,
    /// Memory pressure: another zone's write needs the memory.
    Pressure,
}

async fn case(trigger: Trigger, seed: u64) {
    let g = Geometry::new(4, 8 << 20);
    let dev = DelayMem::new(&format!("i12-share-{seed}"), &g);
    let cfg = ZiobConfig {
        writeback_unit_bytes: Some(UNIT),
        // Room for three units: a fourth forces pressure write-back.
        shard_budget_bytes: 3 * UNIT,
        idle_writeback: None,
        ..ZiobConfig::default()
    };
    let z = Ziob::with_device(dev.clone(), cfg).await.unwrap();
    let mut expect: Vec<u8> = Vec::new();
    let first_len = match trigger {
        Trigger::Flush => 5000 + (seed as usize * 7919) % 40_000,
        Trigger::FullUnit | Trigger::Pressure => UNIT as usize + 100 + (seed as usize * 131) % 4000,
    };
    dev.c
        .write_delay_ms
        .store(DEVICE_DELAY_MS, Ordering::SeqCst);
    let data = pattern(seed, first_len);
    z.append(0, DmaBuf::from_slice(&data)).await.unwrap();
    expect.extend_from_slice(&data);
    let background = match trigger {
        Trigger::Flush => {
            let z2 = z.clone();
            Some(ziob::runtime::spawn(async move { z2.flush(0).await }))
        }
        Trigger::FullUnit => None,
        Trigger::Pressure => {
            // Zones 1 and 2 take the rest of the budget; zone 3's append needs zone 0's
            // memory, so pressure write-back starts (zone 0 is least recently written).
            for zone in 1..3 {
                z.append(
                    zone,
                    DmaBuf::from_slice(&pattern(zone.into(), UNIT as usize)),
                )
                .await
                .unwrap();
            }
            let z2 = z.clone();
            Some(ziob::runtime::spawn(async move {
                z2.append(3, DmaBuf::from_slice(&[5; 4096]))
                    .await
                    .map(|_| ())
            }))
        }
    };
    // Wait for a device write to be outstanding.
    for _ in 0..1000 {
        if dev.writes_in_flight() > 0 {
            break;
        }
        ziob::runtime::yield_now().await;
    }
    assert!(
        dev.writes_in_flight() > 0,
        "{trigger:?} seed {seed}: no write-back started"
    );
    for round in 0..3u64 {
        // An append to the zone being written back...
        let rec = pattern(
            seed ^ (round + 1) << 8,
            1 + ((seed + round) as usize * 977) % 9000,
        );
        let off = within_ms(
            OP_LIMIT_MS,
            format!("{trigger:?} seed {seed}: append during write-back"),
            z.append(0, DmaBuf::from_slice(&rec)),
        )
        .await
        .unwrap();
        assert!(off >= expect.len() as u64);
        expect.resize(off as usize, 0); // a flush may have padded
        expect.extend_from_slice(&rec);
        // ... and reads of the bytes being written, of the tail, and of everything.
        for (from, to) in [
            (0, 4096.min(expect.len())),
            (off as usize, expect.len()),
            (0, expect.len()),
        ] {
            let got = within_ms(
                OP_LIMIT_MS,
                format!("{trigger:?} seed {seed}: read {from}..{to} during write-back"),
                z.read(0, from as u64, to - from),
            )
            .await
            .unwrap();
            assert!(
                got[..] == expect[from..to],
                "{trigger:?} seed {seed}: read {from}..{to} differs"
            );
        }
    }
    assert!(
        dev.writes_in_flight() > 0,
        "{trigger:?} seed {seed}: the device write finished before the checks: they proved nothing"
    );
    dev.c.write_delay_ms.store(0, Ordering::SeqCst);
    if let Some(t) = background {
        t.await.unwrap();
    }
    z.flush(0).await.unwrap();
    let whole = expect.len().div_ceil(4096) * 4096;
    let back = dev
        .mem
        .read(0, 0, whole, DmaBuf::with_capacity(whole))
        .await;
    back.0.unwrap();
    assert!(
        back.1[..expect.len()] == expect[..],
        "{trigger:?} seed {seed}: device copy differs"
    );
    z.close().await.unwrap();
}

#[test]
fn appends_and_reads_never_wait_for_a_write_back() {
    Runtime::builder()
        .cores(1)
        .build()
        .unwrap()
        .block_on(|| async {
            for seed in 0..2u64 {
                for trigger in [Trigger::Flush, Trigger::FullUnit, Trigger::Pressure] {
                    case(trigger, seed).await;
                }
            }
        })
        .unwrap();
}
