//! Zone management through the buffer: open and close change only the state applications
//! see; finish writes the data back and finishes the device zone; reset resets the device
//! zone and drops the buffered data.
//!
//! Every action runs as a task of its own (see [`run_to_completion`]): once started it
//! completes even if its caller is dropped, so the device and the buffer never disagree
//! about a half-done reset or finish.

use std::rc::Rc;

use ziob_backends::{ZoneAction, ZoneState, ZoneTarget, ZonedDevice};

use super::zone::{DeviceZone, ZoneOp};
use super::{run_to_completion, Shard};
use crate::error::{Result, ZiobError};
use crate::logical;
use crate::metrics::OpKind;
use crate::metrics::OpTimer;

impl<D: ZonedDevice> Shard<D> {
    /// Applies a zone management action to one zone.
    ///
    /// Cancel safety: the action runs as its own task; dropping the call does not stop it.
    pub(crate) async fn action(self: &Rc<Self>, zone: u32, action: ZoneAction) -> Result<()> {
        let _timer = OpTimer::start(&self.stats, OpKind::of_action(action));
        self.check_zone(zone)?;
        let this = self.clone();
        let call = self.hold_call();
        run_to_completion(async move {
            let res = this.action_now(zone, action).await;
            drop(call);
            res
        })
        .await?
    }

    /// Applies `action` to every owned zone it applies to (Select All semantics). Cancel
    /// safety as [`Shard::action`] (all the zones' actions complete).
    pub(crate) async fn action_all(self: &Rc<Self>, action: ZoneAction) -> Result<()> {
        let _timer = OpTimer::start(&self.stats, OpKind::of_action(action));
        let this = self.clone();
        let call = self.hold_call();
        run_to_completion(async move {
            let res = this.action_all_now(action).await;
            drop(call);
            res
        })
        .await?
    }

    async fn action_all_now(self: &Rc<Self>, action: ZoneAction) -> Result<()> {
        // Buffered, the shard's zone states are the ones applications see; in pass-through
        // only the device knows them (the shard's copy is from open time).
        let states: Vec<(u32, ZoneState)> = if self.buffered {
            self.zones
                .borrow()
                .iter()
                .map(|z| (z.index, z.state))
                .collect()
        } else {
            self.report(0, self.geometry.zone_count)
                .await?
                .into_iter()
                .map(|z| (z.index, z.state))
                .collect()
        };
        let pick: Vec<u32> = states
            .into_iter()
            .filter(|&(_, state)| {
                use ZoneState::*;
                match action {
                    ZoneAction::Open => state == Closed,
                    ZoneAction::Close => state.is_open(),
                    ZoneAction::Finish => state.is_active(),
                    ZoneAction::Reset => state.is_active() || state == Full,
                    ZoneAction::Offline => state == ReadOnly,
                }
            })
            .map(|(index, _)| index)
            .collect();
        for z in pick {
            self.action_now(z, action).await?;
        }
        Ok(())
    }

    async fn action_now(self: &Rc<Self>, zone: u32, action: ZoneAction) -> Result<()> {
        if !self.buffered {
            if action == ZoneAction::Finish {
                // As buffered: the data is made durable before the finish (see
                // `Shard::finish`).
                self.device_flush().await?;
            }
            self.device
                .zone_action(action, ZoneTarget::One(zone))
                .await?;
            if action == ZoneAction::Finish {
                // As buffered: a completed finish is durable, data included.
                self.device_flush().await?;
            }
            return Ok(());
        }
        let i = self.local(zone);
        self.wait_idle(i).await;
        // Nothing awaited since the zone was seen idle: check and take it in one step.
        let state = self.zones.borrow()[i].state;
        let next = logical::apply_action(zone, action, state)?;
        match action {
            ZoneAction::Open | ZoneAction::Close => {
                self.zones.borrow_mut()[i].state = next;
                Ok(())
            }
            ZoneAction::Finish => self.finish(zone).await,
            ZoneAction::Reset => self.reset(zone).await,
            ZoneAction::Offline => {
                self.device
                    .zone_action(action, ZoneTarget::One(zone))
                    .await?;
                self.zones.borrow_mut()[i].state = next;
                // An offline zone's reads fail: they are the owner's to answer.
                self.on_device.publish(zone, 0, 0);
                Ok(())
            }
        }
    }

