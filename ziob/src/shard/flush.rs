//! Flush and sync: write a zone's buffered data back (padding its partial last block), wait
//! for it, then flush the device's cache (a zone flush whose write-back continued a durable
//! prefix with durable writes needs none); and the idle write-back ticker.

use std::rc::Rc;
use std::time::{Duration, Instant};

use ziob_backends::{DeviceError, ZonedDevice};

use super::zone::DeviceZone;
use super::Shard;
use crate::error::{Result, ZiobError};
use crate::metrics::OpKind;
use crate::metrics::OpTimer;

impl<D: ZonedDevice> Shard<D> {
    /// Whether zone `i` needs an active resource this core cannot get: its device zone is
    /// Empty, every active resource of the core is held, and no holder is on its way to
    /// release one (filling to capacity, or being finished or reset).
    pub(super) fn activation_blocked(&self, i: usize) -> bool {
        let zones = self.zones.borrow();
        if zones[i].device != DeviceZone::Empty {
            return false;
        }
        let Some(max) = self.active_max else {
            return false;
        };
        let cap = self.geometry.zone_capacity_bytes;
        self.active_used.get() >= max
            && !zones.iter().any(|z| {
                z.device.is_active() && (z.exclusive() || (z.wp == cap && z.device_wp < cap))
            })
    }

    pub(super) fn too_many_active(&self, zone: u32) -> ZiobError {
        DeviceError::TooManyActive {
            zone,
            max_active: self.active_max.unwrap_or(u32::MAX),
        }
        .into()
    }

    /// Writes the zone's buffered data to the device (padding a partial block) and waits for
    /// it, without the device cache flush. With `durable`, the write-backs up to the padded
    /// end are durable writes (on a device that has them). Returns the padded end and the
    /// zone's generation when it was decided.
    ///
    /// The padding is decided and applied in one step once nothing holds the zone and no
    /// write-back holds its tail, and the flush then waits for exactly the padded end: data
    /// appended meanwhile is neither split nor followed by zeros.
    async fn writeback_zone(self: &Rc<Self>, zone: u32, durable: bool) -> Result<(u64, u64)> {
        loop {
            if let Some(done) = self.writeback_zone_once(zone, durable).await? {
                return Ok(done);
            }
        }
    }

    /// One try of [`Shard::writeback_zone`]: `None` if a reset began meanwhile and failed
    /// (the zone kept its data, which must be written back again).
    async fn writeback_zone_once(
        self: &Rc<Self>,
        zone: u32,
        durable: bool,
    ) -> Result<Option<(u64, u64)>> {
        let i = self.local(zone);
        self.wait_paddable(i, true).await;
        // From here to the kick nothing awaits.
        if let Some(e) = &self.zones.borrow()[i].error {
            return Err(e.clone());
        }
        let dirty = self.zones.borrow()[i].dirty_bytes() > 0;
        if dirty && self.activation_blocked(i) {
            return Err(self.too_many_active(zone));
        }
        let (target, generation, resets) = {
            let mut zones = self.zones.borrow_mut();
            let z = &mut zones[i];
            self.pad_now(z);
            z.target = z.target.max(z.wp);
            // Durable write-backs for at most one write-back unit: for more, writes and one
            // cache flush cost less than a durable write each.
            if durable && z.wp - z.device_wp <= self.unit_bytes {
                z.durable_target = z.durable_target.max(z.wp);
            }
            (z.wp, z.generation, z.resets)
        };
        self.kick(zone);
        // An abandoned shard (closed without a sync) starts no write-back any more.
        self.wait_until(|s| {
            let z = &s.zones.borrow()[i];
            z.device_wp >= target
                || z.error.is_some()
                || z.generation != generation
                || (z.waiting_for_tokens() && s.activation_blocked(i))
                || s.closed.get()
        })
        .await;
        if self.zones.borrow()[i].generation != generation {
            // A reset began (its write-back wait may have stopped ours). Once it ends: if it
            // failed, the zone kept its data and nothing promises it was written back, so
            // try again; if it succeeded, the data is gone.
            self.wait_paddable(i, true).await;
            let z = &self.zones.borrow()[i];
            if z.resets == resets && z.device_wp < target {
                return Ok(None);
            }
            return Ok(Some((target, generation)));
        }
        let z = &self.zones.borrow()[i];
        match &z.error {
            Some(e) => Err(e.clone()),
            None if z.device_wp < target && self.closed.get() => Err(ZiobError::Closed),
            None if z.device_wp < target => Err(self.too_many_active(zone)),
            None => Ok(Some((target, generation))),
        }
    }

