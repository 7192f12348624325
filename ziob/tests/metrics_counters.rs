//! Issue #13, metrics: what the shards count and time matches a known workload, per core and
//! merged; hits and misses; gauges of calls and device writes in flight; latencies bounded
//! below by the device's delays.

mod delay_support;
mod shard_support;

use std::sync::atomic::Ordering;

use delay_support::DelayMem;
use shard_support::{record, watchdog, Rng};
use ziob::backends::MemDevice;
use ziob::metrics::{MetricsSnapshot, OpKind};
use ziob::{DmaBuf, Geometry, Runtime, Ziob, ZiobConfig, ZoneAction, ZoneTarget};

const CORES: usize = 2;
const ZONES: u32 = 8;
const TASKS: u32 = 4;

/// What one core is expected to have counted.
#[derive(Debug, Default, Clone, PartialEq)]
struct Expected {
    ops: [u64; OpKind::COUNT],
    append_bytes: u64,
    bytes_written: u64,
    read_bytes: u64,
    reads: u64,
}

fn config() -> ZiobConfig {
    ZiobConfig {
        idle_writeback: None,
        ..ZiobConfig::default()
    }
}

/// Seeded random appends, writes, reads, flushes, syncs and zone actions from concurrent
/// tasks (each task owns zones `t` and `t + TASKS`, one per core); every call's kind and bytes
/// are counted on the core owning its zone (a sync or an all-zones action on every core).
/// The budget is large enough that every read is served from memory.
fn random_workload(seed: u64) {
    let rt = Runtime::builder().cores(CORES).build().unwrap();
    rt.block_on(move || async move {
        let dev = MemDevice::new("mem:metrics", &Geometry::new(ZONES, 4 << 20)).unwrap();
        let z = Ziob::with_device(dev, config()).await.unwrap();
        let mut tasks = Vec::new();
        for t in 0..TASKS {
            let z = z.clone();
            tasks.push(ziob::runtime::spawn(async move {
                let mut rng = Rng::new(seed ^ u64::from(t) << 32);
                let mut exp = vec![Expected::default(); CORES];
                let mut wp = [0u64; 2];
                for step in 0..60u64 {
                    let which = rng.below(2) as usize;
                    let zone = t + which as u32 * TASKS;
                    let core = zone as usize % CORES;
                    let e = &mut exp[core];
                    match rng.below(10) {
                        0..=3 => {
                            let len = 1 + rng.below(20_000) as usize;
                            if wp[which] + len as u64 > 4 << 20 {
                                continue;
                            }
                            let data = record(zone, step, len);
                            let off = z.append(zone, DmaBuf::from_slice(&data)).await.unwrap();
                            // Another task's sync may have padded the zone meanwhile.
                            assert!(off >= wp[which], "seed {seed}");
                            wp[which] = off + len as u64;
                            e.ops[OpKind::Append as usize] += 1;
                            e.append_bytes += len as u64;
                            e.bytes_written += len as u64;
                        }
                        4 => {
                            let len = 1 + rng.below(9_000) as usize;
                            if wp[which] + len as u64 > 4 << 20 {
                                continue;
                            }
                            let data = record(zone, step, len);
                            // Another task's sync may pad the zone in between: then the
                            // write is refused (and still timed).
                            let at = z.zone(zone).report().await.unwrap().write_pointer_bytes;
                            if z.write_at(zone, at, DmaBuf::from_slice(&data))
                                .await
                                .is_ok()
                            {
                                wp[which] = at + len as u64;
                                e.bytes_written += len as u64;
                            }
                            e.ops[OpKind::WriteAt as usize] += 1;
                        }
                        5..=6 => {
                            if wp[which] == 0 {
                                continue;
                            }
                            let off = rng.below(wp[which]);
                            let len = 1 + rng.below(wp[which] - off) as usize;
                            z.read(zone, off, len).await.unwrap();
                            e.ops[OpKind::Read as usize] += 1;
                            e.read_bytes += len as u64;
                            e.reads += 1;
                        }
                        7 => {
                            z.flush(zone).await.unwrap();
                            // The partial block was padded.
                            wp[which] = wp[which].div_ceil(4096) * 4096;
                            e.ops[OpKind::Flush as usize] += 1;
                        }
                        8 => {
                            z.sync().await.unwrap();
                            for e in exp.iter_mut() {
                                e.ops[OpKind::Sync as usize] += 1;
                            }
                            for w in wp.iter_mut() {
                                *w = w.div_ceil(4096) * 4096;
                            }
                        }
                        _ => {
                            let action = [ZoneAction::Open, ZoneAction::Close, ZoneAction::Reset]
                                [rng.below(3) as usize];
                            // Open and close may be refused by the zone's state (e.g. a
                            // close of an empty zone); they are timed either way.
                            let res = z.zone_action(action, ZoneTarget::One(zone)).await;
                            if action == ZoneAction::Reset {
                                res.unwrap();
                                wp[which] = 0;
                            }
                            e.ops[OpKind::of_action(action) as usize] += 1;
                        }
                    }
                }
                exp
            }));
        }
        let mut expected = vec![Expected::default(); CORES];
        for t in tasks {
            for (core, e) in watchdog(30, format!("seed {seed}: workload"), t)
                .await
                .into_iter()
                .enumerate()
            {
                let x = &mut expected[core];
                for (i, n) in e.ops.iter().enumerate() {
                    x.ops[i] += n;
                }
                x.append_bytes += e.append_bytes;
                x.bytes_written += e.bytes_written;
                x.read_bytes += e.read_bytes;
                x.reads += e.reads;
            }
        }
        let m = z.metrics().await.unwrap();
        check(seed, &m, &expected);
        z.close().await.unwrap();
    })
    .unwrap();
}

