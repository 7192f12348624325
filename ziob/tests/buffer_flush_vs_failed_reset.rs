//! A zone flush racing a reset of the same zone that the device refuses: the zone keeps its
//! data, so the flush may return only once that data is durable. (The flush used to stop
//! waiting for its write-back as soon as the reset began, and then flushed the device cache
//! before the write-back had landed: after a power cut the "flushed" data was gone.)
//! The zone's write-back is held at the device until the reset has begun; seeded: the
//! record's size and how long the write-back is held after that.

mod shard_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shard_support::{mix, record, seeds};
use ziob::backends::MemDevice;
use ziob::{
    DmaBuf, Geometry, Runtime, Ziob, ZiobConfig, ZoneAction, ZoneInfo, ZoneTarget, ZonedDevice,
};

type DevResult<T> = std::result::Result<T, ziob::DeviceError>;

/// `mem` whose writes to zone 0 wait until `gate` opens and whose device refuses every
/// reset.
#[derive(Clone)]
struct RefusesResets {
    mem: MemDevice,
    gate: Arc<AtomicBool>,
}

impl ZonedDevice for RefusesResets {
    fn geometry(&self) -> &Geometry {
        self.mem.geometry()
    }
    fn name(&self) -> &str {
        self.mem.name()
    }
    async fn report_zones(&self, first: u32, count: u32) -> DevResult<Vec<ZoneInfo>> {
        self.mem.report_zones(first, count).await
    }
    async fn read(
        &self,
        zone: u32,
        offset_bytes: u64,
        len: usize,
        buf: DmaBuf,
    ) -> (DevResult<()>, DmaBuf) {
        self.mem.read(zone, offset_bytes, len, buf).await
    }
    async fn write(&self, zone: u32, offset_bytes: u64, buf: DmaBuf) -> (DevResult<()>, DmaBuf) {
        while zone == 0 && !self.gate.load(Ordering::SeqCst) {
            let _ = ziob::runtime::sleep(Duration::from_micros(100)).await;
        }
        self.mem.write(zone, offset_bytes, buf).await
    }
    async fn append(&self, zone: u32, buf: DmaBuf) -> (DevResult<u64>, DmaBuf) {
        self.mem.append(zone, buf).await
    }
    async fn zone_action(&self, action: ZoneAction, target: ZoneTarget) -> DevResult<()> {
        if action == ZoneAction::Reset {
            return Err(ziob::DeviceError::io(
                "refuses-resets: reset".to_string(),
                std::io::Error::from_raw_os_error(libc::EIO),
            ));
        }
        self.mem.zone_action(action, target).await
    }
    async fn flush(&self) -> DevResult<()> {
        self.mem.flush().await
    }
}

#[test]
fn a_flush_racing_a_failed_reset_keeps_its_promise() {
    for seed in seeds(0..12) {
        Runtime::builder()
            .cores(1)
            .build()
            .unwrap()
            .block_on(move || async move {
                let g = Geometry::new(4, 64 << 20);
                let mem = MemDevice::new(format!("mem:failed-reset-{seed}"), &g).unwrap();
                let gate = Arc::new(AtomicBool::new(false));
                let dev = RefusesResets {
                    mem: mem.clone(),
                    gate: gate.clone(),
                };
                let cfg = ZiobConfig {
                    writeback_unit_bytes: Some(64 << 10),
                    ..ZiobConfig::default()
                };
                let z = Ziob::with_device(dev, cfg).await.unwrap();
                let data = record(0, seed, 1000 + (mix(seed ^ 1) % 20_000) as usize);
                let off = z.append(0, DmaBuf::from_slice(&data)).await.unwrap();
                // Another zone's write-backs complete meanwhile and wake every waiter of the
                // core (as on a busy core): a waiter must re-check, not trust being woken.
                let stop = std::rc::Rc::new(std::cell::Cell::new(false));
                let noise = {
                    let z = z.clone();
                    let stop = stop.clone();
                    ziob::runtime::spawn(async move {
                        // Whole write-back units, no flushes (a flush would flush the
                        // device cache and hide what this test looks for).
                        let mut n = 0;
                        while !stop.get() && n < 500 {
                            let r = record(1, n, 64 << 10);
                            if z.append(1, DmaBuf::from_slice(&r)).await.is_err() {
                                return;
                            }
                            let _ = ziob::runtime::sleep(Duration::from_micros(100)).await;
                            n += 1;
                        }
                    })
                };
                let flusher = {
                    let z = z.clone();
                    ziob::runtime::spawn(async move { z.flush(0).await })
                };
                // The reset starts while the flush's write-back is held at the device.
                let _ = ziob::runtime::sleep(Duration::from_micros(500)).await;
                let reset = {
                    let z = z.clone();
                    ziob::runtime::spawn(async move {
                        z.zone_action(ZoneAction::Reset, ZoneTarget::One(0)).await
                    })
                };
                let held = Duration::from_micros(500 + mix(seed ^ 2) % 3000);
                let _ = ziob::runtime::sleep(held).await;
                gate.store(true, Ordering::SeqCst);
                let reset = reset.await;
                assert!(reset.is_err(), "seed {seed}: the device refuses resets");
                stop.set(true);
                flusher.await.unwrap();
                noise.await;
                // The power cut.
                z.abandon().await.unwrap();
                mem.crash();
                let z = Ziob::with_device(mem.clone(), ZiobConfig::default())
                    .await
                    .unwrap();
                let got = z.read(0, off, data.len()).await.unwrap();
                assert!(
                    got[..] == data[..],
                    "seed {seed}: the flushed record did not survive the power cut"
                );
                z.close().await.unwrap();
            })
            .unwrap();
    }
}
