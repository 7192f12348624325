//! A buffer shard: the zones one core owns, their staging memory, write-back and reads.
//!
//! Everything here runs on the owning core; state sits in `RefCell`s that are never
//! borrowed across an `.await`. One [`Event`] per shard wakes whoever waits for progress
//! (memory freed, a write-back finished, a reset or finish done); waiters re-check their
//! condition after every wake-up.
//!
//! Modules by job: `write` (appends, writes, padding), `memory` (the budget), `read`,
//! `flush` (flush, sync, idle write-back), `group_commit` (shared device cache flushes), `actions` (zone management), `report` (reports,
//! stats), `writeback` (the write-back tasks, decisions in `policy`), `zone` (one zone's
//! buffer, pure data) and `guards` (what an operation holds across an `.await`, given back
//! on drop).
//!
//! # Cancel safety
//! Any shard future may be dropped at any await point, whichever core its caller is on:
//! state an operation holds across an await (the zone operation, a device read in flight,
//! reserved memory, the call itself) is held by a guard that gives it back on drop. Work
//! that must not stop half-way (zone actions, a write streamed in pieces) runs as a task of
//! its own that the caller awaits ([`run_to_completion`]), so dropping the caller does not
//! stop it. Everything else commits in one step with no await after its decision.

mod actions;
mod flush;
mod group_commit;
mod guards;
mod memory;
mod policy;
mod read;
mod report;
mod resync;
mod write;
mod writeback;
mod zone;

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;

use event_listener::Event;
use ziob_backends::{Geometry, ZonedDevice};

use crate::config::ZiobConfig;
use crate::error::{Result, ZiobError};
use crate::metrics::StatsCell;
use crate::on_device::OnDevice;
use crate::placement::{owned_zones, resource_share};
use guards::CallGuard;
use zone::{ZoneBuf, ZoneOp};

/// One core's part of a ZIOB instance.
pub(crate) struct Shard<D: ZonedDevice> {
    core: usize,
    cores: usize,
    device: D,
    geometry: Geometry,
    buffered: bool,
    /// What every core may read of this shard's zones straight from the device (published
    /// here, by the owner).
    on_device: Arc<OnDevice>,
    unit_bytes: u64,
    budget_bytes: u64,
    /// Zones owned by this core, at index `zone / cores`.
    zones: RefCell<Vec<ZoneBuf>>,
    memory_used: Cell<u64>,
    /// This core's share of the device's open / active resources (`None` = unlimited).
    open_max: Option<u32>,
    active_max: Option<u32>,
    open_used: Cell<u32>,
    active_used: Cell<u32>,
    /// Device cache flushes, shared by the callers that wait for the same one.
    flush_group: group_commit::FlushGroupCell,
    /// Zones waiting for a resource to start write-back, first come first served.
    token_queue: RefCell<VecDeque<u32>>,
    progress: Event,
    seq: Cell<u64>,
    stats: RefCell<StatsCell>,
    /// No new calls are admitted ([`Shard::enter`]): the instance is closing.
    closing: Cell<bool>,
    /// Calls admitted and not finished (counted by [`CallGuard`]s).
    calls: Cell<u64>,
    /// No background work starts any more (idle ticker, write-back).
    closed: Cell<bool>,
}

/// Runs `fut` as a task of its own on this core and waits for its output: dropping the
/// waiting future does not stop the task. For work that must not stop half-way. Fails with
/// [`ZiobError::Aborted`] if the task ends without an output (it panicked, or the core
/// stopped).
pub(crate) async fn run_to_completion<T: 'static>(
    fut: impl Future<Output = T> + 'static,
) -> Result<T> {
    let (tx, rx) = futures::channel::oneshot::channel();
    ziob_runtime::spawn(async move {
        let _ = tx.send(fut.await);
    })
    .detach();
    rx.await.map_err(|_| ZiobError::Aborted {
        core: ziob_runtime::core_id(),
    })
}