fn check(seed: u64, m: &MetricsSnapshot, expected: &[Expected]) {
    assert_eq!(m.cores().len(), CORES);
    for (core, (c, e)) in m.cores().iter().zip(expected).enumerate() {
        let what = format!("seed {seed} core {core}");
        assert_eq!(c.stats.core, core, "{what}");
        for op in OpKind::ALL {
            let want = match op {
                OpKind::DeviceWrite => c.stats.writebacks,
                OpKind::DeviceFlush => c.stats.device_flushes,
                OpKind::DeviceRead => c.stats.read_misses,
                op => e.ops[op as usize],
            };
            assert_eq!(c.latency.count(op), want, "{what}: count of {op}");
        }
        assert_eq!(c.stats.append_bytes, e.append_bytes, "{what}");
        assert_eq!(c.stats.bytes_written, e.bytes_written, "{what}");
        assert_eq!(c.stats.read_bytes, e.read_bytes, "{what}");
        assert_eq!(c.stats.read_hits, e.reads, "{what}: every read from memory");
        assert_eq!(c.stats.read_misses, 0, "{what}");
        // The readers are cores and nothing was evicted: no range is the device's alone.
        assert_eq!(
            (c.stats.direct_reads, c.stats.direct_read_fallbacks),
            (0, 0),
            "{what}: no direct read"
        );
        // Every sync ends with a device flush (shared by those at the same time), and so does
        // a zone flush unless its write-back was a durable write (mem has them).
        let flushing = e.ops[OpKind::Flush as usize] + e.ops[OpKind::Sync as usize];
        assert!(c.stats.device_flushes <= flushing, "{what}");
        assert_eq!(c.stats.device_flushes > 0, flushing > 0, "{what}");
        assert_eq!(
            c.stats.calls_in_flight, 0,
            "{what}: only the metrics call itself"
        );
        assert!(c.stats.calls_in_flight_peak >= 1, "{what}");
        assert_eq!(
            c.stats.device_writes_in_flight, 0,
            "{what}: no write-back running"
        );
        assert!(c.stats.writeback_bytes >= c.stats.writebacks, "{what}");
    }
    // Merged: sums of the cores, histograms included.
    let t = m.total();
    assert_eq!(t.stats.core, CORES);
    for op in OpKind::ALL {
        let sum: u64 = m.cores().iter().map(|c| c.latency.count(op)).sum();
        assert_eq!(
            t.latency.count(op),
            sum,
            "seed {seed}: merged count of {op}"
        );
        let sum_ns: u64 = m.cores().iter().map(|c| c.latency.sum_ns(op)).sum();
        assert_eq!(
            t.latency.sum_ns(op),
            sum_ns,
            "seed {seed}: merged sum of {op}"
        );
        let max = m
            .cores()
            .iter()
            .map(|c| c.latency.histogram(op).max())
            .max();
        assert_eq!(
            Some(t.latency.histogram(op).max()),
            max,
            "seed {seed}: {op}"
        );
    }
    let bytes: u64 = m.cores().iter().map(|c| c.stats.bytes_written).sum();
    assert_eq!(t.stats.bytes_written, bytes);
}

