//! Memory budget under a fast writer, write-back errors, device resource limits and zone
//! operations racing with write-back.

use std::time::Duration;

use ziob::backends::{Fault, MemDevice};
use ziob::{
    AnyDevice, DmaBuf, ErrorKind, Geometry, Runtime, ShardStats, Ziob, ZiobConfig, ZiobError,
    ZoneAction, ZoneState, ZoneTarget, ZonedDevice,
};

fn rt(cores: usize) -> Runtime {
    Runtime::builder().cores(cores).build().unwrap()
}

/// A `mem` device of geometry `g` (kept for fault injection) with a buffer on top.
async fn on_mem(name: &str, g: &Geometry, cfg: ZiobConfig) -> (MemDevice, Ziob) {
    let mem = MemDevice::new(name, g).unwrap();
    let z = Ziob::with_device(AnyDevice::Mem(mem.clone()), cfg)
        .await
        .unwrap();
    (mem, z)
}

#[test]
fn a_writer_far_faster_than_the_device_never_exceeds_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slow.zns");
    let p = path.clone();
    rt(2)
        .block_on(move || async move {
            let g = Geometry::new(8, 4 << 20);
            ziob::backends::EmuDevice::create(&p, &g).await.unwrap();
            // 40 MB/s device; 1 MiB budget per core; 12 MiB written as fast as possible.
            let spec = format!("emu:{},bw_mbps=40", p.display());
            let cfg = ZiobConfig {
                shard_budget_bytes: 1 << 20,
                writeback_unit_bytes: Some(128 << 10),
                ..ZiobConfig::default()
            };
            let z = Ziob::open(&spec, cfg).await.unwrap();
            let mut tasks = Vec::new();
            for zone in 0..8u32 {
                let z = z.clone();
                tasks.push(ziob::runtime::spawn(async move {
                    for i in 0..(1536 / 4) {
                        let data = vec![(zone as u8) ^ (i as u8); 4096];
                        z.append(zone, DmaBuf::from_slice(&data)).await.unwrap();
                    }
                }));
            }
            for t in tasks {
                t.await;
            }
            let stats = z.stats().await.unwrap();
            for s in &stats {
                assert!(s.memory_peak_bytes <= s.memory_budget_bytes, "{s:?}");
                assert!(s.memory_used_bytes <= s.memory_budget_bytes, "{s:?}");
            }
            let total = ShardStats::total(&stats);
            assert!(
                total.backpressure_waits > 0,
                "the writer must have waited: {total:?}"
            );
            assert_eq!(total.bytes_written, 12 << 20);
            // Nothing was lost: every zone reads back.
            for zone in 0..8u32 {
                let got = z.read(zone, 0, 1536 * 1024).await.unwrap();
                for (i, block) in got.chunks(4096).enumerate() {
                    assert!(
                        block.iter().all(|&b| b == (zone as u8) ^ (i as u8)),
                        "zone {zone} block {i}"
                    );
                }
            }
            z.close().await.unwrap();
        })
        .unwrap();
}

