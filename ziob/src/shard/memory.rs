//! The shard's memory budget: charging, giving back, evicting clean chunks and pressure
//! write-back.

use std::rc::Rc;
use std::time::Instant;

use ziob_backends::ZonedDevice;

use super::guards::Reservation;
use super::zone::ZoneOp;
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
            let zb = &mut zones[z as usize / self.cores];
            let n = zb.evict_clean(want - freed);
            if n > 0 {
                // The device holds what it held; the owner's memory now starts later.
                self.on_device
                    .publish(zb.index, zb.on_device_end(), zb.mem_start());
            }
            freed += n;
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
            if self.closed.get() {
                // Abandoned (closed without a sync): nothing frees memory any more, and no
                // zone of it is to be padded or written back.
                return Err(ZiobError::Closed);
            }
            let short = used + bytes - self.budget_bytes;
            // Free more than the shortfall, so the next appends fit without another scan.
            let want = short + policy::pressure_headroom(self.budget_bytes);
            let freed = self.evict(want);
            if freed >= short {
                continue;
            }
            // Whole dirty blocks next: the least recently written zones start write-back,
            // as many as cover what is still wanted beyond write-backs already running.
            let victims =
                policy::pressure_victims(self.zones.borrow().iter(), self.bs(), want - freed);
            for v in victims {
                {
                    let mut zones = self.zones.borrow_mut();
                    let z = &mut zones[self.local(v)];
                    z.target = z.target.max(z.wp);
                }
                self.kick(v);
            }
            let mut progress_possible = self.memory_may_free();
            if !progress_possible {
                // What is left are partial blocks: pad and write some out.
                self.pad_for_pressure(zone, short);
                progress_possible = self.memory_may_free();
            }
            if !progress_possible {
                return Err(self.buffer_full(zone, bytes));
            }
            waited_since.get_or_insert_with(Instant::now);
            let listener = self.progress.listen();
            if self.memory_used.get() + bytes <= self.budget_bytes {
                continue;
            }
            listener.await;
        }
    }

    /// Whether memory will free without anyone else acting: a write-back in flight makes
    /// its chunks clean; a reset or finish in progress never waits for memory and ends on
    /// its own (a reset drops the zone's chunks, a finish leaves them clean).
    fn memory_may_free(&self) -> bool {
        self.zones
            .borrow()
            .iter()
            .any(|z| z.writeback_running() || (z.exclusive() && z.memory_bytes() > 0))
    }

    /// Memory is short and no whole block is left to write back: pads the partial last
    /// block of the least recently written zones (not `requester`, none held by an
    /// operation, failed or waiting for a device resource) and writes them back, until
    /// their memory covers `short` bytes. Their next append starts at the next block, as
    /// after a flush; their chunks become clean and can be evicted.
    fn pad_for_pressure(self: &Rc<Self>, requester: u32, short: u64) {
        let bs = self.bs();
        let mut candidates: Vec<(u64, usize)> = {
            let zones = self.zones.borrow();
            zones
                .iter()
                .enumerate()
                .filter(|(_, z)| {
                    z.index != requester
                        && z.op == ZoneOp::Idle
                        && z.error.is_none()
                        && !z.writeback_running()
                        && !z.waiting_for_tokens()
                        && z.wp % bs != 0
                        && z.dirty_bytes() > 0
                })
                .map(|(i, z)| (z.last_write_seq, i))
                .collect()
        };
        candidates.retain(|&(_, i)| !self.activation_blocked(i));
        candidates.sort_unstable();
        let mut covered = 0;
        let mut padded = Vec::new();
        {
            let mut zones = self.zones.borrow_mut();
            for (_, i) in candidates {
                if covered >= short {
                    break;
                }
                let z = &mut zones[i];
                self.pad_now(z);
                z.target = z.target.max(z.wp);
                covered += z.memory_bytes();
                padded.push(z.index);
            }
        }
        self.stats.borrow_mut().s.pressure_pads += padded.len() as u64;
        for zone in padded {
            self.kick(zone);
        }
    }

    /// The buffer's own limit, with the reason nothing can be written back and its numbers.
    fn buffer_full(&self, zone: u32, needed_bytes: u64) -> ZiobError {
        let zones = self.zones.borrow();
        let dirty_bytes = zones.iter().map(|z| z.dirty_bytes()).sum();
        let limit = |v: Option<u32>| v.map_or("unlimited".to_string(), |m| m.to_string());
        let holding = |f: &dyn Fn(&super::zone::ZoneBuf) -> bool| {
            let held: Vec<_> = zones
                .iter()
                .filter(|z| z.memory_bytes() > 0 && f(z))
                .collect();
            (
                held.len(),
                held.iter().map(|z| z.memory_bytes()).sum::<u64>(),
            )
        };
        let (queued, queued_bytes) = holding(&|z| z.waiting_for_tokens());
        let (failed, failed_bytes) = holding(&|z| z.error.is_some());
        let (busy, busy_bytes) = holding(&|z| z.op != ZoneOp::Idle);
        let (any, any_bytes) = holding(&|_| true);
        let cause = if queued > 0 {
            format!(
                "{queued} zones holding {queued_bytes} bytes wait for a device resource (this core holds {} of {} open and {} of {} active zones)",
                self.open_used.get(),
                limit(self.open_max),
                self.active_used.get(),
                limit(self.active_max)
            )
        } else if failed > 0 {
            format!("{failed} zones with a failed write-back hold {failed_bytes} bytes until they are reset")
        } else if busy > 0 {
            format!(
                "{busy} zones held by a finish, reset or streamed write hold {busy_bytes} bytes"
            )
        } else {
            format!("{any} zones hold {any_bytes} bytes and none has data that can be written back")
        };
        ZiobError::BufferFull {
            zone,
            needed_bytes,
            budget_bytes: self.budget_bytes,
            used_bytes: self.memory_used.get(),
            dirty_bytes,
            core: self.core,
            cause,
        }
    }
}