#[test]
fn counts_match_a_seeded_workload_per_core_and_merged() {
    for seed in shard_support::seeds(0..6) {
        random_workload(seed);
    }
}

/// With the buffer off, appends and writes go straight to the device and still count as
/// bytes written (and appended) on the core owning the zone: a store's write amplification
/// (`kv-demo` with `--ziob=off`) is device bytes over user bytes.
#[test]
fn pass_through_writes_are_counted() {
    for seed in shard_support::seeds(0..4) {
        let rt = Runtime::builder().cores(CORES).build().unwrap();
        rt.block_on(move || async move {
            let dev = MemDevice::new("mem:pass", &Geometry::new(ZONES, 4 << 20)).unwrap();
            let z = Ziob::with_device(dev, ZiobConfig::pass_through())
                .await
                .unwrap();
            let mut rng = Rng::new(seed);
            let mut expected = vec![(0u64, 0u64); CORES];
            let mut wp = [0u64; ZONES as usize];
            for step in 0..40u64 {
                let zone = rng.below(u64::from(ZONES)) as u32;
                // Pass-through writes are whole blocks.
                let len = (1 + rng.below(16) as usize) * 4096;
                if wp[zone as usize] + len as u64 > 4 << 20 {
                    continue;
                }
                let data = DmaBuf::from_slice(&record(zone, step, len));
                let e = &mut expected[zone as usize % CORES];
                if rng.below(2) == 0 {
                    let off = z.append(zone, data).await.unwrap();
                    assert_eq!(off, wp[zone as usize], "seed {seed}");
                    e.1 += len as u64;
                } else {
                    z.write_at(zone, wp[zone as usize], data).await.unwrap();
                }
                wp[zone as usize] += len as u64;
                e.0 += len as u64;
                if rng.below(4) == 0 {
                    // A write away from the write pointer is refused and not counted.
                    let bad = DmaBuf::from_slice(&record(zone, step, 4096));
                    let past = wp[zone as usize] + 4096;
                    assert!(z.write_at(zone, past, bad).await.is_err(), "seed {seed}");
                }
            }
            let m = z.metrics().await.unwrap();
            for (core, (c, e)) in m.cores().iter().zip(&expected).enumerate() {
                let what = format!("seed {seed} core {core}");
                assert_eq!(c.stats.bytes_written, e.0, "{what}: bytes written");
                assert_eq!(c.stats.append_bytes, e.1, "{what}: bytes appended");
                assert_eq!(c.stats.writeback_bytes, 0, "{what}: nothing written back");
            }
            z.close().await.unwrap();
        })
        .unwrap();
    }
}

