//! `--benchmark_write_rate_limit`: db_bench's cap on the bytes (keys + values) all threads of
//! a write benchmark write per second, shared by them (RocksDB's `GenericRateLimiter` in
//! db_bench's `DoWrite` and readwhilewriting's `BGWriter`). A writer asks before each put
//! and sleeps while the benchmark is ahead of the rate; deletes are not limited (nor in
//! db_bench).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Waits shorter than this are not slept (a timer costs more than it would hold back).
const SLEEP_MIN: Duration = Duration::from_millis(1);

/// How far behind the rate the budget's clock may fall: writers that fell behind (a write
/// stall) catch up by at most this much in a burst, as RocksDB's limiter, which refills per
/// 100 ms period, carries little over.
pub const CATCH_UP_MAX: Duration = Duration::from_millis(100);

/// One benchmark's shared write budget: `rate` bytes per second.
#[derive(Debug)]
pub struct WriteRate {
    start: Instant,
    rate: u64,
    /// Seconds after `start` at which the bytes asked for so far are due.
    due: Mutex<f64>,
}

impl WriteRate {
    /// A budget of `rate` bytes per second from now; `None` for 0 (no limit).
    pub fn starting_now(rate: u64) -> Option<WriteRate> {
        (rate > 0).then(|| WriteRate {
            start: Instant::now(),
            rate,
            due: Mutex::new(0.0),
        })
    }

    /// Counts `bytes` about to be written at `now` and returns how long the caller must
    /// wait first: until the bytes asked for before these are due at the rate (so the
    /// first request never waits), counting from at most [`CATCH_UP_MAX`] ago.
    pub fn wait_for(&self, bytes: u64, now: Instant) -> Duration {
        let t = now.saturating_duration_since(self.start).as_secs_f64();
        let mut due = self.due.lock().unwrap_or_else(|e| e.into_inner());
        let from = due.max(t - CATCH_UP_MAX.as_secs_f64());
        *due = from + bytes as f64 / self.rate as f64;
        Duration::try_from_secs_f64((from - t).max(0.0)).unwrap_or(Duration::MAX)
    }

    /// Waits until `bytes` may be written: on a ZIOB core with the runtime's timer (other
    /// tasks of the core run meanwhile), elsewhere by sleeping the thread. The bytes are
    /// counted when asked for: a request dropped while it waits (the benchmark ends with an
    /// error) still holds back later ones, by its own bytes at most.
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

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// `a` and `b` within a microsecond (the budget counts in floating-point seconds).
    fn close(a: Duration, b: Duration) -> bool {
        a.abs_diff(b) < Duration::from_micros(1)
    }

    #[test]
    fn no_rate_no_limiter() {
        assert!(WriteRate::starting_now(0).is_none());
    }

    #[test]
    fn requests_wait_until_the_bytes_before_them_are_due() {
        let r = WriteRate::starting_now(1000).unwrap();
        let t0 = r.start;
        // The first request goes at once; the second waits for the first's 500 bytes.
        assert_eq!(r.wait_for(500, t0), Duration::ZERO);
        assert!(close(r.wait_for(500, t0), ms(500)));
        // 300 ms later the third waits for 1000 bytes at 1000 B/s: 700 ms more.
        assert!(close(r.wait_for(100, t0 + ms(300)), ms(700)));
    }

    #[test]
    fn writers_behind_the_rate_catch_up_by_at_most_100_ms() {
        let r = WriteRate::starting_now(1000).unwrap();
        let t0 = r.start;
        assert_eq!(r.wait_for(100, t0), Duration::ZERO);
        // Idle until 5 s: not 4.9 s of credit, only CATCH_UP_MAX (100 bytes here).
        let t = t0 + Duration::from_secs(5);
        assert_eq!(r.wait_for(100, t), Duration::ZERO);
        assert!(close(r.wait_for(100, t), Duration::ZERO));
        assert!(close(r.wait_for(100, t), ms(100)));
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
        assert!(close(r.wait_for(1, t0), Duration::from_secs(1)));
    }

    #[test]
    fn huge_requests_saturate_instead_of_panicking() {
        let r = WriteRate::starting_now(1).unwrap();
        r.wait_for(u64::MAX, r.start);
        assert_eq!(r.wait_for(u64::MAX, r.start), Duration::MAX);
    }

    #[test]
    fn admit_off_a_core_sleeps_the_thread() {
        let r = WriteRate::starting_now(100_000).unwrap();
        futures::executor::block_on(r.admit(10_000, false));
        futures::executor::block_on(r.admit(1, false));
        // The 10,000 bytes before the second request are due 100 ms after the start.
        assert!(r.start.elapsed() >= ms(100));
    }
}
