//! The rules for write-back errors (crate docs, "Write-back errors"), on a `mem` device with
//! injected faults (`Fault::FailOp`: the op with that index fails with EIO):
//! - a transient failure (EIO) is retried from the device's write pointer: the flush
//!   succeeds, the data is durable and no error is kept;
//! - a failure that stays is kept by its zone only: `sync` and `close` name every such zone
//!   of every core in `ZiobError::ZonesFailed` (again each time while its data is not
//!   durable) and still sync every other zone; the failed zone reads back; finishing it
//!   keeps the durable part and ends the error; a reset ends it too.

use ziob::backends::{Fault, MemDevice};
use ziob::{
    AnyDevice, DmaBuf, Geometry, Runtime, ShardStats, Ziob, ZiobConfig, ZiobError, ZoneAction,
    ZoneState, ZoneTarget, ZonedDevice,
};

fn rt(cores: usize) -> Runtime {
    Runtime::builder().cores(cores).build().unwrap()
}

fn pattern(zone: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u32 * 31 + zone * 7) as u8).collect()
}

/// Fails the next `n` device ops (whatever they are: write-back, report, flush).
fn fail_next(mem: &MemDevice, n: u64) {
    let first = mem.op_count();
    for i in 0..n {
        mem.inject(Fault::FailOp {
            op_index: first + i,
        });
    }
}

async fn device_wp(mem: &MemDevice, zone: u32) -> (ZoneState, u64) {
    let info = mem.report_zones(zone, 1).await.unwrap()[0];
    (info.state, info.write_pointer_bytes)
}

#[test]
fn a_transient_writeback_failure_is_retried_and_the_data_is_durable() {
    // 1 to 3 failed ops in a row: the write-back and then the reports that resynchronise the
    // zone (up to 3 attempts) — every case must end in a retried, durable write-back.
    for n in 1..=3u64 {
        for len in [100usize, 4096, 20_000] {
            rt(1)
                .block_on(move || async move {
                    let what = format!("{n} failed op(s), {len} bytes");
                    let g = Geometry::new(4, 1 << 20);
                    let mem = MemDevice::new("mem:retry", &g).unwrap();
                    let z = Ziob::with_device(AnyDevice::Mem(mem.clone()), ZiobConfig::default())
                        .await
                        .unwrap();
                    z.append(1, DmaBuf::from_slice(&pattern(1, len)))
                        .await
                        .unwrap();
                    fail_next(&mem, n);
                    z.flush(1)
                        .await
                        .unwrap_or_else(|e| panic!("{what}: flush: {e}"));
                    let stats = ShardStats::total(&z.stats().await.unwrap());
                    assert!(stats.writeback_errors >= 1, "{what}: no failure happened");
                    assert!(stats.writeback_retries >= 1, "{what}: {stats:?}");
                    // No error kept: the zone takes more and syncs.
                    z.append(1, DmaBuf::from_slice(&[5; 10])).await.unwrap();
                    z.sync()
                        .await
                        .unwrap_or_else(|e| panic!("{what}: sync: {e}"));
                    // Durable: a power cut keeps it.
                    z.abandon().await.unwrap();
                    mem.crash();
                    let (_, wp) = device_wp(&mem, 1).await;
                    assert!(wp >= len as u64, "{what}: device has {wp} bytes");
                    let z = Ziob::with_device(AnyDevice::Mem(mem.clone()), ZiobConfig::default())
                        .await
                        .unwrap();
                    let got = z.read(1, 0, len).await.unwrap();
                    assert!(got[..] == pattern(1, len)[..], "{what}: data differs");
                    z.close().await.unwrap();
                })
                .unwrap();
        }
    }
}