/// A read of data still in memory is a hit; once write-back and eviction dropped it from
/// memory (a small budget, another zone's writes), a read of it goes to the device: a miss,
/// timed as a device read.
#[test]
fn a_read_after_write_back_and_eviction_is_a_miss() {
    let rt = Runtime::builder().cores(1).build().unwrap();
    rt.block_on(|| async {
        let dev = MemDevice::new("mem:miss", &Geometry::new(4, 4 << 20)).unwrap();
        let cfg = ZiobConfig {
            shard_budget_bytes: 256 << 10,
            writeback_unit_bytes: Some(16 << 10),
            ..config()
        };
        let z = Ziob::with_device(dev, cfg).await.unwrap();
        let data = record(0, 1, 64 << 10);
        z.append(0, DmaBuf::from_slice(&data)).await.unwrap();
        z.flush(0).await.unwrap();
        assert_eq!(&z.read(0, 100, 4000).await.unwrap()[..], &data[100..4100]);
        let m = z.metrics().await.unwrap().total().clone();
        assert_eq!((m.stats.read_hits, m.stats.read_misses), (1, 0));
        assert_eq!(m.stats.zones_buffered, 1);
        // 1 MiB to zone 1 through a 256 KiB budget: zone 0's clean chunks are evicted.
        for i in 0..64 {
            z.append(1, DmaBuf::from_slice(&record(1, i, 16 << 10)))
                .await
                .unwrap();
        }
        assert_eq!(&z.read(0, 100, 4000).await.unwrap()[..], &data[100..4100]);
        let m = z.metrics().await.unwrap().total().clone();
        assert_eq!((m.stats.read_hits, m.stats.read_misses), (1, 1));
        assert_eq!(m.latency.count(OpKind::DeviceRead), 1);
        assert_eq!(m.latency.count(OpKind::Read), 2);
        assert_eq!(m.stats.read_bytes, 8000);
        assert!(
            m.stats.writeback_bytes >= (64 << 10) + (768 << 10),
            "{:?}",
            m.stats
        );
        assert!(m.stats.memory_peak_bytes <= 256 << 10);
        // An append larger than half the budget is streamed in pieces: counted once, whole.
        z.append(2, DmaBuf::from_slice(&record(2, 0, 300 << 10)))
            .await
            .unwrap();
        let m = z.metrics().await.unwrap().total().clone();
        let appended = (64 << 10) + (1 << 20) + (300 << 10);
        assert_eq!(m.stats.append_bytes, appended);
        assert_eq!(m.stats.bytes_written, appended);
        assert_eq!(m.latency.count(OpKind::Append), 1 + 64 + 1);
        z.close().await.unwrap();
    })
    .unwrap();
}

/// While a flush waits for a slow device write, the gauges show the call and the write in
/// flight; afterwards they are back to 0, and the latencies are at least the device's delays.
#[test]
fn in_flight_gauges_and_latencies_follow_a_slow_device() {
    let rt = Runtime::builder().cores(1).build().unwrap();
    rt.block_on(|| async {
        let dev = DelayMem::new("mem:slow", &Geometry::new(4, 4 << 20));
        dev.c.write_delay_ms.store(50, Ordering::SeqCst);
        dev.c.flush_delay_ms.store(20, Ordering::SeqCst);
        let z = Ziob::with_device(dev.clone(), config()).await.unwrap();
        z.append(2, DmaBuf::from_slice(&[7u8; 8192])).await.unwrap();
        let flusher = {
            let z = z.clone();
            ziob::runtime::spawn(async move { z.flush(2).await })
        };
        // Wait until the write-back is at the device.
        watchdog(30, "write-back issued", async {
            while dev.writes_in_flight() == 0 {
                ziob::runtime::sleep(std::time::Duration::from_millis(1))
                    .await
                    .unwrap();
            }
        })
        .await;
        let during = z.metrics().await.unwrap().total().stats.clone();
        assert_eq!(during.calls_in_flight, 1, "the flush: {during:?}");
        assert_eq!(during.device_writes_in_flight, 1, "{during:?}");
        assert_eq!(during.zones_buffered, 1);
        watchdog(30, "flush", flusher).await.unwrap();
        let m = z.metrics().await.unwrap();
        let t = m.total();
        assert_eq!(t.stats.calls_in_flight, 0);
        assert_eq!(t.stats.device_writes_in_flight, 0);
        assert_eq!(
            t.stats.calls_in_flight_peak, 2,
            "the flush and a metrics call"
        );
        let at_least = |op: OpKind, ms: u64| {
            let s = t.latency.summary(op);
            assert_eq!(s.count, 1, "{op}: {s:?}");
            assert!(
                s.p50_ns >= ms * 1_000_000,
                "{op} took {s:?}, less than {ms} ms"
            );
            assert!(s.sum_ns >= ms * 1_000_000, "{op}: {s:?}");
        };
        at_least(OpKind::DeviceWrite, 50);
        at_least(OpKind::DeviceFlush, 20);
        at_least(OpKind::Flush, 70);
        assert!(t.latency.summary(OpKind::Append).max_ns < 50_000_000);
        z.close().await.unwrap();
    })
    .unwrap();
}