#[test]
fn a_failed_write_back_is_reported_kept_and_cleared_by_reset() {
    rt(1)
        .block_on(|| async {
            let cfg = ZiobConfig {
                writeback_unit_bytes: Some(16 << 10),
                ..ZiobConfig::default()
            };
            let (mem, z) = on_mem("mem:faulty", &Geometry::new(4, 1 << 20), cfg).await;
            // The next device ops (the first write-back, its retries and their reports)
            // fail: a failure that stays.
            let first = mem.op_count();
            for i in 0..100 {
                mem.inject(Fault::FailOp { op_index: first + i });
            }
            z.append(2, DmaBuf::from_slice(&[7; 16 << 10]))
                .await
                .unwrap();
            z.append(2, DmaBuf::from_slice(&[8; 100])).await.ok();
            // The error reaches the next caller that touches the zone ...
            let err = loop {
                match z.append(2, DmaBuf::from_slice(&[9; 10])).await {
                    Err(e) => break e,
                    Ok(_) => ziob::runtime::yield_now().await,
                }
            };
            assert!(
                matches!(
                    err,
                    ZiobError::Writeback {
                        zone: 2,
                        offset_bytes: 0,
                        ..
                    }
                ),
                "{err}"
            );
            assert_eq!(err.kind(), Some(ErrorKind::Io));
            assert!(
                err.to_string()
                    .starts_with("write-back of zone 2 failed at byte 0"),
                "{err}"
            );
            mem.clear_faults();
            // ... and to flush, again and again (it is kept); sync names the zone.
            assert!(matches!(z.flush(2).await, Err(ZiobError::Writeback { .. })));
            assert!(matches!(z.sync().await, Err(ZiobError::ZonesFailed { zones, .. }) if zones == vec![2]));
            // The data stays readable from the buffer.
            let got = z.read(2, 0, 16 << 10).await.unwrap();
            assert!(got.iter().all(|&b| b == 7));
            let stats = ShardStats::total(&z.stats().await.unwrap());
            assert!(stats.writeback_errors >= 1, "{stats:?}");
            // Other zones are unaffected.
            z.append(1, DmaBuf::from_slice(&[1; 4096])).await.unwrap();
            z.flush(1).await.unwrap();
            // Reset discards the data and clears the error.
            z.zone_action(ZoneAction::Reset, ZoneTarget::One(2))
                .await
                .unwrap();
            z.append(2, DmaBuf::from_slice(&[3; 4096])).await.unwrap();
            z.flush(2).await.unwrap();
            z.sync().await.unwrap();
        })
        .unwrap();
}

#[test]
fn a_failed_device_reset_changes_nothing() {
    rt(1)
        .block_on(|| async {
            let cfg = ZiobConfig {
                writeback_unit_bytes: Some(16 << 10),
                idle_writeback: None,
                ..ZiobConfig::default()
            };
            let (mem, z) = on_mem("mem:reset-fails", &Geometry::new(4, 1 << 20), cfg).await;
            // 16 KiB on the device, 100 bytes only in the buffer.
            z.append(2, DmaBuf::from_slice(&[7; 16 << 10]))
                .await
                .unwrap();
            z.flush(2).await.unwrap();
            z.append(2, DmaBuf::from_slice(&[8; 100])).await.unwrap();
            // The next device op, the reset, fails.
            mem.inject(Fault::FailOp {
                op_index: mem.op_count(),
            });
            let err = z
                .zone_action(ZoneAction::Reset, ZoneTarget::One(2))
                .await
                .unwrap_err();
            assert_eq!(err.kind(), Some(ErrorKind::Io), "{err}");
            // The zone is as it was: same write pointer, buffered bytes still there.
            let info = z.report(2, 1).await.unwrap()[0];
            assert_eq!(info.write_pointer_bytes, (16 << 10) + 100);
            assert_eq!(info.state, ZoneState::ImplicitlyOpened);
            let got = z.read(2, 0, (16 << 10) + 100).await.unwrap();
            assert!(got[..16 << 10].iter().all(|&b| b == 7));
            assert!(got[16 << 10..].iter().all(|&b| b == 8));
            // Appends go on after it, and a flush still writes the buffered data back.
            let off = z.append(2, DmaBuf::from_slice(&[9; 4096])).await.unwrap();
            assert_eq!(off, (16 << 10) + 100);
            z.flush(2).await.unwrap();
            let dev = mem.report_zones(2, 1).await.unwrap()[0];
            assert!(dev.write_pointer_bytes >= off + 4096, "{dev:?}");
            // A reset that works empties it.
            z.zone_action(ZoneAction::Reset, ZoneTarget::One(2))
                .await
                .unwrap();
            let info = z.report(2, 1).await.unwrap()[0];
            assert_eq!(
                (info.state, info.write_pointer_bytes),
                (ZoneState::Empty, 0)
            );
        })
        .unwrap();
}

fn tight() -> Geometry {
    Geometry {
        max_open_zones: Some(1),
        max_active_zones: Some(2),
        zone_capacity_bytes: 128 << 10,
        ..Geometry::new(16, 256 << 10)
    }
}

