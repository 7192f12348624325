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
//! The pause is bounded in time too: for each flush a compaction waits at most
//! [`PAUSE_MAX`], then goes on beside it until that flush ends. No flush waits for a
//! compaction in kv-demo, but both hold the device's zone resources (a zone the paused
//! compaction keeps active may be one the flush's zone waits for), so no pause may depend
//! on it. The pause also ends when the shard stops or fails ([`FlushFirst::release`]).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// The longest a compaction waits for one flush before it goes on beside it.
pub const PAUSE_MAX: Duration = Duration::from_millis(200);

/// Counts the memtables waiting for their flush and lets compactions wait for them.
#[derive(Debug)]
pub struct FlushFirst {
    /// L0 tables at which compactions stop pausing.
    l0_max: usize,
    /// The shard's L0 tables now.
    l0: AtomicUsize,
    /// Memtables switched out and not flushed yet.
    waiting: AtomicUsize,
    /// Flushes finished so far: a compaction that gave up on one knows it by this count.
    flushed: AtomicU64,
    /// Set when the shard stops or fails: nobody pauses any more.
    released: AtomicBool,
    /// Notified at each finished flush, a full L0 and the release.
    changed: Notify,
}

/// What one compaction remembers between its pauses.
#[derive(Debug, Default)]
pub struct Pauses {
    /// The flush count at which it last waited [`PAUSE_MAX`] in vain.
    gave_up_at: Option<u64>,
    /// Pauses that waited.
    pub waits: u64,
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
            released: AtomicBool::new(false),
            changed: Notify::new(),
        }
    }

    /// A memtable was switched out: it waits for its flush.
    pub fn queued(&self) {
        self.waiting.fetch_add(1, Ordering::AcqRel);
    }

    /// A memtable's flush finished (it left the queue).
    pub fn flushed(&self) {
        self.waiting.fetch_sub(1, Ordering::AcqRel);
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

    /// Waits while a memtable waits for its flush: until no memtable waits, L0 holds
    /// `l0_max` tables, the shard is released, or this flush was waited for [`PAUSE_MAX`]
    /// (then not again until a flush finishes). Returns at once when no flush is due. The
    /// bound is a runtime timer: off a runtime core it does not wait.
    pub async fn pause(&self, pauses: &mut Pauses) {
        self.pause_at_most(pauses, PAUSE_MAX).await
    }

    async fn pause_at_most(&self, pauses: &mut Pauses, max: Duration) {
        let mut timer: Option<std::pin::Pin<Box<ziob::runtime::Sleep>>> = None;
        let mut waited = false;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.released.load(Ordering::Acquire)
                || self.l0.load(Ordering::Acquire) >= self.l0_max
                || self.waiting() == 0
            {
                return;
            }
            let flushed = self.flushed.load(Ordering::Acquire);
            if pauses.gave_up_at == Some(flushed) {
                return;
            }
            if !waited {
                waited = true;
                pauses.waits += 1;
            }
            let sleep = timer.get_or_insert_with(|| Box::pin(ziob::runtime::sleep(max)));
            match futures::future::select(changed, sleep.as_mut()).await {
                futures::future::Either::Left(_) => {
                    // A flush finished: the next one (if any) gets its own bound.
                    if self.flushed.load(Ordering::Acquire) != flushed {
                        timer = None;
                    }
                }
                futures::future::Either::Right((slept, _)) => {
                    if slept.is_err() {
                        tracing::debug!("a compaction's pause had no timer: {slept:?}");
                    }
                    pauses.gave_up_at = Some(flushed);
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;

    /// Runs `f` on core 0 of a one-core runtime (the pause's timer is the runtime's).
    fn on_core<Fut: std::future::Future<Output = ()> + 'static>(
        f: impl FnOnce() -> Fut + Send + 'static,
    ) {
        let rt = ziob::Runtime::builder().cores(1).build().unwrap();
        rt.block_on(f).unwrap();
    }

    const LONG: Duration = Duration::from_secs(60);

    #[test]
    fn no_waiting_flush_no_pause() {
        on_core(|| async {
            let f = FlushFirst::new(0, 8);
            let mut p = Pauses::default();
            let t = Instant::now();
            f.pause_at_most(&mut p, LONG).await;
            assert!(t.elapsed() < Duration::from_secs(10));
            assert_eq!(p.waits, 0);
        });
    }

    /// A pause lasts until the waiting flush finishes, not less.
    #[test]
    fn a_pause_ends_when_the_flush_finishes() {
        on_core(|| async {
            let f = Rc::new(FlushFirst::new(0, 8));
            let done = Rc::new(AtomicBool::new(false));
            f.queued();
            let (f2, done2) = (f.clone(), done.clone());
            ziob::runtime::spawn(async move {
                ziob::runtime::sleep(Duration::from_millis(50))
                    .await
                    .unwrap();
                done2.store(true, Ordering::SeqCst);
                f2.flushed();
            })
            .detach();
            let mut p = Pauses::default();
            f.pause_at_most(&mut p, LONG).await;
            assert!(
                done.load(Ordering::SeqCst),
                "the pause ended before the flush"
            );
            assert_eq!((p.waits, f.waiting()), (1, 0));
        });
    }

    /// Two memtables waiting: the pause lasts until both are flushed.
    #[test]
    fn a_pause_waits_for_every_waiting_flush() {
        on_core(|| async {
            let f = Rc::new(FlushFirst::new(0, 8));
            f.queued();
            f.queued();
            let f2 = f.clone();
            ziob::runtime::spawn(async move {
                for _ in 0..2 {
                    ziob::runtime::sleep(Duration::from_millis(20))
                        .await
                        .unwrap();
                    f2.flushed();
                }
            })
            .detach();
            let mut p = Pauses::default();
            f.pause_at_most(&mut p, LONG).await;
            assert_eq!((p.waits, f.waiting()), (1, 0));
        });
    }

    /// A flush that does not finish holds a compaction for the bound once, not again; the
    /// next flush gets a bound of its own.
    #[test]
    fn a_pause_is_bounded_per_flush() {
        on_core(|| async {
            let f = FlushFirst::new(0, 8);
            let max = Duration::from_millis(30);
            let mut p = Pauses::default();
            f.queued();
            let t = Instant::now();
            f.pause_at_most(&mut p, max).await;
            assert!(t.elapsed() >= max, "returned after {:?}", t.elapsed());
            // Each would wait 5 s if it paused again for the same flush.
            let t = Instant::now();
            for _ in 0..3 {
                f.pause_at_most(&mut p, Duration::from_secs(5)).await;
            }
            assert!(
                t.elapsed() < Duration::from_secs(4),
                "paused again for the same flush"
            );
            assert_eq!(p.waits, 1);
            // That flush ends while another memtable waits: that one may hold it again.
            f.queued();
            f.flushed();
            let t = Instant::now();
            f.pause_at_most(&mut p, max).await;
            assert!(t.elapsed() >= max);
            assert_eq!(p.waits, 2);
        });
    }

    /// A released shard (stopping or failed) holds no compaction, now or later.
    #[test]
    fn release_ends_a_pause_and_prevents_the_next() {
        on_core(|| async {
            let f = Rc::new(FlushFirst::new(0, 8));
            f.queued();
            let f2 = f.clone();
            ziob::runtime::spawn(async move {
                ziob::runtime::sleep(Duration::from_millis(20))
                    .await
                    .unwrap();
                f2.release();
            })
            .detach();
            let mut p = Pauses::default();
            let t = Instant::now();
            f.pause_at_most(&mut p, LONG).await;
            f.pause_at_most(&mut p, LONG).await;
            assert!(t.elapsed() < Duration::from_secs(10));
            assert_eq!((p.waits, f.waiting()), (1, 1));
        });
    }

    /// With L0 at its limit a compaction does not pause, and one pausing stops when L0
    /// reaches it.
    #[test]
    fn no_pause_with_l0_at_its_limit() {
        on_core(|| async {
            let f = Rc::new(FlushFirst::new(8, 8));
            f.queued();
            let mut p = Pauses::default();
            f.pause_at_most(&mut p, LONG).await;
            assert_eq!(p.waits, 0);
            f.set_l0_tables(7);
            let f2 = f.clone();
            ziob::runtime::spawn(async move {
                ziob::runtime::sleep(Duration::from_millis(20))
                    .await
                    .unwrap();
                f2.set_l0_tables(8);
            })
            .detach();
            let t = Instant::now();
            f.pause_at_most(&mut p, LONG).await;
            assert!(t.elapsed() < Duration::from_secs(10));
            assert_eq!(p.waits, 1);
        });
    }

    /// Off a runtime core there is no timer: no pause at all.
    #[test]
    fn off_a_core_it_does_not_wait() {
        let f = FlushFirst::new(0, 8);
        f.queued();
        let mut p = Pauses::default();
        futures::executor::block_on(f.pause_at_most(&mut p, LONG));
    }
}