    /// Pads and writes back the zone's data, flushes the device cache, finishes the device
    /// zone (unless the write-back filled it) and flushes the device cache again, so a
    /// completed finish is durable and a finish never lands before the data it closes; the
    /// zone is held ([`ZoneOp::Finishing`]) throughout.
    async fn finish(self: &Rc<Self>, zone: u32) -> Result<()> {
        let i = self.local(zone);
        let _hold = self.hold_zone(i, ZoneOp::Finishing);
        if self.zones.borrow()[i].error.is_some() {
            return self.finish_failed(zone).await;
        }
        let dirty = self.zones.borrow()[i].dirty_bytes() > 0;
        if dirty && self.activation_blocked(i) {
            return Err(self.too_many_active(zone));
        }
        self.wait_paddable(i, false).await;
        let target = {
            let mut zones = self.zones.borrow_mut();
            let z = &mut zones[i];
            self.pad_now(z);
            z.target = z.wp;
            z.wp
        };
        self.kick(zone);
        // An abandoned shard (closed without a sync) starts no write-back any more.
        self.wait_until(|s| {
            let z = &s.zones.borrow()[i];
            (z.device_wp >= target && !z.writeback_running())
                || z.error.is_some()
                || (z.waiting_for_tokens() && s.activation_blocked(i))
                || (s.closed.get() && !z.writeback_running())
        })
        .await;
        if let Some(e) = &self.zones.borrow()[i].error {
            return Err(e.clone());
        }
        if self.closed.get() && self.zones.borrow()[i].device_wp < target {
            return Err(ZiobError::Closed);
        }
        if self.zones.borrow()[i].device_wp < target {
            return Err(self.too_many_active(zone));
        }
        // A zone the write-back filled to capacity is already Full on the device (by its
        // writes): no finish to send, but its last writes may still sit in the device's
        // volatile cache.
        let device = self.zones.borrow()[i].device;
        if device != DeviceZone::Full {
            // The data first, then the finish: a device may carry out the finish (the write
            // pointer at capacity) and lose cached writes before it to a power cut, and the
            // zone would read zeros where they were with nothing to tell (the zone file layer
            // journals a sync's extents before the one cache flush that makes them durable,
            // and cuts files whose data a crash lost by the write pointer). Not needed when
            // an earlier flush made the zone durable up to its device write pointer.
            let durable = {
                let z = &self.zones.borrow()[i];
                z.durable_wp.is_some_and(|d| d >= z.device_wp)
            };
            if !durable {
                self.device_flush().await?;
            }
            self.device
                .zone_action(ZoneAction::Finish, ZoneTarget::One(zone))
                .await?;
            self.zones.borrow_mut()[i].device = DeviceZone::Full;
            self.release_tokens(device);
            self.stats.borrow_mut().s.device_zone_finishes += 1;
        }
        {
            let mut zones = self.zones.borrow_mut();
            let z = &mut zones[i];
            z.device = DeviceZone::Full;
            z.state = ZoneState::Full;
            // As on the device, a Full zone's write pointer is its capacity; past the data
            // it reads as zeros.
            z.wp = self.geometry.zone_capacity_bytes;
            z.device_wp = z.wp;
            z.issued_wp = z.wp;
        }
        self.publish_on_device(i);
        // A completed finish is durable: the data and the zone's Full state are on the
        // device, whichever way it became Full, and the device cache is flushed (a device
        // finish alone does not flush a volatile write cache on every device). If this
        // flush fails the zone is Full all the same, but the finish reports the error.
        self.device_flush().await
    }