#[test]
fn a_failed_zone_is_named_by_sync_and_close_and_the_others_are_synced() {
    rt(2)
        .block_on(|| async {
            let g = Geometry::new(6, 1 << 20);
            let mem = MemDevice::new("mem:persistent", &g).unwrap();
            let z = Ziob::with_device(AnyDevice::Mem(mem.clone()), ZiobConfig::default())
                .await
                .unwrap();
            // Zones 0 (core 0) and 3 (core 1) fail for good: every op fails while they
            // write back, retries included.
            for zone in [0, 3] {
                z.append(zone, DmaBuf::from_slice(&pattern(zone, 6000)))
                    .await
                    .unwrap();
            }
            fail_next(&mem, 200);
            for zone in [0, 3] {
                let e = z.flush(zone).await.unwrap_err();
                assert!(
                    matches!(e, ZiobError::Writeback { zone: f, .. } if f == zone),
                    "flush of zone {zone}: {e}"
                );
            }
            mem.clear_faults();
            // The others take data and are synced although zones 0 and 3 fail.
            for zone in [1, 2, 4] {
                z.append(zone, DmaBuf::from_slice(&pattern(zone, 5000)))
                    .await
                    .unwrap();
            }
            for round in 0..2 {
                match z.sync().await {
                    Err(ZiobError::ZonesFailed { zones, .. }) => {
                        assert_eq!(zones, vec![0, 3], "sync {round}")
                    }
                    other => panic!("sync {round}: {other:?}"),
                }
                for zone in [1, 2, 4] {
                    let (_, wp) = device_wp(&mem, zone).await;
                    assert!(wp >= 5000, "sync {round}: zone {zone} has {wp} bytes");
                }
            }
            // The failed zones still read back from the buffer; other calls are fine.
            for zone in [0, 3] {
                let got = z.read(zone, 0, 6000).await.unwrap();
                assert!(got[..] == pattern(zone, 6000)[..], "zone {zone}");
            }
            z.append(2, DmaBuf::from_slice(&[1; 100])).await.unwrap();
            z.flush(2).await.unwrap();
            // Finishing a failed zone works: it becomes Full with what the device has, and
            // its error is gone.
            z.zone_action(ZoneAction::Finish, ZoneTarget::One(3))
                .await
                .unwrap();
            let info = z.zone(3).report().await.unwrap();
            assert_eq!(info.state, ZoneState::Full);
            assert_eq!(device_wp(&mem, 3).await.0, ZoneState::Full);
            z.flush(3).await.unwrap();
            match z.sync().await {
                Err(ZiobError::ZonesFailed { zones, .. }) => assert_eq!(zones, vec![0]),
                other => panic!("sync after the finish: {other:?}"),
            }
            // A reset ends the other one.
            z.zone_action(ZoneAction::Reset, ZoneTarget::One(0))
                .await
                .unwrap();
            z.append(0, DmaBuf::from_slice(&[2; 4096])).await.unwrap();
            z.sync().await.unwrap();
            z.close().await.unwrap();
        })
        .unwrap();
}

#[test]
fn close_names_the_failed_zones_of_every_core() {
    rt(2)
        .block_on(|| async {
            let g = Geometry::new(4, 1 << 20);
            let mem = MemDevice::new("mem:closefail", &g).unwrap();
            let z = Ziob::with_device(AnyDevice::Mem(mem.clone()), ZiobConfig::default())
                .await
                .unwrap();
            for zone in [0, 1] {
                z.append(zone, DmaBuf::from_slice(&pattern(zone, 3000)))
                    .await
                    .unwrap();
            }
            fail_next(&mem, 200);
            for zone in [0, 1] {
                assert!(z.flush(zone).await.is_err());
            }
            mem.clear_faults();
            z.append(2, DmaBuf::from_slice(&pattern(2, 3000)))
                .await
                .unwrap();
            match z.close().await {
                Err(ZiobError::ZonesFailed { zones, .. }) => assert_eq!(zones, vec![0, 1]),
                other => panic!("close: {other:?}"),
            }
            // Zone 2 was synced by the close.
            mem.crash();
            let (_, wp) = device_wp(&mem, 2).await;
            assert!(wp >= 3000, "zone 2 has {wp} bytes");
        })
        .unwrap();
}
