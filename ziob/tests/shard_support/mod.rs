//! Shared pieces of the shard concurrency tests: a device wrapper whose calls take time
//! (so buffer state is observable mid-call), a hang watchdog, a poll-budget canceller and a
//! small seeded generator.

#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use ziob::backends::{MemDevice, ZoneInfo};
use ziob::{DmaBuf, Geometry, ZoneAction, ZoneTarget, ZonedDevice};

type DevResult<T> = std::result::Result<T, ziob::backends::DeviceError>;

/// A `mem` device whose every call yields a seeded number of times to the core's other tasks
/// and sometimes sleeps, both before the device does the work (at once: mem is synchronous)
/// and after (its completion is on its way): callers see it take a while, as with a real
/// device, and a caller dropped mid-call may have had its work done or not. Clones share the
/// device.
#[derive(Clone)]
pub struct SlowMem {
    pub mem: MemDevice,
    counter: Arc<AtomicU64>,
    seed: u64,
}

impl SlowMem {
    pub fn new(name: &str, g: &Geometry, seed: u64) -> SlowMem {
        SlowMem {
            mem: MemDevice::new(name, g).unwrap(),
            counter: Arc::new(AtomicU64::new(0)),
            seed,
        }
    }

    /// A second handle on the same `mem` device.
    pub fn share(&self) -> SlowMem {
        self.clone()
    }

    async fn delay(&self) {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let r = mix(self.seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        for _ in 0..(r % 5) {
            ziob::runtime::yield_now().await;
        }
        if r.is_multiple_of(8) {
            let _ = ziob::runtime::sleep(Duration::from_micros(30 + (r >> 8) % 200)).await;
        }
    }
}

impl ZonedDevice for SlowMem {
    fn geometry(&self) -> &Geometry {
        self.mem.geometry()
    }
    fn name(&self) -> &str {
        self.mem.name()
    }
    async fn report_zones(&self, first: u32, count: u32) -> DevResult<Vec<ZoneInfo>> {
        self.delay().await;
        let out = self.mem.report_zones(first, count).await;
        self.delay().await;
        out
    }
    async fn read(
        &self,
        zone: u32,
        offset_bytes: u64,
        len: usize,
        buf: DmaBuf,
    ) -> (DevResult<()>, DmaBuf) {
        self.delay().await;
        let out = self.mem.read(zone, offset_bytes, len, buf).await;
        self.delay().await;
        out
    }
    async fn write(&self, zone: u32, offset_bytes: u64, buf: DmaBuf) -> (DevResult<()>, DmaBuf) {
        self.delay().await;
        let out = self.mem.write(zone, offset_bytes, buf).await;
        self.delay().await;
        out
    }
    async fn append(&self, zone: u32, buf: DmaBuf) -> (DevResult<u64>, DmaBuf) {
        self.delay().await;
        let out = self.mem.append(zone, buf).await;
        self.delay().await;
        out
    }
    async fn zone_action(&self, action: ZoneAction, target: ZoneTarget) -> DevResult<()> {
        self.delay().await;
        let out = self.mem.zone_action(action, target).await;
        self.delay().await;
        out
    }
    async fn flush(&self) -> DevResult<()> {
        self.delay().await;
        let out = self.mem.flush().await;
        self.delay().await;
        out
    }
    async fn write_durable(
        &self,
        zone: u32,
        offset_bytes: u64,
        buf: DmaBuf,
    ) -> (DevResult<()>, DmaBuf) {
        self.delay().await;
        let out = self.mem.write_durable(zone, offset_bytes, buf).await;
        self.delay().await;
        out
    }
    fn has_durable_writes(&self) -> bool {
        self.mem.has_durable_writes()
    }
}

/// splitmix64 finaliser.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A small seeded generator (splitmix64).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(1);
        mix(self.0)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Awaits `fut`, panicking with `what` if it takes longer than `secs` (a hang watchdog, not
/// a speed check).
pub async fn watchdog<T>(
    secs: u64,
    what: impl std::fmt::Display,
    fut: impl Future<Output = T>,
) -> T {
    use futures::future::{select, Either};
    let fut = std::pin::pin!(fut);
    let timer = std::pin::pin!(ziob::runtime::sleep(Duration::from_secs(secs)));
    match select(fut, timer).await {
        Either::Left((v, _)) => v,
        Either::Right(_) => panic!("hang: {what} did not complete within {secs} s"),
    }
}

/// Polls `fut` until it completes or has returned `Pending` `budget` times; then drops it
/// (at that await point) and returns `None`.
pub struct PollBudget<F> {
    fut: Option<Pin<Box<F>>>,
    left: u32,
}

impl<F: Future> PollBudget<F> {
    pub fn new(fut: F, budget: u32) -> Self {
        PollBudget {
            fut: Some(Box::pin(fut)),
            left: budget,
        }
    }
}

impl<F: Future> Future for PollBudget<F> {
    type Output = Option<F::Output>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(fut) = self.fut.as_mut() else {
            return Poll::Ready(None);
        };
        match fut.as_mut().poll(cx) {
            Poll::Ready(v) => {
                self.fut = None;
                Poll::Ready(Some(v))
            }
            Poll::Pending if self.left == 0 => {
                self.fut = None; // dropped here, mid-operation
                Poll::Ready(None)
            }
            Poll::Pending => {
                self.left -= 1;
                Poll::Pending
            }
        }
    }
}

/// A record that names itself: `len` bytes derived from `(zone, id)`.
pub fn record(zone: u32, id: u64, len: usize) -> Vec<u8> {
    let mut x = mix(u64::from(zone) << 40 ^ id);
    (0..len)
        .map(|i| {
            if i % 8 == 0 {
                x = mix(x);
            }
            (x >> ((i % 8) * 8)) as u8 | 1 // never zero: padding is distinguishable
        })
        .collect()
}

/// The seeds a test runs: `default`, or `ZIOB_SHARD_SEEDS` (`N` = `0..N`, or `A..B`) to run
/// any number on demand or replay one (`A..A+1`). Each failure message names its seed.
pub fn seeds(default: std::ops::Range<u64>) -> std::ops::Range<u64> {
    let Ok(v) = std::env::var("ZIOB_SHARD_SEEDS") else {
        return default;
    };
    let parse = |s: &str| {
        s.trim()
            .parse::<u64>()
            .expect("ZIOB_SHARD_SEEDS: N or A..B")
    };
    match v.split_once("..") {
        Some((a, b)) => parse(a)..parse(b),
        None => 0..parse(&v),
    }
}