#[test]
fn more_zones_than_the_device_allows_open_are_written_through_the_buffer() {
    rt(1)
        .block_on(|| async {
            let cfg = ZiobConfig {
                writeback_unit_bytes: Some(32 << 10),
                shard_budget_bytes: 4 << 20,
                ..ZiobConfig::default()
            };
            let (mem, z) = on_mem("mem:tight", &tight(), cfg).await;
            assert_eq!(
                z.view_geometry().max_open_zones,
                None,
                "the buffer lifts the limit"
            );
            // Interleaved appends to 16 zones: far more than 1 open / 2 active on the device.
            for round in 0..32u32 {
                for zone in 0..16u32 {
                    let data = vec![(zone * 7 + round) as u8; 4096];
                    z.append(zone, DmaBuf::from_slice(&data)).await.unwrap();
                }
            }
            // Every zone reached capacity: all written out, all Full, on the device too.
            z.sync().await.unwrap();
            for info in mem.report_all().await.unwrap() {
                assert_eq!(info.state, ZoneState::Full, "{info:?}");
            }
            for zone in 0..16u32 {
                let got = z.read(zone, 0, 128 << 10).await.unwrap();
                for (round, block) in got.chunks(4096).enumerate() {
                    assert!(block.iter().all(|&b| b == (zone * 7 + round as u32) as u8));
                }
            }
            let st = ShardStats::total(&z.stats().await.unwrap());
            assert!(st.device_zone_opens >= 16, "{st:?}");
        })
        .unwrap();
}

#[test]
fn the_buffers_own_limit_is_a_clear_error() {
    rt(1)
        .block_on(|| async {
            let cfg = ZiobConfig {
                writeback_unit_bytes: Some(32 << 10),
                shard_budget_bytes: 64 << 10,
                idle_writeback: None,
                ..ZiobConfig::default()
            };
            let (_, z) = on_mem("mem:tight", &tight(), cfg).await;
            // Two zones become active on the device (partly written, flushed).
            for zone in 0..2 {
                z.append(zone, DmaBuf::from_slice(&[1; 4096]))
                    .await
                    .unwrap();
                z.flush(zone).await.unwrap();
            }
            // A third zone cannot become active: flushing it is Too Many Active Zones ...
            z.append(2, DmaBuf::from_slice(&[2; 4096])).await.unwrap();
            let err = z.flush(2).await.unwrap_err();
            assert_eq!(err.kind(), Some(ErrorKind::TooManyActive), "{err}");
            // ... and filling memory with its data is the buffer's own limit.
            let mut last = Ok(0);
            for _ in 0..40 {
                last = z.append(2, DmaBuf::from_slice(&[2; 4096])).await;
                if last.is_err() {
                    break;
                }
            }
            let err = last.unwrap_err();
            assert!(
                matches!(err, ZiobError::BufferFull { zone: 2, .. }),
                "{err}"
            );
            assert!(
                err.to_string().starts_with("buffer full: zone 2 needs"),
                "{err}"
            );
            // The message names the real cause and its numbers (issue #12: it used to blame
            // an active-zone limit even where there was none).
            let text = err.to_string();
            assert!(
                text.contains("wait for a device resource")
                    && text.contains("of 2 active zones")
                    && text.contains("65536-byte budget"),
                "{text}"
            );
            // Finishing an active zone frees a resource: zone 2 can go now.
            z.zone_action(ZoneAction::Finish, ZoneTarget::One(0))
                .await
                .unwrap();
            z.flush(2).await.unwrap();
            z.append(2, DmaBuf::from_slice(&[2; 4096])).await.unwrap();
        })
        .unwrap();
}

