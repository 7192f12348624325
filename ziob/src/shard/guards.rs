//! RAII guards for the per-zone and per-shard state an operation holds across an `.await`.
//!
//! A future may be dropped at any await point (a `select!` that took another branch, a
//! timeout, a caller that gave up). Each guard restores what its operation set when it is
//! dropped, finished or not, and wakes the shard's waiters, so a dropped operation never
//! leaves a zone held, a reader counted, memory charged or a call counted as in flight.

use std::rc::Rc;

use ziob_backends::ZonedDevice;

use super::zone::ZoneOp;
use super::Shard;

/// Holds zone `i` in operation `op` (set by [`Shard::hold_zone`]); back to
/// [`ZoneOp::Idle`] on drop.
pub(crate) struct ZoneOpGuard<D: ZonedDevice> {
    shard: Rc<Shard<D>>,
    i: usize,
    /// A reset that has not happened yet: the write-back target to restore (the zone keeps
    /// its data and its write-back resumes) if the guard drops before [`Self::reset_done`].
    reset_target: Option<u64>,
}

impl<D: ZonedDevice> ZoneOpGuard<D> {
    /// Marks the reset done: dropping the guard no longer restores the write-back target.
    pub(crate) fn reset_done(&mut self) {
        self.reset_target = None;
    }
}

impl<D: ZonedDevice> Drop for ZoneOpGuard<D> {
    fn drop(&mut self) {
        let zone = {
            let mut zones = self.shard.zones.borrow_mut();
            let z = &mut zones[self.i];
            z.op = ZoneOp::Idle;
            if let Some(t) = self.reset_target {
                z.target = z.target.max(t);
            }
            z.index
        };
        self.shard.notify();
        if self.reset_target.is_some() {
            self.shard.kick(zone);
        }
    }
}

impl<D: ZonedDevice> Shard<D> {
    /// Puts zone `i` (which must be idle: wait for it first, with no await in between) in
    /// operation `op` until the returned guard drops. A reset also bumps the zone's
    /// generation and takes its write-back target (restored if the reset does not happen).
    pub(crate) fn hold_zone(self: &Rc<Self>, i: usize, op: ZoneOp) -> ZoneOpGuard<D> {
        let mut zones = self.zones.borrow_mut();
        let z = &mut zones[i];
        assert_eq!(z.op, ZoneOp::Idle, "zone {} held twice", z.index);
        z.op = op;
        let reset_target = (op == ZoneOp::Resetting).then(|| {
            z.generation += 1;
            std::mem::take(&mut z.target)
        });
        ZoneOpGuard {
            shard: self.clone(),
            i,
            reset_target,
        }
    }
}

/// Counts a device read of zone `i` in flight (a reset waits for them).
pub(crate) struct ReaderGuard<'a, D: ZonedDevice> {
    shard: &'a Shard<D>,
    i: usize,
}

impl<'a, D: ZonedDevice> ReaderGuard<'a, D> {
    pub(crate) fn new(shard: &'a Shard<D>, i: usize) -> Self {
        shard.zones.borrow_mut()[i].readers += 1;
        ReaderGuard { shard, i }
    }
}

impl<D: ZonedDevice> Drop for ReaderGuard<'_, D> {
    fn drop(&mut self) {
        self.shard.zones.borrow_mut()[self.i].readers -= 1;
        self.shard.notify();
    }
}

/// Bytes of the memory budget taken for a write and not yet handed to chunks; given back on
/// drop.
pub(crate) struct Reservation<'a, D: ZonedDevice> {
    shard: &'a Shard<D>,
    bytes: u64,
}

impl<'a, D: ZonedDevice> Reservation<'a, D> {
    /// A reservation of `bytes` the caller has just charged to the budget.
    pub(crate) fn charged(shard: &'a Shard<D>, bytes: u64) -> Self {
        Reservation { shard, bytes }
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Adds another reservation's bytes to this one.
    pub(crate) fn merge(&mut self, mut other: Reservation<'a, D>) {
        self.bytes += std::mem::take(&mut other.bytes);
    }

    /// Hands `bytes` to chunks (they stay charged, now owned by the zone's buffer).
    pub(crate) fn commit(&mut self, bytes: u64) {
        assert!(bytes <= self.bytes, "committing more than reserved");
        self.bytes -= bytes;
    }
}

impl<D: ZonedDevice> Drop for Reservation<'_, D> {
    fn drop(&mut self) {
        self.shard.release_memory(self.bytes);
    }
}

/// A call admitted to the shard (see [`Shard::enter`]); closing waits until none is left.
pub(crate) struct CallGuard<D: ZonedDevice> {
    shard: Rc<Shard<D>>,
}

impl<D: ZonedDevice> CallGuard<D> {
    /// The guard of a call the caller has just counted.
    pub(crate) fn counted(shard: Rc<Shard<D>>) -> Self {
        CallGuard { shard }
    }
}

impl<D: ZonedDevice> Drop for CallGuard<D> {
    fn drop(&mut self) {
        let left = self.shard.calls.get() - 1;
        self.shard.calls.set(left);
        if left == 0 && self.shard.closing.get() {
            self.shard.notify(); // only a closing shard waits for this
        }
    }
}

impl<D: ZonedDevice> Shard<D> {
    /// Admits a call: refused with [`Closed`](crate::ZiobError::Closed) once the shard is
    /// closing; counted until the guard drops.
    pub(crate) fn enter(self: &Rc<Self>) -> crate::Result<CallGuard<D>> {
        if self.closing.get() {
            return Err(crate::ZiobError::Closed);
        }
        let calls = self.calls.get() + 1;
        self.calls.set(calls);
        let mut st = self.stats.borrow_mut();
        st.s.calls_in_flight_peak = st.s.calls_in_flight_peak.max(calls);
        drop(st);
        Ok(CallGuard::counted(self.clone()))
    }
}
