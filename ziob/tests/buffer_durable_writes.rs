//! Zone flushes over a device with durable writes (Force Unit Access): a flush whose zone was
//! durable up to its write-back writes that write-back durably and issues no device cache
//! flush; one over data the device may still hold in its volatile cache (found there at open,
//! written back by an ordinary write, or after a reset) flushes the cache.
//! Over `mem`, whose durable write survives a power cut only where the zone's data before it
//! was durable already, seeded runs of appends, flushes, idle write-backs, resets and a cut
//! at a seeded point must keep every record whose flush returned — on plain `mem` and on
//! `SlowMem`, whose write-backs stay in flight while other calls run.
//! `ZIOB_SHARD_SEEDS` runs more seeds or replays one.

mod shard_support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shard_support::{mix, record, seeds, SlowMem};
use ziob::backends::MemDevice;
use ziob::{DmaBuf, Geometry, Runtime, Ziob, ZiobConfig, ZoneAction, ZoneTarget, ZonedDevice};

async fn device_flushes_and_durable_writes<D: ZonedDevice>(z: &Ziob<D>) -> (u64, u64) {
    let stats = z.stats().await.unwrap();
    (
        stats.iter().map(|s| s.device_flushes).sum(),
        stats.iter().map(|s| s.device_durable_writes).sum(),
    )
}

#[test]
fn flushes_continuing_a_durable_prefix_need_no_device_flush() {
    Runtime::builder()
        .cores(1)
        .build()
        .unwrap()
        .block_on(|| async {
            let g = Geometry::new(4, 8 << 20);
            let dev = MemDevice::new("mem:durable-writes", &g).unwrap();
            // Data the device took before the buffer opened: maybe only in its cache.
            let (res, _) = dev.write(0, 0, DmaBuf::from_slice(&[7u8; 8192])).await;
            res.unwrap();
            let z = Ziob::with_device(dev.clone(), ZiobConfig::default())
                .await
                .unwrap();
            let mut kept = Vec::new();
            for id in 0..50u64 {
                let data = record(0, id, 100 + (id as usize * 37) % 300);
                let off = z.append(0, DmaBuf::from_slice(&data)).await.unwrap();
                z.flush(0).await.unwrap();
                kept.push((off, data));
            }
            // The first flush is an ordinary write-back and a cache flush (the data found
            // at open may be in the cache); every later one continues the durable prefix
            // with one durable write.
            assert_eq!(device_flushes_and_durable_writes(&z).await, (1, 49));
            // A flush with nothing new is free.
            z.flush(0).await.unwrap();
            assert_eq!(device_flushes_and_durable_writes(&z).await, (1, 49));
            // The power cut.
            z.abandon().await.unwrap();
            dev.crash();
            let z = Ziob::with_device(dev.clone(), ZiobConfig::default())
                .await
                .unwrap();
            for (off, data) in &kept {
                let got = z.read(0, *off, data.len()).await.unwrap();
                assert!(got[..] == data[..], "the record at {off} was lost");
            }
            // After a reset the next flush flushes the cache (the reset may sit in it), and
            // covers the other zones of the core too: zone 1's first flush is durable.
            z.zone_action(ZoneAction::Reset, ZoneTarget::One(0))
                .await
                .unwrap();
            z.append(0, DmaBuf::from_slice(b"after reset"))
                .await
                .unwrap();
            z.flush(0).await.unwrap();
            let other = z
                .append(1, DmaBuf::from_slice(b"other zone"))
                .await
                .unwrap();
            z.flush(1).await.unwrap();
            assert_eq!(device_flushes_and_durable_writes(&z).await, (1, 1));
            z.abandon().await.unwrap();
            dev.crash();
            let z = Ziob::with_device(dev.clone(), ZiobConfig::default())
                .await
                .unwrap();
            assert_eq!(&z.read(0, 0, 4096).await.unwrap()[..11], b"after reset");
            assert_eq!(&z.read(1, other, 4096).await.unwrap()[..10], b"other zone");
            z.close().await.unwrap();
        })
        .unwrap();
}

