//! Flushes before compactions on the core they share.
//!
//! A shard's flush and compaction run on one core, and cooperatively they would take turns:
//! a flush beside a compaction took about twice as long, and writers waited for it (they
//! wait once 2 memtables wait for their flush, but for compactions only at
//! [`L0_STOP_WRITES`](crate::options::L0_STOP_WRITES) L0 tables). So a compaction pauses at
//! its yield points while a memtable waits for its flush ([`FlushFirst::pause`]) — as long
//! as its shard's L0 holds fewer than [`L0_FLUSH_FIRST_MAX`](crate::options::L0_FLUSH_FIRST_MAX)
//! tables. Beyond that the compaction shares the core as before, so the tables a point
//! lookup may check, and the space dead versions take, stay bounded under sustained writes.
//!
//! The pause is bounded in time too: for each flush, compactions wait at most [`PAUSE_MAX`]
//! in all, then go on beside it until that flush ends. No flush waits for a compaction in
//! kv-demo, but both hold the device's zone resources (a zone the paused compaction keeps
//! active may be one the flush's zone waits for), so no pause may depend on it. The pause
//! also ends when the shard stops or fails ([`FlushFirst::release`]). A paused compaction
//! also frees its input tables later: on a nearly full device a flush may meet zonefs's
//! `NoSpace` sooner (the L0 bound limits how much later).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// The longest compactions wait for one flush before they go on beside it.
pub const PAUSE_MAX: Duration = Duration::from_millis(200);

/// `gave_up_at` when no flush was given up on.
const NONE: u64 = u64::MAX;

/// Knows how many memtables wait for their flush (the shard tells it its queue's length at
/// each change) and lets compactions wait for them.
#[derive(Debug)]
pub struct FlushFirst {
    /// L0 tables at which compactions stop pausing.
    l0_max: usize,
    /// The shard's L0 tables now.
    l0: AtomicUsize,
    /// Memtables switched out and not flushed yet (the shard's queue length, mirrored so
    /// that a compaction reads it without the shard's lock).
    waiting: AtomicUsize,
    /// Flushes finished so far: the flush waited for is known by this count.
    flushed: AtomicU64,
    /// The `flushed` count at which a pause waited [`PAUSE_MAX`] in vain ([`NONE`]): no
    /// compaction pauses again until a flush finishes.
    gave_up_at: AtomicU64,
    /// Set when the shard stops or fails: nobody pauses any more.
    released: AtomicBool,
    /// Notified at each finished flush, a full L0 and the release.
    changed: Notify,
}

impl FlushFirst {
    /// Nothing waiting yet, `l0` tables in L0; compactions pause only while L0 holds fewer
    /// than `l0_max`.
    pub fn new(l0: usize, l0_max: usize) -> FlushFirst {
        FlushFirst {
            l0_max,
            l0: AtomicUsize::new(l0),
            waiting: AtomicUsize::new(0),
            flushed: AtomicU64::new(0),
            gave_up_at: AtomicU64::new(NONE),
            released: AtomicBool::new(false),
            changed: Notify::new(),
        }
    }

    /// A memtable was switched out: `waiting` memtables now wait for their flush.
    pub fn switched(&self, waiting: usize) {
        self.waiting.store(waiting, Ordering::Release);
    }

    /// A memtable's flush finished (it left the queue): `waiting` still wait.
    pub fn flushed(&self, waiting: usize) {
        self.waiting.store(waiting, Ordering::Release);
        self.flushed.fetch_add(1, Ordering::AcqRel);
        self.changed.notify_waiters();
    }

    /// The shard's L0 holds `n` tables now.
    pub fn set_l0_tables(&self, n: usize) {
        self.l0.store(n, Ordering::Release);
        if n >= self.l0_max {
            self.changed.notify_waiters();
        }
    }

    /// The shard stops or failed: pauses end now and no more begin.
    pub fn release(&self) {
        self.released.store(true, Ordering::Release);
        self.changed.notify_waiters();
    }

    /// Memtables waiting for their flush.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// Whether a compaction should wait now (see [`pause`](Self::pause)); with the
    /// `flushed` count it read.
    fn due(&self) -> Option<u64> {
        let flushed = self.flushed.load(Ordering::Acquire);
        let due = !self.released.load(Ordering::Acquire)
            && self.l0.load(Ordering::Acquire) < self.l0_max
            && self.waiting() > 0
            && self.gave_up_at.load(Ordering::Acquire) != flushed;
        due.then_some(flushed)
    }

    /// Waits while a memtable waits for its flush: until no memtable waits, L0 holds
    /// `l0_max` tables, the shard is released, or compactions waited [`PAUSE_MAX`] for this
    /// flush (then none waits again until a flush finishes). Returns at once when no flush
    /// is due; `true` if it waited. The bound is a runtime timer: off a runtime core it
    /// does not wait.
    pub async fn pause(&self) -> bool {
        self.pause_at_most(PAUSE_MAX).await
    }