#[test]
fn zone_operations_racing_with_write_back_have_defined_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("race.zns");
    let p = path.clone();
    rt(2)
        .block_on(move || async move {
            ziob::backends::EmuDevice::create(&p, &Geometry::new(4, 2 << 20))
                .await
                .unwrap();
            let spec = format!("emu:{},lat_us=300", p.display());
            let cfg = ZiobConfig {
                writeback_unit_bytes: Some(64 << 10),
                ..ZiobConfig::default()
            };
            let z = Ziob::open(&spec, cfg).await.unwrap();
            for round in 0..5u8 {
                // Fill a few units (write-back starts), then reset while it is in flight.
                for _ in 0..8 {
                    z.append(1, DmaBuf::from_slice(&[round; 32 << 10]))
                        .await
                        .unwrap();
                }
                z.zone_action(ZoneAction::Reset, ZoneTarget::One(1))
                    .await
                    .unwrap();
                let info = z.report(1, 1).await.unwrap()[0];
                assert_eq!(
                    (info.state, info.write_pointer_bytes),
                    (ZoneState::Empty, 0)
                );
                // Appends after the reset start at 0 and only they are visible.
                assert_eq!(
                    z.append(1, DmaBuf::from_slice(&[0xF0 | round; 4096]))
                        .await
                        .unwrap(),
                    0
                );
                let got = z.read(1, 0, 64 << 10).await.unwrap();
                assert!(got[..4096].iter().all(|&b| b == 0xF0 | round));
                assert!(
                    got[4096..].iter().all(|&b| b == 0),
                    "old data must not show through"
                );
                z.flush(1).await.unwrap();
                z.zone_action(ZoneAction::Reset, ZoneTarget::One(1))
                    .await
                    .unwrap();
            }
            // Finish racing with appends from another task: each append either lands before the
            // finish (and is on the device) or fails with Zone Is Full.
            let writer = {
                let z = z.clone();
                ziob::runtime::spawn(async move {
                    let mut landed = Vec::new();
                    for i in 0..64u32 {
                        match z.append(2, DmaBuf::from_slice(&[i as u8; 4096])).await {
                            Ok(off) => landed.push((off, i as u8)),
                            Err(e) => {
                                assert_eq!(e.kind(), Some(ErrorKind::ZoneFull), "{e}");
                                break;
                            }
                        }
                        ziob::runtime::yield_now().await;
                    }
                    landed
                })
            };
            ziob::runtime::sleep(Duration::from_millis(2))
                .await
                .unwrap();
            z.zone_action(ZoneAction::Finish, ZoneTarget::One(2))
                .await
                .unwrap();
            let landed = writer.await;
            let dev = z.device().clone();
            for (off, v) in landed {
                let (res, buf) = dev.read(2, off, 4096, DmaBuf::with_capacity(4096)).await;
                res.unwrap();
                assert!(
                    buf.iter().all(|&b| b == v),
                    "append at {off} not on the device"
                );
            }
            z.close().await.unwrap();
        })
        .unwrap();
}

#[test]
fn a_write_larger_than_the_budget_streams_through_it() {
    rt(1)
        .block_on(|| async {
            let g = Geometry::new(4, 8 << 20);
            let cfg = ZiobConfig {
                writeback_unit_bytes: Some(64 << 10),
                shard_budget_bytes: 256 << 10,
                ..ZiobConfig::default()
            };
            let (_, z) = on_mem("mem:big", &g, cfg).await;
            z.append(1, DmaBuf::from_slice(&[9; 100])).await.unwrap();
            // 3 MiB in one append, 12× the budget; a second task appends meanwhile.
            let big: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 253) as u8).collect();
            let other = {
                let z = z.clone();
                ziob::runtime::spawn(async move {
                    z.append(1, DmaBuf::from_slice(&[7; 10])).await.unwrap()
                })
            };
            let off = z.append(1, DmaBuf::from_slice(&big)).await.unwrap();
            let after = other.await;
            // The other append lands before or after the big one, never inside it.
            let big_len = big.len() as u64;
            assert!(
                (off == 100 && after == 100 + big_len) || (after == 100 && off == 110),
                "big at {off}, other at {after}"
            );
            let got = z.read(1, off, big.len()).await.unwrap();
            assert!(got[..] == big[..], "the streamed write reads back");
            let st = z.stats().await.unwrap();
            assert!(st[0].memory_peak_bytes <= 256 << 10, "{:?}", st[0]);
            // Still refused whole when it cannot fit.
            let err = z
                .append(1, DmaBuf::from_slice(&vec![1; 6 << 20]))
                .await
                .unwrap_err();
            assert_eq!(err.kind(), Some(ErrorKind::BoundaryError));
            z.sync().await.unwrap();
        })
        .unwrap();
}
