//! The harness's own per-zone reader/writer locks: appends, writes, reads, flushes, syncs,
//! reports and close share a zone; reset and finish take it alone. This keeps the model's
//! question "was this acknowledged before that reset?" answerable. It orders only the
//! harness's calls; the buffer still sees appends racing flushes, syncs and close, reads
//! racing write-back, and (through dropped futures, which release their lock at once)
//! resets and finishes racing everything.

use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Default, Clone, Copy)]
struct LockState {
    readers: u32,
    writer: bool,
    writers_waiting: u32,
}

/// One lock per zone.
pub struct ZoneLocks {
    zones: Mutex<Vec<LockState>>,
}

/// A held lock; released on drop.
pub struct Held {
    locks: Arc<ZoneLocks>,
    zone: usize,
    exclusive: bool,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut z = self.locks.zones.lock().unwrap_or_else(|p| p.into_inner());
        let s = &mut z[self.zone];
        if self.exclusive {
            s.writer = false;
        } else {
            s.readers -= 1;
        }
    }
}

const RETRY: Duration = Duration::from_micros(200);

impl ZoneLocks {
    /// Locks for `zones` zones.
    pub fn new(zones: usize) -> Arc<ZoneLocks> {
        Arc::new(ZoneLocks {
            zones: Mutex::new(vec![LockState::default(); zones]),
        })
    }

    fn try_take(
        self: &Arc<Self>,
        zone: usize,
        exclusive: bool,
        waiting: &mut bool,
    ) -> Option<Held> {
        let mut z = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        let s = &mut z[zone];
        let free = if exclusive {
            !s.writer && s.readers == 0
        } else {
            !s.writer && s.writers_waiting == 0
        };
        if free {
            if exclusive {
                s.writer = true;
                if *waiting {
                    s.writers_waiting -= 1;
                    *waiting = false;
                }
            } else {
                s.readers += 1;
            }
            return Some(Held {
                locks: self.clone(),
                zone,
                exclusive,
            });
        }
        if exclusive && !*waiting {
            s.writers_waiting += 1;
            *waiting = true;
        }
        None
    }

    async fn take(self: &Arc<Self>, zone: usize, exclusive: bool) -> Held {
        let mut waiting = false;
        let mut guard = WaitingGuard {
            locks: self.clone(),
            zone,
            waiting: false,
        };
        loop {
            if let Some(h) = self.try_take(zone, exclusive, &mut waiting) {
                guard.waiting = false;
                return h;
            }
            guard.waiting = waiting;
            // A failed timer only makes the retry come sooner.
            let _ = ziob::runtime::sleep(RETRY).await;
        }
    }

    /// Shares `zone`.
    pub async fn shared(self: &Arc<Self>, zone: u32) -> Held {
        self.take(zone as usize, false).await
    }

    /// Takes `zone` alone.
    pub async fn exclusive(self: &Arc<Self>, zone: u32) -> Held {
        self.take(zone as usize, true).await
    }

    /// Shares every zone (in index order).
    pub async fn shared_all(self: &Arc<Self>) -> Vec<Held> {
        let n = self.zones.lock().unwrap_or_else(|p| p.into_inner()).len();
        let mut held = Vec::with_capacity(n);
        for zone in 0..n {
            held.push(self.take(zone, false).await);
        }
        held
    }
}

/// Withdraws a waiting writer's claim if its wait is dropped.
struct WaitingGuard {
    locks: Arc<ZoneLocks>,
    zone: usize,
    waiting: bool,
}

impl Drop for WaitingGuard {
    fn drop(&mut self) {
        if self.waiting {
            let mut z = self.locks.zones.lock().unwrap_or_else(|p| p.into_inner());
            z[self.zone].writers_waiting -= 1;
        }
    }
}
