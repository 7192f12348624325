//! `--benchmark_write_rate_limit`: db_bench's cap on the bytes (keys + values) all threads of
//! a write benchmark write per second, shared by them (RocksDB's `GenericRateLimiter` in
//! db_bench's `DoWrite` and readwhilewriting's `BGWriter`). A writer asks before each put
//! and sleeps while the benchmark is ahead of the rate; deletes are not limited (nor in
//! db_bench).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Waits shorter than this are not slept (a timer costs more than it would hold back).
const SLEEP_MIN: Duration = Duration::from_millis(1);

/// One benchmark's shared write budget: `rate` bytes per second from its start.
#[derive(Debug)]
pub struct WriteRate {
    start: Instant,
    rate: u64,
    asked: AtomicU64,
}

impl WriteRate {
    /// A budget of `rate` bytes per second from now; `None` for 0 (no limit).
    pub fn starting_now(rate: u64) -> Option<WriteRate> {
        (rate > 0).then(|| WriteRate {
            start: Instant::now(),
            rate,
            asked: AtomicU64::new(0),
        })
    }

    /// Counts `bytes` about to be written and returns how long the caller must wait first:
    /// until the bytes asked for before these fit the rate (so the first request never
    /// waits). Writers that fall behind the rate may catch up in a burst (db_bench's
    /// limiter refills per period instead; its writers do not fall behind it either).
    pub fn wait_for(&self, bytes: u64, now: Instant) -> Duration {
        let before = self.asked.fetch_add(bytes, Ordering::Relaxed);
        let due = Duration::from_secs_f64(before as f64 / self.rate as f64);
        let elapsed = now.saturating_duration_since(self.start);
        due.saturating_sub(elapsed)
    }

    /// Waits until `bytes` may be written: on a ZIOB core with the runtime's timer (other
    /// tasks of the core run meanwhile), elsewhere by sleeping the thread.
    pub async fn admit(&self, bytes: u64, on_core: bool) {
        let wait = self.wait_for(bytes, Instant::now());
        if wait < SLEEP_MIN {
            return;
        }
        if on_core {
            // A timer that could not be set (not on a core) only makes this request early.
            let _ = ziob::runtime::sleep(wait).await;
        } else {
            std::thread::sleep(wait);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_rate_no_limiter() {
        assert!(WriteRate::starting_now(0).is_none());
    }

    #[test]
    fn requests_wait_until_the_bytes_before_them_fit_the_rate() {
        let r = WriteRate::starting_now(1000).unwrap();
        let t0 = r.start;
        // The first request goes at once; the second waits for the first's 500 bytes.
        assert_eq!(r.wait_for(500, t0), Duration::ZERO);
        assert_eq!(r.wait_for(500, t0), Duration::from_millis(500));
        // 300 ms later the third waits for 1000 bytes at 1000 B/s: 700 ms more.
        assert_eq!(
            r.wait_for(100, t0 + Duration::from_millis(300)),
            Duration::from_millis(700)
        );
        // A caller behind the rate does not wait.
        assert_eq!(r.wait_for(100, t0 + Duration::from_secs(5)), Duration::ZERO);
    }

    #[test]
    fn threads_share_one_budget() {
        let r = std::sync::Arc::new(WriteRate::starting_now(1_000_000).unwrap());
        let t0 = r.start;
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let r = r.clone();
                std::thread::spawn(move || {
                    for _ in 0..250 {
                        r.wait_for(1000, t0);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        // 1,000,000 bytes asked by four threads: the next byte is due at 1 s.
        assert_eq!(r.wait_for(1, t0), Duration::from_secs(1));
    }

    #[test]
    fn admit_off_a_core_sleeps_the_thread() {
        let r = WriteRate::starting_now(100_000).unwrap();
        futures::executor::block_on(r.admit(10_000, false));
        let t = Instant::now();
        futures::executor::block_on(r.admit(1, false));
        // The 10,000 bytes before it are due 100 ms after the start.
        assert!(r.start.elapsed() >= Duration::from_millis(100));
        assert!(
            t.elapsed() >= Duration::from_millis(50),
            "{:?}",
            t.elapsed()
        );
    }
}
