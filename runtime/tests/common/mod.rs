//! Helpers shared by runtime tests that include them with `mod common;`.
#![allow(dead_code)]

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use proptest::test_runner::{RngAlgorithm, TestRng};

/// Runs `f` on a thread of its own and returns its result; fails (instead of hanging) after
/// `limit`, and passes a panic of `f` on as it is.
pub fn with_watchdog<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => {
            let _ = worker.join();
            v
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(worker.join().expect_err("the worker sent nothing"))
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("no progress within {limit:?}: a task was never run or a wake-up lost")
        }
    }
}

/// A deterministic generator for `seed` (proptest's xorshift), so a failure can be replayed.
pub fn seeded_rng(seed: u64) -> TestRng {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..].copy_from_slice(&(!seed).to_le_bytes());
    TestRng::from_seed(RngAlgorithm::XorShift, &bytes)
}
