//! A `mem` device whose writes and cache flushes can be made slow on demand (a sleep before
//! the device does the work; a flush covers what was written when it was issued, then
//! takes its time), whose writes to one zone can be held and whose resets can be refused,
//! with counters of the writes and flushes in flight and done:
//! turns "this call waited for the device" into a timeout, and makes device flushes
//! countable while callers pile up behind a slow one.

#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ziob::backends::{MemDevice, ZoneInfo};
use ziob::{DmaBuf, Geometry, ZoneAction, ZoneTarget, ZonedDevice};

type DevResult<T> = std::result::Result<T, ziob::backends::DeviceError>;

pub struct Counters {
    /// Sleep before every write, in ms (0 = none).
    pub write_delay_ms: AtomicU64,
    /// Sleep before every cache flush, in ms (0 = none).
    pub flush_delay_ms: AtomicU64,
    pub writes_started: AtomicU64,
    pub writes_done: AtomicU64,
    pub flushes_started: AtomicU64,
    pub flushes_done: AtomicU64,
    /// Writes to this zone wait until it is set to another value (`u64::MAX` = none held).
    pub held_zone: AtomicU64,
    /// Every reset fails with EIO and changes nothing.
    pub refuse_resets: AtomicBool,
}

impl Default for Counters {
    fn default() -> Counters {
        Counters {
            write_delay_ms: AtomicU64::new(0),
            flush_delay_ms: AtomicU64::new(0),
            writes_started: AtomicU64::new(0),
            writes_done: AtomicU64::new(0),
            flushes_started: AtomicU64::new(0),
            flushes_done: AtomicU64::new(0),
            held_zone: AtomicU64::new(u64::MAX),
            refuse_resets: AtomicBool::new(false),
        }
    }
}

/// Clones share the device and the counters.
#[derive(Clone)]
pub struct DelayMem {
    pub mem: MemDevice,
    pub c: Arc<Counters>,
}

impl DelayMem {
    pub fn new(name: &str, g: &Geometry) -> DelayMem {
        DelayMem {
            mem: MemDevice::new(name, g).unwrap(),
            c: Arc::default(),
        }
    }
    pub fn writes_in_flight(&self) -> u64 {
        self.c.writes_started.load(Ordering::SeqCst) - self.c.writes_done.load(Ordering::SeqCst)
    }
}

async fn sleep_ms(ms: u64) {
    if ms > 0 {
        let _ = ziob::runtime::sleep(Duration::from_millis(ms)).await;
    }
}

impl ZonedDevice for DelayMem {
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
        self.c.writes_started.fetch_add(1, Ordering::SeqCst);
        while self.c.held_zone.load(Ordering::SeqCst) == u64::from(zone) {
            let _ = ziob::runtime::sleep(Duration::from_micros(100)).await;
        }
        sleep_ms(self.c.write_delay_ms.load(Ordering::SeqCst)).await;
        let out = self.mem.write(zone, offset_bytes, buf).await;
        self.c.writes_done.fetch_add(1, Ordering::SeqCst);
        out
    }
    async fn append(&self, zone: u32, buf: DmaBuf) -> (DevResult<u64>, DmaBuf) {
        self.mem.append(zone, buf).await
    }
    async fn zone_action(&self, action: ZoneAction, target: ZoneTarget) -> DevResult<()> {
        if action == ZoneAction::Reset && self.c.refuse_resets.load(Ordering::SeqCst) {
            return Err(ziob::backends::DeviceError::io(
                format!("{}: reset (refused)", self.mem.name()),
                std::io::Error::from_raw_os_error(libc::EIO),
            ));
        }
        self.mem.zone_action(action, target).await
    }
    async fn flush(&self) -> DevResult<()> {
        self.c.flushes_started.fetch_add(1, Ordering::SeqCst);
        // The flush covers what was written when it was issued; then it takes its time.
        let out = self.mem.flush().await;
        sleep_ms(self.c.flush_delay_ms.load(Ordering::SeqCst)).await;
        self.c.flushes_done.fetch_add(1, Ordering::SeqCst);
        out
    }
}

/// Awaits `fut`; panics with `what` if it takes longer than `ms` (a hang detector: the
/// limit is far below the device delay, far above what a memory operation takes).
pub async fn within_ms<T>(
    ms: u64,
    what: impl std::fmt::Display,
    fut: impl std::future::Future<Output = T>,
) -> T {
    use futures::future::{select, Either};
    let fut = std::pin::pin!(fut);
    let timer = std::pin::pin!(ziob::runtime::sleep(Duration::from_millis(ms)));
    match select(fut, timer).await {
        Either::Left((v, _)) => v,
        Either::Right(_) => {
            panic!("{what} did not complete within {ms} ms: it waited for the device")
        }
    }
}
