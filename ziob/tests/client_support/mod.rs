//! Shared pieces of the `Client` tests: records that name themselves, a seeded generator and
//! a hang watchdog usable from any thread.

#![allow(dead_code)]

use std::sync::mpsc;
use std::time::Duration;

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

/// A record that names itself: `len` bytes derived from `(zone, id)`, never zero (padding
/// is distinguishable).
pub fn record(zone: u32, id: u64, len: usize) -> Vec<u8> {
    let mut x = mix(u64::from(zone) << 40 ^ id);
    (0..len)
        .map(|i| {
            if i % 8 == 0 {
                x = mix(x);
            }
            (x >> ((i % 8) * 8)) as u8 | 1
        })
        .collect()
}

/// Runs `f` on a thread of its own and panics with `what` if it does not finish within
/// `secs` (a hang watchdog, not a speed check).
pub fn bounded<T: Send + 'static>(
    secs: u64,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("hang: {what} did not finish within {secs} s")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
    }
}

/// A multi-thread tokio runtime with `workers` worker threads.
pub fn tokio_rt(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_time()
        .build()
        .unwrap()
}
