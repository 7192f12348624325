//! The shard's memory budget: charging, giving back, evicting clean chunks and pressure
//! write-back.

use std::rc::Rc;
use std::time::Instant;

use ziob_backends::ZonedDevice;

use super::guards::Reservation;
use super::{policy, Shard};
use crate::error::{Result, ZiobError};

impl<D: ZonedDevice> Shard<D> {
    /// Gives `bytes` back to the budget and wakes waiting writers.
    pub(super) fn release_memory(&self, bytes: u64) {
        if bytes > 0 {
            self.memory_used.set(self.memory_used.get() - bytes);
            self.notify();
        }
    }

    /// Drops clean chunks, least recently written zones first, until `want` bytes are free.
    fn evict(&self, want: u64) -> u64 {
        let mut zones = self.zones.borrow_mut();
        let order = policy::eviction_order(zones.iter());
        let mut freed = 0;
        for z in order {
            if freed >= want {
                break;
            }
            freed += zones[z as usize / self.cores].evict_clean(want - freed);
        }
        drop(zones);
        if freed > 0 {
            self.memory_used.set(self.memory_used.get() - freed);
        }
        freed
    }

    /// Takes `bytes` of the budget, waiting (never failing for lack of memory alone) while
    /// write-back frees memory. Fails only when nothing can free memory: the budget is full
    /// of data of zones that cannot get a device resource (see [`ZiobError::BufferFull`]).
    /// The bytes are charged in the same step as the reservation that gives them back on
    /// drop is made, so a dropped caller cannot leak them.
    pub(super) async fn acquire_memory(
        self: &Rc<Self>,
        zone: u32,
        bytes: u64,
    ) -> Result<Reservation<'_, D>> {
        let mut waited_since = None;
        loop {
            let used = self.memory_used.get();
            if used + bytes <= self.budget_bytes {
                self.memory_used.set(used + bytes);
                let mut st = self.stats.borrow_mut();
                st.s.memory_peak_bytes = st.s.memory_peak_bytes.max(used + bytes);
                drop(st);
                if let Some(t) = waited_since {
                    let mut st = self.stats.borrow_mut();
                    st.s.backpressure_waits += 1;
                    st.s.backpressure_wait_ns += Instant::now().duration_since(t).as_nanos() as u64;
                }
                return Ok(Reservation::charged(self, bytes));
            }
            if bytes > self.budget_bytes {
                return Err(ZiobError::Config(format!(
                    "a single write needs {bytes} bytes of buffer, more than the shard budget of {} bytes",
                    self.budget_bytes
                )));
            }
            let short = used + bytes - self.budget_bytes;
            if self.evict(short) >= short {
                continue;
            }
            let victims = policy::pressure_victims(self.zones.borrow().iter(), self.bs());
            for v in victims {
                {
                    let mut zones = self.zones.borrow_mut();
                    let z = &mut zones[self.local(v)];
                    z.target = z.target.max(z.wp);
                }
                self.kick(v);
            }
            let progress_possible = self.zones.borrow().iter().any(|z| z.writeback_running());
            if !progress_possible {
                return Err(ZiobError::BufferFull {
                    zone,
                    needed_bytes: bytes,
                    budget_bytes: self.budget_bytes,
                    core: self.core,
                    active_max: self.active_max.unwrap_or(u32::MAX),
                });
            }
            waited_since.get_or_insert_with(Instant::now);
            let listener = self.progress.listen();
            if self.memory_used.get() + bytes <= self.budget_bytes {
                continue;
            }
            listener.await;
        }
    }
}