    async fn pause_at_most(&self, max: Duration) -> bool {
        // The common case, checked without registering for a notification.
        if self.due().is_none() {
            return false;
        }
        let mut timer: Option<std::pin::Pin<Box<ziob::runtime::Sleep>>> = None;
        let mut waited = false;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let Some(flushed) = self.due() else {
                return waited;
            };
            let sleep = timer.get_or_insert_with(|| Box::pin(ziob::runtime::sleep(max)));
            match futures::future::select(changed, sleep.as_mut()).await {
                futures::future::Either::Left(_) => {
                    waited = true;
                    // A flush finished: the next one (if any) gets its own bound.
                    if self.flushed.load(Ordering::Acquire) != flushed {
                        timer = None;
                    }
                }
                futures::future::Either::Right((slept, _)) => {
                    self.gave_up_at.store(flushed, Ordering::Release);
                    if let Err(e) = slept {
                        tracing::debug!("a compaction's pause had no timer: {e}");
                        return waited;
                    }
                    return true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;
    use std::time::Instant;

    /// Runs `f` on core 0 of a one-core runtime (the pause's timer is the runtime's).
    fn on_core<Fut: std::future::Future<Output = ()> + 'static>(
        f: impl FnOnce() -> Fut + Send + 'static,
    ) {
        let rt = ziob::Runtime::builder().cores(1).build().unwrap();
        rt.block_on(f).unwrap();
    }

    /// After `ms` milliseconds on the current core, runs `f`.
    fn after(ms: u64, f: impl FnOnce() + 'static) {
        ziob::runtime::spawn(async move {
            ziob::runtime::sleep(Duration::from_millis(ms))
                .await
                .unwrap();
            f();
        })
        .detach();
    }

    const LONG: Duration = Duration::from_secs(60);

    #[test]
    fn no_waiting_flush_no_pause() {
        on_core(|| async {
            let f = FlushFirst::new(0, 8);
            let t = Instant::now();
            assert!(!f.pause_at_most(LONG).await);
            assert!(t.elapsed() < Duration::from_secs(10));
        });
    }

    /// A pause lasts until the waiting flush finishes, not less.
    #[test]
    fn a_pause_ends_when_the_flush_finishes() {
        on_core(|| async {
            let f = Rc::new(FlushFirst::new(0, 8));
            f.switched(1);
            let f2 = f.clone();
            after(50, move || f2.flushed(0));
            assert!(f.pause_at_most(LONG).await);
            assert_eq!(f.waiting(), 0, "the pause ended before the flush");
        });
    }

    /// Two memtables waiting, each flush within the bound but both together beyond it: the
    /// bound starts again for the second flush, and the pause lasts until both are flushed.
    #[test]
    fn each_flush_gets_its_own_bound() {
        on_core(|| async {
            let f = Rc::new(FlushFirst::new(0, 8));
            f.switched(1);
            f.switched(2);
            let (f2, f3) = (f.clone(), f.clone());
            after(80, move || f2.flushed(1));
            after(160, move || f3.flushed(0));
            let t = Instant::now();
            assert!(f.pause_at_most(Duration::from_millis(120)).await);
            assert!(
                t.elapsed() >= Duration::from_millis(160),
                "{:?}",
                t.elapsed()
            );
            assert_eq!(f.waiting(), 0);
        });
    }

    /// A flush that does not finish holds compactions for the bound once in all — the next
    /// call (another compaction's too) does not wait for it; the next flush gets a bound of
    /// its own.
    #[test]
    fn a_pause_is_bounded_per_flush() {
        on_core(|| async {
            let f = FlushFirst::new(0, 8);
            let max = Duration::from_millis(30);
            f.switched(1);
            let t = Instant::now();
            assert!(f.pause_at_most(max).await);
            assert!(t.elapsed() >= max, "returned after {:?}", t.elapsed());
            // Each would wait 5 s if it paused again for the same flush.
            let t = Instant::now();
            for _ in 0..3 {
                assert!(!f.pause_at_most(Duration::from_secs(5)).await);
            }
            assert!(
                t.elapsed() < Duration::from_secs(4),
                "paused again for the same flush"
            );
            // That flush ends while another memtable waits: that one may hold it again.
            f.switched(2);
            f.flushed(1);
            let t = Instant::now();
            assert!(f.pause_at_most(max).await);
            assert!(t.elapsed() >= max);
        });
    }

    /// With L0 at its limit a compaction does not pause, and one pausing stops when L0
    /// reaches it.
    #[test]
    fn no_pause_with_l0_at_its_limit() {
        on_core(|| async {
            let f = Rc::new(FlushFirst::new(8, 8));
            f.switched(1);
            assert!(!f.pause_at_most(LONG).await);
            f.set_l0_tables(7);
            let f2 = f.clone();
            after(20, move || f2.set_l0_tables(8));
            let t = Instant::now();
            assert!(f.pause_at_most(LONG).await);
            assert!(t.elapsed() < Duration::from_secs(10));
        });
    }

    /// A released shard (stopping or failed) holds no compaction, now or later.
    #[test]
    fn release_ends_a_pause_and_prevents_the_next() {
        on_core(|| async {
            let f = Rc::new(FlushFirst::new(0, 8));
            f.switched(1);
            let f2 = f.clone();
            after(20, move || f2.release());
            let t = Instant::now();
            assert!(f.pause_at_most(LONG).await);
            assert!(!f.pause_at_most(LONG).await);
            assert!(t.elapsed() < Duration::from_secs(10));
            assert_eq!(f.waiting(), 1);
        });
    }

    /// Off a runtime core there is no timer: no pause at all (a hang fails the test).
    #[test]
    fn off_a_core_it_does_not_wait() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let f = FlushFirst::new(0, 8);
            f.switched(1);
            let waited = futures::executor::block_on(f.pause_at_most(LONG));
            let _ = tx.send(waited);
        });
        let waited = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the pause off a core hung");
        assert!(!waited);
    }
}
