//! Backpressure through the `Client`: tokio tasks writing far faster than a slow device, into
//! a small buffer, wait for memory instead of failing; the budget is never exceeded and every
//! byte reads back.

mod client_support;

use client_support::{bounded, record, tokio_rt};
use ziob::backends::EmuDevice;
use ziob::{Client, Geometry, Runtime, ShardStats, ZiobConfig};

#[test]
fn tokio_writers_faster_than_the_device_wait_and_never_fail() {
    bounded(180, "client backpressure", || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("slow.zns");
        let rt = Runtime::builder().cores(2).build().unwrap();
        let p = path.clone();
        rt.block_on(move || async move {
            EmuDevice::create(&p, &Geometry::new(8, 4 << 20))
                .await
                .unwrap();
        })
        .unwrap();
        // 40 MB/s device; 1 MiB budget per core; 12 MiB written as fast as tokio can.
        let spec = format!("emu:{},bw_mbps=40", path.display());
        let cfg = ZiobConfig {
            shard_budget_bytes: 1 << 20,
            writeback_unit_bytes: Some(128 << 10),
            ..ZiobConfig::default()
        };
        let trt = tokio_rt(2);
        trt.block_on(async move {
            let client = Client::open(rt.handle(), &spec, cfg).await.unwrap();
            let tasks: Vec<_> = (0..32u64)
                .map(|t| {
                    let c = client.clone();
                    tokio::spawn(async move {
                        let zone = (t % 8) as u32;
                        let mut acked = Vec::new();
                        for n in 0..96u64 {
                            let id = t << 32 | n;
                            let off = c
                                .append_slice(zone, &record(zone, id, 4096))
                                .await
                                .expect("a full buffer makes writers wait, not fail");
                            acked.push((zone, off, id));
                        }
                        acked
                    })
                })
                .collect();
            let mut acked = Vec::new();
            for t in tasks {
                acked.extend(t.await.unwrap());
            }
            let stats = client.stats().await.unwrap();
            for s in &stats {
                assert!(s.memory_peak_bytes <= s.memory_budget_bytes, "{s:?}");
            }
            let total = ShardStats::total(&stats);
            assert!(
                total.backpressure_waits > 0,
                "writers never waited: {total:?}"
            );
            for (zone, off, id) in acked {
                let got = client.read(zone, off, 4096).await.unwrap();
                assert_eq!(
                    &got[..],
                    &record(zone, id, 4096)[..],
                    "zone {zone} off {off}"
                );
            }
            client.close().await.unwrap();
            drop(rt);
        });
    });
}
