//! Write-back: one task per zone at a time writes the zone's data in order at the device
//! write pointer, holding this core's share of the device's open/active resources while the
//! device zone is open.

use std::rc::Rc;

use tracing::Instrument;

use ziob_backends::{ZoneAction, ZoneTarget, ZonedDevice};

use super::policy;
use super::zone::{DeviceZone, Writeback, ZoneOp};
use super::Shard;
use crate::error::ZiobError;
use crate::metrics::clock::Stamp;
use crate::metrics::OpKind;

impl<D: ZonedDevice> Shard<D> {
    /// Starts the zone's write-back if it has something to write and none is running; queues
    /// the zone if this core has no device resource free for it.
    pub(super) fn kick(self: &Rc<Self>, zone: u32) {
        let i = self.local(zone);
        let bs = self.bs();
        let mut zones = self.zones.borrow_mut();
        let z = &mut zones[i];
        if self.closed.get()
            || z.op == ZoneOp::Resetting
            || z.writeback_running()
            || z.error.is_some()
            || policy::next_writeback(z, bs, self.unit_bytes).is_none()
        {
            return;
        }
        if !self.take_tokens(z.device) {
            if z.writeback != Writeback::Queued {
                z.writeback = Writeback::Queued;
                self.token_queue.borrow_mut().push_back(zone);
            }
            drop(zones);
            self.close_an_idle_zone();
            self.notify(); // a flush waiting on this zone re-checks whether it can progress
            return;
        }
        z.writeback = Writeback::Running;
        if z.device != DeviceZone::Open {
            z.device = DeviceZone::Open; // the first write opens it implicitly
            self.stats.borrow_mut().s.device_zone_opens += 1;
        }
        drop(zones);
        ziob_runtime::spawn(self.clone().writeback_task(zone)).detach();
    }

    /// Takes what a zone in device state `device` needs to be written: an open resource
    /// unless already open, and an active one if Empty. All or nothing.
    fn take_tokens(&self, device: DeviceZone) -> bool {
        let need_open = device != DeviceZone::Open;
        let need_active = device == DeviceZone::Empty;
        let open_ok = !need_open || self.open_max.is_none_or(|m| self.open_used.get() < m);
        let active_ok = !need_active || self.active_max.is_none_or(|m| self.active_used.get() < m);
        if !(open_ok && active_ok) {
            return false;
        }
        if need_open {
            self.open_used.set(self.open_used.get() + 1);
        }
        if need_active {
            self.active_used.set(self.active_used.get() + 1);
        }
        true
    }

    /// Gives back the resources a zone held in device state `device` (it became Full or
    /// Empty), and lets waiting zones start.
    pub(super) fn release_tokens(self: &Rc<Self>, device: DeviceZone) {
        if device == DeviceZone::Open {
            self.open_used.set(self.open_used.get() - 1);
        }
        if device.is_active() {
            self.active_used.set(self.active_used.get() - 1);
        }
        self.wake_token_queue();
    }

    pub(super) fn wake_token_queue(self: &Rc<Self>) {
        let waiting: Vec<u32> = self.token_queue.borrow_mut().drain(..).collect();
        for z in waiting {
            let mut zones = self.zones.borrow_mut();
            let zb = &mut zones[self.local(z)];
            if zb.writeback == Writeback::Queued {
                zb.writeback = Writeback::Idle;
            }
            drop(zones);
            self.kick(z);
        }
    }

    /// Closes one device zone that is open but idle, to give its open resource to a waiting
    /// zone. (Device zones stay open after write-back until a resource is needed, which saves
    /// a close and an implicit open per write-back unit.)
    fn close_an_idle_zone(self: &Rc<Self>) {
        if self.closed.get() {
            return;
        }
        let victim = {
            let mut zones = self.zones.borrow_mut();
            let v = zones
                .iter_mut()
                .filter(|z| {
                    z.device == DeviceZone::Open && z.writeback == Writeback::Idle && !z.exclusive()
                })
                .min_by_key(|z| z.last_write_seq);
            v.map(|z| {
                z.writeback = Writeback::Running; // keeps kicks away while the close runs
                z.index
            })
        };
        if let Some(zone) = victim {
            let this = self.clone();
            ziob_runtime::spawn(async move {
                this.close_device_zone(zone).await;
                this.zones.borrow_mut()[this.local(zone)].writeback = Writeback::Idle;
                this.notify();
                this.wake_token_queue();
                this.kick(zone);
            })
            .detach();
        }
    }