/// Appends, flushes, pauses (idle write-backs) and rare resets on six zones, then a power
/// cut at a seeded step; every record whose flush returned must read back. Returns the
/// durable write-backs counted.
async fn power_cut_run<D: ZonedDevice>(dev: D, crash: impl FnOnce(), seed: u64) -> u64 {
    // Small write-back units and a short idle time: ordinary write-backs happen between
    // the flushes, so flushes meet prefixes that are not durable.
    let cfg = ZiobConfig {
        writeback_unit_bytes: Some(16 << 10),
        idle_writeback: Some(Duration::from_micros(200 + mix(seed) % 800)),
        ..ZiobConfig::default()
    };
    let z = Ziob::with_device(dev.clone(), cfg).await.unwrap();
    // (zone, offset, data) of records whose flush returned, and of those not flushed yet.
    let mut flushed: Vec<(u32, u64, Vec<u8>)> = Vec::new();
    let mut pending: Vec<(u32, u64, Vec<u8>)> = Vec::new();
    let cut_after = 20 + mix(seed ^ 7) % 400;
    for step in 0..cut_after {
        let r = mix(seed << 16 ^ step);
        let zone = (r % 6) as u32;
        // Resets are rare: on `mem` a zone action makes the whole device durable, which
        // would hide a flush that promised too much.
        match (r >> 8) % 40 {
            0 => {
                z.zone_action(ZoneAction::Reset, ZoneTarget::One(zone))
                    .await
                    .unwrap();
                pending.retain(|p| p.0 != zone);
                flushed.retain(|p| p.0 != zone);
            }
            1..=10 => {
                z.flush(zone).await.unwrap();
                let (now, later): (Vec<_>, Vec<_>) = pending.drain(..).partition(|p| p.0 == zone);
                pending = later;
                flushed.extend(now);
            }
            11..=14 => {
                ziob::runtime::sleep(Duration::from_micros(r % 1500))
                    .await
                    .unwrap();
            }
            _ => {
                // Some appends are whole blocks, so that a zone's end in memory is often
                // block-aligned (a flush then pads nothing).
                let len = if (r >> 40).is_multiple_of(2) {
                    4096 * (1 + ((r >> 16) % 2) as usize)
                } else {
                    1 + ((r >> 16) % 6_000) as usize
                };
                let data = record(zone, step, len);
                match z.append(zone, DmaBuf::from_slice(&data)).await {
                    Ok(off) => pending.push((zone, off, data)),
                    // Full: start the zone over.
                    Err(e) if e.kind() == Some(ziob::ErrorKind::ZoneFull) => {
                        z.zone_action(ZoneAction::Reset, ZoneTarget::One(zone))
                            .await
                            .unwrap();
                        pending.retain(|p| p.0 != zone);
                        flushed.retain(|p| p.0 != zone);
                    }
                    Err(e) => panic!("seed {seed}: append: {e}"),
                }
            }
        }
    }
    let (_, durable) = device_flushes_and_durable_writes(&z).await;
    // The power cut: the buffer's memory and the device's cache are gone.
    z.abandon().await.unwrap();
    crash();
    let z = Ziob::with_device(dev, ZiobConfig::default()).await.unwrap();
    for (zone, off, data) in &flushed {
        let got = z.read(*zone, *off, data.len()).await.unwrap();
        assert!(
            got[..] == data[..],
            "seed {seed}: a flushed record of {} bytes at zone {zone} offset {off} did not \
             survive the cut",
            data.len()
        );
    }
    z.close().await.unwrap();
    durable
}

#[test]
fn every_flushed_record_survives_a_power_cut() {
    let durable_total = Arc::new(AtomicU64::new(0));
    for seed in seeds(0..200) {
        let durable_total = durable_total.clone();
        Runtime::builder()
            .cores(1)
            .build()
            .unwrap()
            .block_on(move || async move {
                let g = Geometry::new(6, 2 << 20);
                let n = if seed % 2 == 0 {
                    let dev = MemDevice::new(format!("mem:durable-cut-{seed}"), &g).unwrap();
                    let crashed = dev.clone();
                    power_cut_run(dev, move || crashed.crash(), seed).await
                } else {
                    let dev = SlowMem::new(&format!("mem:durable-cut-slow-{seed}"), &g, seed);
                    let crashed = dev.mem.clone();
                    power_cut_run(dev, move || crashed.crash(), seed).await
                };
                durable_total.fetch_add(n, Ordering::Relaxed);
            })
            .unwrap();
    }
    // On average at least one per seed (one seed alone may make none).
    let runs = seeds(0..200).count() as u64;
    let total = durable_total.load(Ordering::Relaxed);
    assert!(
        runs < 10 || total >= runs,
        "{runs} runs made only {total} durable write-backs"
    );
}
