//! Backpressure through the `Client`: tokio tasks writing far faster than a slow device (8 MB/s), into
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
        // 8 MB/s device; 1 MiB budget per core; 12 MiB written as fast as tokio can.
        let spec = format!("emu:{},bw_mbps=8", path.display());
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

/// A `mem` device whose zone resets take `RESET_MS` (the rest is immediate); counts the
/// resets in progress.
#[derive(Clone)]
struct SlowReset {
    mem: ziob::backends::MemDevice,
    resetting: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

const RESET_MS: u64 = 300;

type DevResult<T> = std::result::Result<T, ziob::DeviceError>;

impl ziob::ZonedDevice for SlowReset {
    fn geometry(&self) -> &Geometry {
        self.mem.geometry()
    }
    fn name(&self) -> &str {
        self.mem.name()
    }
    async fn report_zones(&self, first: u32, count: u32) -> DevResult<Vec<ziob::ZoneInfo>> {
        self.mem.report_zones(first, count).await
    }
    async fn read(
        &self,
        zone: u32,
        offset_bytes: u64,
        len: usize,
        buf: ziob::DmaBuf,
    ) -> (DevResult<()>, ziob::DmaBuf) {
        self.mem.read(zone, offset_bytes, len, buf).await
    }
    async fn write(
        &self,
        zone: u32,
        offset_bytes: u64,
        buf: ziob::DmaBuf,
    ) -> (DevResult<()>, ziob::DmaBuf) {
        self.mem.write(zone, offset_bytes, buf).await
    }
    async fn append(&self, zone: u32, buf: ziob::DmaBuf) -> (DevResult<u64>, ziob::DmaBuf) {
        self.mem.append(zone, buf).await
    }
    async fn zone_action(
        &self,
        action: ziob::ZoneAction,
        target: ziob::ZoneTarget,
    ) -> DevResult<()> {
        use std::sync::atomic::Ordering;
        if action == ziob::ZoneAction::Reset {
            self.resetting.fetch_add(1, Ordering::SeqCst);
            let _ = ziob::runtime::sleep(std::time::Duration::from_millis(RESET_MS)).await;
            self.resetting.fetch_sub(1, Ordering::SeqCst);
        }
        self.mem.zone_action(action, target).await
    }
    async fn flush(&self) -> DevResult<()> {
        self.mem.flush().await
    }
}

/// Found by `client-bench` (1024 tasks resetting full zones): a writer short of memory while
/// the memory was held by zones being reset (no write-back running) got `BufferFull`,
/// although the resets free that memory on their own. It must wait for them.
#[test]
fn a_writer_waits_for_resets_in_progress_to_free_memory() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    bounded(60, "writer behind resets", || {
        let rt = Runtime::builder().cores(1).build().unwrap();
        let resetting = std::sync::Arc::new(AtomicUsize::new(0));
        let dev = SlowReset {
            mem: ziob::backends::MemDevice::new("mem:slow-reset", &Geometry::new(4, 4 << 20))
                .unwrap(),
            resetting: resetting.clone(),
        };
        let client = rt
            .block_on(move || async move {
                let cfg = ZiobConfig {
                    shard_budget_bytes: 1 << 20,
                    writeback_unit_bytes: Some(512 << 10),
                    idle_writeback: None,
                    ..ZiobConfig::default()
                };
                ziob::Ziob::with_device(dev, cfg).await.unwrap().client()
            })
            .unwrap();
        let b = client.blocking();
        // Zones 0 and 2: a block on the device (so a reset goes to the device), then 470 KiB
        // buffered (less than a write-back unit, no idle write-back: it stays dirty).
        for zone in [0u32, 2] {
            b.append_slice(zone, &record(zone, 0, 4096)).unwrap();
            b.flush(zone).unwrap();
            b.append_slice(zone, &record(zone, 1, 470 << 10)).unwrap();
        }
        // Reset both; each device reset takes RESET_MS.
        let resets: Vec<_> = [0u32, 2]
            .into_iter()
            .map(|zone| {
                let b = client.blocking();
                std::thread::spawn(move || b.reset(zone))
            })
            .collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while resetting.load(Ordering::SeqCst) < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the resets never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // The budget is nearly all held by the zones being reset: this write must wait for
        // them, not fail.
        let off = b
            .append_slice(1, &record(1, 2, 200 << 10))
            .expect("a writer behind resets in progress waits for the memory they free");
        assert_eq!(off, 0);
        for r in resets {
            r.join().unwrap().unwrap();
        }
        let report = b.report(0, 4).unwrap();
        assert_eq!(report[0].write_pointer_bytes, 0);
        assert_eq!(report[2].write_pointer_bytes, 0);
        assert_eq!(
            &b.read(1, 0, 200 << 10).unwrap()[..],
            &record(1, 2, 200 << 10)[..]
        );
        b.close().unwrap();
    });
}