    /// Finishes a zone with a kept write-back error: the device zone is finished at what the
    /// device has (its durable part stays), the buffered data the device does not have is
    /// dropped, and the zone becomes Full with no error. The caller holds the zone
    /// ([`ZoneOp::Finishing`]). If the device refuses the finish, nothing changes and its
    /// error is returned (the zone keeps its data and its error).
    async fn finish_failed(self: &Rc<Self>, zone: u32) -> Result<()> {
        let i = self.local(zone);
        // A write-back (its resync or retry wait) or device close still running ends first.
        self.wait_until(|s| !s.zones.borrow()[i].writeback_running())
            .await;
        let device = self.zones.borrow()[i].device;
        if device != DeviceZone::Full {
            // As `finish`: what the device has is made durable before the finish.
            self.device_flush().await?;
            self.device
                .zone_action(ZoneAction::Finish, ZoneTarget::One(zone))
                .await?;
            self.stats.borrow_mut().s.device_zone_finishes += 1;
        }
        let (lost, freed) = {
            let mut zones = self.zones.borrow_mut();
            let z = &mut zones[i];
            let lost = z.dirty_bytes();
            let freed = z.drop_chunks();
            z.device = DeviceZone::Full;
            z.state = ZoneState::Full;
            z.wp = self.geometry.zone_capacity_bytes;
            z.device_wp = z.wp;
            z.issued_wp = z.wp;
            z.completed_ahead.clear();
            z.target = 0;
            z.error = None;
            z.retries = 0;
            (lost, freed)
        };
        self.publish_on_device(i);
        self.token_queue.borrow_mut().retain(|&q| q != zone);
        {
            let mut zones = self.zones.borrow_mut();
            let z = &mut zones[i];
            if z.writeback == super::zone::Writeback::Queued {
                z.writeback = super::zone::Writeback::Idle;
            }
        }
        tracing::warn!(
            zone,
            lost_bytes = lost,
            "finished a zone whose write-back failed: the buffered data the device did not have is dropped"
        );
        self.release_tokens(device);
        self.release_memory(freed);
        self.device_flush().await
    }

    /// Resets the device zone, then drops the zone's buffered data. A failed device reset
    /// changes nothing (the error is returned; the zone keeps its data and its write-back
    /// resumes). The zone is held ([`ZoneOp::Resetting`]: no write-back starts, nothing else
    /// runs on it) throughout.
    async fn reset(self: &Rc<Self>, zone: u32) -> Result<()> {
        let i = self.local(zone);
        let mut hold = self.hold_zone(i, ZoneOp::Resetting);
        // A write-back in flight cannot be taken back: let it land, then reset over it.
        self.wait_until(|s| {
            let z = &s.zones.borrow()[i];
            !z.writeback_running() && z.readers == 0
        })
        .await;
        let (device, device_wp) = {
            let z = &self.zones.borrow()[i];
            (z.device, z.device_wp)
        };
        // Readers on other cores stop reading the zone from the device before it changes
        // there, and see that it did if they were reading already.
        let invalidated = self.on_device.invalidate(zone);
        if device != DeviceZone::Empty || device_wp > 0 {
            let res = self
                .device
                .zone_action(ZoneAction::Reset, ZoneTarget::One(zone))
                .await;
            if let Err(e) = res {
                // The zone keeps its data: readable again as before.
                drop(invalidated);
                self.publish_on_device(i);
                return Err(e.into());
            }
            self.stats.borrow_mut().s.device_zone_resets += 1;
        }
        self.token_queue.borrow_mut().retain(|&q| q != zone);
        let freed = {
            let mut zones = self.zones.borrow_mut();
            let z = &mut zones[i];
            z.writeback = super::zone::Writeback::Idle;
            let freed = z.drop_chunks();
            z.device = DeviceZone::Empty;
            z.state = ZoneState::Empty;
            z.wp = 0;
            z.device_wp = 0;
            z.issued_wp = 0;
            // Not counted on before a device flush: a reset may sit in the device's cache.
            z.durable_wp = None;
            z.resets += 1;
            z.durable_target = 0;
            z.completed_ahead.clear();
            z.target = 0; // an idle tick during the reset may have set it
            z.error = None;
            z.retries = 0;
            freed
        };
        hold.reset_done();
        // The device state changed first, then the resources: the counts never disagree.
        self.release_tokens(device);
        self.release_memory(freed);
        Ok(())
    }
}