    /// Makes `zone`'s data durable: write-back, then the device's cache flush — unless the
    /// device has durable writes (Force Unit Access) and the write-back made the zone
    /// durable up to the padded end by itself: its data before the write-back was durable
    /// already (an earlier flush), and the write-back's durable writes continued it.
    ///
    /// Cancel safety: a dropped flush may have padded the zone's partial block and started
    /// its write-back (which goes on); nothing is left held, but nothing is promised durable.
    pub(crate) async fn flush_zone(self: &Rc<Self>, zone: u32) -> Result<()> {
        let _timer = OpTimer::start(&self.stats, OpKind::Flush);
        self.check_zone(zone)?;
        if self.buffered {
            let (end, generation) = self
                .writeback_zone(zone, self.device.has_durable_writes())
                .await?;
            let z = &self.zones.borrow()[self.local(zone)];
            if z.generation == generation && z.durable_wp.is_some_and(|d| d >= end) {
                return Ok(());
            }
        }
        self.device_flush().await
    }

    /// Writes `zone`'s buffered data to the device (padding its partial block) and waits for
    /// it, without the device's cache flush: the data is on the device, durable after a later
    /// [`Shard::device_flush`] of any core. Pass-through: nothing to do (an append is on the
    /// device when it returns). Cancel safety as [`Shard::flush_zone`].
    pub(crate) async fn write_back(self: &Rc<Self>, zone: u32) -> Result<()> {
        let _timer = OpTimer::start(&self.stats, OpKind::WriteBack);
        self.check_zone(zone)?;
        if self.buffered {
            self.writeback_zone(zone, false).await?;
        }
        Ok(())
    }

    /// Makes every zone of this shard durable. Zones with a kept write-back error and data
    /// the device does not have are reported together in [`ZiobError::ZonesFailed`]; they do
    /// not stop the others' write-back nor the device cache flush. Any other error (the
    /// device flush's first) takes precedence. Cancel safety as [`Shard::flush_zone`].
    pub(crate) async fn sync(self: &Rc<Self>) -> Result<()> {
        let _timer = OpTimer::start(&self.stats, OpKind::Sync);
        let mut other_err = None;
        let mut failed: Vec<(u32, ZiobError)> = Vec::new();
        if self.buffered {
            let dirty: Vec<u32> = self
                .zones
                .borrow()
                .iter()
                .filter(|z| z.dirty_bytes() > 0)
                .map(|z| z.index)
                .collect();
            let results = futures::future::join_all(
                dirty
                    .into_iter()
                    .map(|z| async move { (z, self.writeback_zone(z, false).await) }),
            )
            .await;
            for (zone, r) in results {
                match r {
                    Ok(_) => {}
                    Err(e @ ZiobError::Writeback { .. }) => failed.push((zone, e)),
                    Err(e) => {
                        other_err.get_or_insert(e);
                    }
                }
            }
        }
        self.device_flush().await?;
        if let Some(e) = other_err {
            return Err(e);
        }
        if failed.is_empty() {
            return Ok(());
        }
        failed.sort_by_key(|(zone, _)| *zone);
        Err(ZiobError::ZonesFailed {
            zones: failed.iter().map(|(zone, _)| *zone).collect(),
            detail: failed
                .iter()
                .map(|(_, e)| e.to_string())
                .collect::<Vec<_>>()
                .join("; "),
        })
    }

    /// Writes back the whole blocks of zones idle for `idle`; runs until the shard closes.
    pub(crate) async fn idle_ticker(self: Rc<Self>, idle: Duration) {
        let period = (idle / 2).max(Duration::from_millis(1));
        while !self.closed.get() {
            if ziob_runtime::sleep(period).await.is_err() || self.closed.get() {
                return;
            }
            let now = Instant::now();
            let idle_zones: Vec<u32> = self
                .zones
                .borrow_mut()
                .iter_mut()
                .filter(|z| {
                    z.dirty_bytes() >= self.geometry.block_size_bytes
                        && z.last_write_at
                            .is_some_and(|t| now.duration_since(t) >= idle)
                })
                .map(|z| {
                    z.target = z.target.max(z.wp);
                    z.index
                })
                .collect();
            for z in idle_zones {
                self.kick(z);
            }
        }
    }
}