    async fn close_device_zone(self: &Rc<Self>, zone: u32) {
        let i = self.local(zone);
        match self
            .device
            .zone_action(ZoneAction::Close, ZoneTarget::One(zone))
            .await
        {
            Ok(()) => {
                self.zones.borrow_mut()[i].device = DeviceZone::Closed;
                self.open_used.set(self.open_used.get() - 1);
                self.stats.borrow_mut().s.device_zone_closes += 1;
            }
            Err(e) => {
                tracing::warn!(zone, error = %e, "closing a device zone after write-back failed");
                // The close may have happened or not: ask the device. No data is at stake,
                // so the zone keeps no error unless it cannot be read back.
                if !self.resync_device_zone(zone).await {
                    let mut zones = self.zones.borrow_mut();
                    let z = &mut zones[i];
                    if z.error.is_none() {
                        z.error = Some(ZiobError::writeback(zone, z.device_wp, &e));
                    }
                }
            }
        }
    }

    /// Writes the zone's ready data until nothing is ready, then ends the burst. Write-backs
    /// are issued in write-pointer order; up to the device's
    /// [`ordered_writes_in_flight`](ZonedDevice::ordered_writes_in_flight) of them are in
    /// flight at once (1 for most devices), and the device write pointer advances only over
    /// contiguous completed ranges.
    async fn writeback_task(self: Rc<Self>, zone: u32) {
        use futures::stream::{FuturesUnordered, StreamExt};
        let i = self.local(zone);
        let bs = self.bs();
        let capacity = self.geometry.zone_capacity_bytes;
        let depth = self.device.ordered_writes_in_flight().max(1) as usize;
        let durable_writes = self.device.has_durable_writes();
        let generation = self.zones.borrow()[i].generation;
        let mut in_flight = FuturesUnordered::new();
        let mut failed = false;
        // The first failure of the burst if it may be retried (see `policy::is_transient`).
        let mut transient: Option<ZiobError> = None;
        loop {
            // Issue as many write-backs as the depth allows, in order.
            while in_flight.len() < depth {
                let step = {
                    let mut zones = self.zones.borrow_mut();
                    let z = &mut zones[i];
                    if z.generation != generation
                        || z.error.is_some()
                        || failed
                        || self.closed.get()
                    {
                        None
                    } else {
                        policy::next_writeback(z, bs, self.unit_bytes).map(|plan| {
                            z.issued_wp = plan.end;
                            // Durable only where it continues a durable prefix with
                            // nothing in flight before it: else it would prove nothing and
                            // the flush needs a device flush anyway.
                            let durable = durable_writes
                                && plan.end <= z.durable_target
                                && plan.start == z.device_wp
                                && z.durable_wp == Some(z.device_wp);
                            let c = &mut z.chunks[plan.chunk];
                            // The device reads a view; the chunk keeps its memory for reads
                            // and appends, which land past `issued_wp` only (see `Chunk::buf`).
                            let view = c.buf.share(
                                (plan.start - c.start) as usize,
                                (plan.end - c.start) as usize,
                            );
                            (plan, view, durable)
                        })
                    }
                };
                let Some((plan, buf, durable)) = step else {
                    break;
                };
                tracing::trace!(zone, start = plan.start, end = plan.end, "write-back");
                let device = self.device.clone();
                let span = tracing::debug_span!(
                    "writeback",
                    zone,
                    offset = plan.start,
                    len = plan.end - plan.start
                );
                let mut write = Box::pin(
                    async move {
                        let started = Stamp::now();
                        let (res, _view) = if durable {
                            device.write_durable(zone, plan.start, buf).await
                        } else {
                            device.write(zone, plan.start, buf).await
                        };
                        (plan, res, started, durable)
                    }
                    .instrument(span),
                );
                self.stats.borrow_mut().s.device_writes_in_flight += 1;
                // Poll once now: the device takes the write at its first poll, so writes are
                // issued in write-pointer order whatever order they complete in.
                match futures::poll!(write.as_mut()) {
                    std::task::Poll::Ready(done) => in_flight
                        .push(Box::pin(futures::future::ready(done))
                            as std::pin::Pin<Box<dyn std::future::Future<Output = _>>>),
                    std::task::Poll::Pending => in_flight.push(write),
                }
            }
            let Some((plan, res, started, durable)) = in_flight.next().await else {
                break;
            };
            {
                let mut st = self.stats.borrow_mut();
                st.s.device_writes_in_flight -= 1;
                st.latency.record(OpKind::DeviceWrite, started.elapsed_ns());
            }
            let mut zones = self.zones.borrow_mut();
            let z = &mut zones[i];
            match res {
                Ok(()) => {
                    z.complete_writeback(plan.start, plan.end);
                    // A durable write continues a durable prefix (else it proves nothing
                    // about the bytes before it).
                    if let Some(d) = z.durable_wp.filter(|&d| durable && d >= plan.start) {
                        z.durable_wp = Some(d.max(plan.end));
                        self.stats.borrow_mut().s.device_durable_writes += 1;
                    }
                    self.on_device
                        .publish(zone, z.on_device_end(), z.mem_start());
                    if !failed {
                        z.retries = 0;
                    }
                    self.stats
                        .borrow_mut()
                        .record_writeback(plan.end - plan.start);
                    if z.device_wp == capacity && z.device != DeviceZone::Full {
                        let before = z.device;
                        z.device = DeviceZone::Full;
                        drop(zones);
                        self.release_tokens(before);
                    }
                }
                Err(e) => {
                    tracing::warn!(zone, offset = plan.start, error = %e, "write-back failed");
                    let kept = ZiobError::writeback(zone, plan.start, &e);
                    if policy::is_transient(e.kind()) && z.retries < policy::WRITEBACK_RETRIES {
                        transient.get_or_insert(kept);
                    } else if z.error.is_none() {
                        z.error = Some(kept);
                    }
                    drop(zones);
                    failed = true;
                    self.stats.borrow_mut().s.writeback_errors += 1;
                }
            }
            self.notify();
        }
        if failed {
            // Nothing of the zone is in flight any more: learn what the failed write did
            // to the device zone (see `resync`), so the zone's resources are counted right
            // and nobody waits for them in vain.
            let resynced = self.resync_device_zone(zone).await;
            if let Some(e) = transient {
                let retry = {
                    let mut zones = self.zones.borrow_mut();
                    let z = &mut zones[i];
                    if z.error.is_some() {
                        false
                    } else if !resynced {
                        // Without the device's write pointer a retry could skip data.
                        z.error = Some(e);
                        false
                    } else {
                        z.retries += 1;
                        true
                    }
                };
                if retry {
                    let n = self.zones.borrow()[i].retries;
                    tracing::info!(zone, retry = n, "retrying a transient write-back failure");
                    self.stats.borrow_mut().s.writeback_retries += 1;
                    // Holding the write-back slot: no other write-back or reset meanwhile.
                    let _ = ziob_runtime::sleep(policy::retry_backoff(n - 1)).await;
                }
            }
        }
        let close_now = {
            let z = &self.zones.borrow()[i];
            !self.closed.get()
                && z.device == DeviceZone::Open
                && z.device_wp < capacity
                && !self.token_queue.borrow().is_empty()
        };
        if close_now {
            self.close_device_zone(zone).await;
        }
        self.zones.borrow_mut()[i].writeback = Writeback::Idle;
        self.notify();
        self.wake_token_queue();
        // Data that became ready while the burst was ending.
        self.kick(zone);
    }
}