impl<D: ZonedDevice> Shard<D> {
    /// Builds the shard of `core` from the device's zone report, publishing what the device
    /// has of its zones to `on_device`.
    pub(crate) async fn new(
        core: usize,
        cores: usize,
        device: D,
        config: &ZiobConfig,
        on_device: Arc<OnDevice>,
    ) -> Result<Rc<Shard<D>>> {
        let geometry = *device.geometry();
        config.validate(&geometry)?;
        let open_max = resource_share(geometry.max_open_zones, core, cores);
        let active_max = resource_share(geometry.max_active_zones, core, cores);
        if config.buffered && (open_max == Some(0) || active_max == Some(0)) {
            return Err(ZiobError::Config(format!(
                "the device allows {} open and {} active zones, fewer than the {cores} cores sharing them; use at most that many cores",
                geometry.max_open_zones.map_or("unlimited".into(), |v| v.to_string()),
                geometry.max_active_zones.map_or("unlimited".into(), |v| v.to_string()),
            )));
        }
        let report = device.report_all().await?;
        let mut zones = Vec::new();
        let (mut open_used, mut active_used) = (0, 0);
        for z in owned_zones(geometry.zone_count, core, cores) {
            let info = report[z as usize];
            let zb = ZoneBuf::from_device(z, info.state, info.write_pointer_bytes);
            open_used += u32::from(zb.device == zone::DeviceZone::Open);
            active_used += u32::from(zb.device.is_active());
            if config.buffered && info.state != ziob_backends::ZoneState::Offline {
                on_device.publish(z, zb.on_device_end(), zb.mem_start());
            }
            zones.push(zb);
        }
        Ok(Rc::new(Shard {
            core,
            cores,
            unit_bytes: config.unit_bytes(&geometry)?,
            budget_bytes: config.shard_budget_bytes,
            device,
            geometry,
            buffered: config.buffered,
            on_device,
            zones: RefCell::new(zones),
            memory_used: Cell::new(0),
            open_max,
            active_max,
            open_used: Cell::new(open_used),
            active_used: Cell::new(active_used),
            flush_group: RefCell::new(group_commit::FlushGroup::new()),
            token_queue: RefCell::new(VecDeque::new()),
            progress: Event::new(),
            seq: Cell::new(1),
            stats: RefCell::new(StatsCell::new(core, config.shard_budget_bytes)),
            closing: Cell::new(false),
            calls: Cell::new(0),
            closed: Cell::new(false),
        }))
    }

    fn local(&self, zone: u32) -> usize {
        debug_assert_eq!(zone as usize % self.cores, self.core);
        zone as usize / self.cores
    }

    /// Tells every core how much of local zone `i` the device holds ([`OnDevice`]);
    /// a pass-through shard keeps no `device_wp` and publishes nothing.
    fn publish_on_device(&self, i: usize) {
        if self.buffered {
            let z = &self.zones.borrow()[i];
            self.on_device
                .publish(z.index, z.on_device_end(), z.mem_start());
        }
    }

    fn check_zone(&self, zone: u32) -> Result<()> {
        Ok(self.geometry.check_zone(zone)?)
    }

    fn bs(&self) -> u64 {
        self.geometry.block_size_bytes
    }

    fn notify(&self) {
        self.check_tokens();
        self.progress.notify(usize::MAX);
    }

    /// Debug builds: the counted resources match the device states the shard believes in.
    fn check_tokens(&self) {
        if cfg!(debug_assertions) {
            if let Ok(zones) = self.zones.try_borrow() {
                let open = zones
                    .iter()
                    .filter(|z| z.device == zone::DeviceZone::Open)
                    .count();
                let active = zones.iter().filter(|z| z.device.is_active()).count();
                assert_eq!(
                    (open as u32, active as u32),
                    (self.open_used.get(), self.active_used.get()),
                    "resource tokens out of step with device states:\n{}",
                    self.debug_state()
                );
            }
        }
    }

    /// Waits until `ready` holds, re-checking after every progress event.
    async fn wait_until(&self, mut ready: impl FnMut(&Self) -> bool) {
        loop {
            if ready(self) {
                return;
            }
            let listener = self.progress.listen();
            if ready(self) {
                return;
            }
            listener.await;
        }
    }

    /// Waits until no operation holds zone `i` (no reset, finish or streamed write).
    async fn wait_idle(&self, i: usize) {
        self.wait_until(|s| s.zones.borrow()[i].op == ZoneOp::Idle)
            .await;
    }

    /// Counts a call that continues on its own (a task started for an admitted call), so
    /// that closing waits for it too.
    fn hold_call(self: &Rc<Self>) -> CallGuard<D> {
        self.calls.set(self.calls.get() + 1);
        CallGuard::counted(self.clone())
    }

    /// Closes the shard in order: refuses new calls, waits for the admitted ones (their
    /// tasks included), syncs, then stops background work and waits for the write-backs in
    /// flight. Returns the sync's result.
    pub(crate) async fn close_gracefully(self: &Rc<Self>) -> Result<()> {
        self.closing.set(true);
        self.wait_until(|s| s.calls.get() == 0).await;
        let res = self.sync().await;
        self.close();
        self.quiesce().await;
        res
    }

    /// Refuses new calls and stops background work (the idle write-back ticker) and new
    /// write-backs.
    pub(crate) fn close(&self) {
        self.closing.set(true);
        self.closed.set(true);
        self.notify();
    }

    /// After [`Shard::close`]: waits until no write-back or device close of this shard is in
    /// flight, so the shard issues nothing to the device any more.
    pub(crate) async fn quiesce(&self) {
        self.wait_until(|s| s.zones.borrow().iter().all(|z| !z.writeback_running()))
            .await;
    }
}
