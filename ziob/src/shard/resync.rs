//! Putting the buffer's view of a device zone back in step with the device after a device
//! operation of the buffer's own failed (a write-back or a close of the device zone).
//!
//! A failed device op may have changed the zone or not (the first write of an Empty zone
//! opens it only if it got that far), so the buffer no longer knows the zone's device state,
//! its device write pointer or which resources it holds. Guessing wrong wedges the shard: a
//! zone counted as Open that the device has Empty holds this core's open resource for good,
//! and every other zone's write-back (so every flush, sync and close, and every writer
//! waiting for memory) waits for it. So the zone is read back with a Report Zones and the
//! buffer takes the device's word. The zone keeps its error (and the data the device does
//! not have) until it is reset.

use std::rc::Rc;

use ziob_backends::{ZoneInfo, ZonedDevice};

use super::zone::DeviceZone;
use super::Shard;

/// Report Zones attempts before the buffer gives up resynchronising a zone (then its view
/// stays as it was until the zone is reset, which puts both back to Empty).
const REPORT_ATTEMPTS: u32 = 3;

impl<D: ZonedDevice> Shard<D> {
    /// Reads zone `zone` back from the device and makes the buffer's view of it agree.
    ///
    /// The caller holds the zone's write-back slot (`Writeback::Running`) with nothing of
    /// the zone in flight, so no write-back, device close or reset of the zone runs
    /// meanwhile. Returns whether the zone was read back.
    pub(super) async fn resync_device_zone(self: &Rc<Self>, zone: u32) -> bool {
        let mut last_error = None;
        for _ in 0..REPORT_ATTEMPTS {
            match self.device.report_zones(zone, 1).await {
                Ok(infos) => match infos.into_iter().find(|z| z.index == zone) {
                    Some(info) => {
                        self.adopt_device_view(zone, &info);
                        return true;
                    }
                    None => last_error = Some("the report did not include the zone".into()),
                },
                Err(e) => last_error = Some(e.to_string()),
            }
        }
        tracing::warn!(
            zone,
            error = last_error.unwrap_or_default(),
            "could not read the zone back from the device after a failed write-back; its state stays as the buffer believes until a reset"
        );
        false
    }

    /// Takes the device's report of a zone as the buffer's view of it: device state, device
    /// write pointer (what the device has of the buffered data) and the resources held.
    fn adopt_device_view(self: &Rc<Self>, zone: u32, info: &ZoneInfo) {
        let i = self.local(zone);
        let (before, after) = {
            let mut zones = self.zones.borrow_mut();
            let z = &mut zones[i];
            let before = z.device;
            let after = DeviceZone::from_state(info.state);
            let device_wp = match after {
                DeviceZone::Empty => 0,
                // Full (or Read Only, Offline): no write pointer to go by; what completed is
                // what the buffer knows the device has.
                DeviceZone::Full => z.device_wp,
                DeviceZone::Open | DeviceZone::Closed => info.write_pointer_bytes,
            }
            .min(z.wp);
            if (before, z.device_wp) != (after, device_wp) {
                tracing::info!(
                    zone,
                    believed = ?before,
                    believed_wp = z.device_wp,
                    device = ?after,
                    device_wp,
                    "resynchronised a zone with the device after a failed device op"
                );
            }
            z.device = after;
            z.device_wp = device_wp;
            z.durable_wp = z.durable_wp.map(|d| d.min(device_wp));
            // Nothing is in flight: the next write-back (after a reset) starts here.
            z.issued_wp = device_wp;
            z.completed_ahead.clear();
            (before, after)
        };
        self.publish_on_device(i);
        let count = |d: DeviceZone| (u32::from(d == DeviceZone::Open), u32::from(d.is_active()));
        let (open_before, active_before) = count(before);
        let (open_after, active_after) = count(after);
        self.open_used
            .set(self.open_used.get() - open_before + open_after);
        self.active_used
            .set(self.active_used.get() - active_before + active_after);
        self.notify();
        self.wake_token_queue();
    }
}
