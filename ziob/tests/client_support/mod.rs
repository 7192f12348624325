//! Shared pieces of the `Client` tests: records that name themselves, a seeded generator (both
//! from `shard_support`) and a hang watchdog usable from any thread.

#![allow(dead_code)]

use std::sync::mpsc;
use std::time::Duration;

// The seeded generator and the self-naming records are the shard tests' own (one copy, so the
// two suites cannot drift apart).
#[path = "../shard_support/mod.rs"]
pub mod shard_support;
#[allow(unused_imports)] // each test uses some of them
pub use shard_support::{mix, record, Rng};

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
