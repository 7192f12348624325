//! A buffer shard: the zones one core owns, their staging memory, write-back and reads.
//!
//! Everything here runs on the owning core; state sits in `RefCell`s that are never
//! borrowed across an `.await`. One [`Event`] per shard wakes whoever waits for progress
//! (memory freed, a write-back finished, a reset or finish done); waiters re-check their
//! condition after every wake-up.

mod policy;
mod writeback;
mod zone;

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use event_listener::Event;
use ziob_backends::{
    DeviceError, Geometry, IoOp, ZoneAction, ZoneInfo, ZoneState, ZoneTarget, ZonedDevice,
};
use ziob_runtime::DmaBuf;

use crate::config::ZiobConfig;
use crate::error::{Result, ZiobError};
use crate::logical;
use crate::placement::{owned_zones, resource_share};
use crate::stats::{ShardStats, StatsCell};
use zone::ZoneBuf;

/// One core's part of a ZIOB instance.
pub(crate) struct Shard<D: ZonedDevice> {
    core: usize,
    cores: usize,
    device: D,
    geometry: Geometry,
    buffered: bool,
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
    /// Zones waiting for a resource to start write-back, first come first served.
    token_queue: RefCell<VecDeque<u32>>,
    progress: Event,
    seq: Cell<u64>,
    stats: RefCell<StatsCell>,
    closed: Cell<bool>,
}

fn blocks(bytes: u64, bs: u64) -> u64 {
    bytes / bs
}

impl<D: ZonedDevice> Shard<D> {
    /// Builds the shard of `core` from the device's zone report.
    pub(crate) async fn new(
        core: usize,
        cores: usize,
        device: D,
        config: &ZiobConfig,
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
            zones: RefCell::new(zones),
            memory_used: Cell::new(0),
            open_max,
            active_max,
            open_used: Cell::new(open_used),
            active_used: Cell::new(active_used),
            token_queue: RefCell::new(VecDeque::new()),
            progress: Event::new(),
            seq: Cell::new(1),
            stats: RefCell::new(StatsCell::new(core, config.shard_budget_bytes)),
            closed: Cell::new(false),
        }))
    }

    fn local(&self, zone: u32) -> usize {
        debug_assert_eq!(zone as usize % self.cores, self.core);
        zone as usize / self.cores
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

    async fn wait_not_exclusive(&self, zone: u32) {
        let i = self.local(zone);
        self.wait_until(|s| !s.zones.borrow()[i].exclusive).await;
    }

    /// Waits until nothing holds the zone: no reset/finish, no large write streaming in.
    async fn wait_writable(&self, zone: u32) {
        let i = self.local(zone);
        self.wait_until(|s| {
            let z = &s.zones.borrow()[i];
            !z.exclusive && !z.streaming
        })
        .await;
    }

    /// Largest piece a write is taken in: half the budget in whole write-back units, so a
    /// write larger than the budget streams through it instead of failing.
    fn max_piece_bytes(&self) -> u64 {
        (self.budget_bytes / 2 / self.unit_bytes).max(1) * self.unit_bytes
    }

    // ---- writes ---------------------------------------------------------------------------

    /// Appends `data` to `zone`; returns the offset it was given (bytes from the zone start).
    /// The buffer comes back with the result.
    pub(crate) async fn append(self: &Rc<Self>, zone: u32, data: DmaBuf) -> (Result<u64>, DmaBuf) {
        if let Err(e) = self.check_zone(zone) {
            return (Err(e), data);
        }
        if !self.buffered {
            let (res, data) = self.device.append(zone, data).await;
            return (res.map_err(Into::into), data);
        }
        let res = self.write_inner(zone, None, &data, IoOp::Append).await;
        (res, data)
    }

    /// Writes `data` at `offset_bytes` of `zone`, which must be the logical write pointer.
    /// The buffer comes back with the result.
    pub(crate) async fn write_at(
        self: &Rc<Self>,
        zone: u32,
        offset: u64,
        data: DmaBuf,
    ) -> (Result<()>, DmaBuf) {
        if let Err(e) = self.check_zone(zone) {
            return (Err(e), data);
        }
        if !self.buffered {
            let (res, data) = self.device.write(zone, offset, data).await;
            return (res.map_err(Into::into), data);
        }
        let res = self
            .write_inner(zone, Some(offset), &data, IoOp::Write)
            .await;
        (res.map(|_| ()), data)
    }

    /// Checks a write against the zone as it is now; returns the new chunk capacities needed.
    fn admit(
        &self,
        zone: u32,
        offset: Option<u64>,
        len: u64,
        op: IoOp,
    ) -> Result<Option<Vec<u64>>> {
        let zones = self.zones.borrow();
        let z = &zones[self.local(zone)];
        let cap = self.geometry.zone_capacity_bytes;
        if let Some(e) = &z.error {
            return Err(e.clone());
        }
        ziob_backends::check_write_target(&self.geometry, op, zone, z.state, z.wp, offset, len)?;
        if len == 0 {
            return Err(
                DeviceError::InvalidArgument(format!("{op} of 0 bytes to zone {zone}")).into(),
            );
        }
        if z.tail_busy() {
            return Ok(None); // wait for the write-back holding the tail's memory
        }
        let room = z.tail_room();
        let mut rest = len.saturating_sub(room);
        let mut pos = z.wp + room.min(len);
        let mut caps = Vec::new();
        while rest > 0 {
            let c = self.unit_bytes.min(cap - pos);
            caps.push(c);
            rest -= c.min(rest);
            pos += c;
        }
        Ok(Some(caps))
    }

    async fn write_inner(
        self: &Rc<Self>,
        zone: u32,
        offset: Option<u64>,
        data: &[u8],
        op: IoOp,
    ) -> Result<u64> {
        if data.len() as u64 > self.max_piece_bytes() {
            return self.write_streamed(zone, offset, data, op).await;
        }
        self.write_piece(zone, offset, data, op, false).await
    }

    /// A write larger than [`Shard::max_piece_bytes`]: checked whole first (refused whole if
    /// it cannot fit), then taken in pieces while other writers of the zone wait, so it stays
    /// contiguous; memory is freed by write-back between pieces. If a piece fails (a
    /// write-back error, or the buffer's own limit) the pieces before it stay written.
    async fn write_streamed(
        self: &Rc<Self>,
        zone: u32,
        offset: Option<u64>,
        data: &[u8],
        op: IoOp,
    ) -> Result<u64> {
        let i = self.local(zone);
        self.wait_writable(zone).await;
        // Checks state, position and capacity for the whole write (memory comes per piece).
        self.admit(zone, offset, data.len() as u64, op)?;
        let start = self.zones.borrow()[i].wp;
        self.zones.borrow_mut()[i].streaming = true;
        let mut result = Ok(start);
        for piece in data.chunks(self.max_piece_bytes() as usize) {
            let at = self.zones.borrow()[i].wp;
            if let Err(e) = self
                .write_piece(zone, Some(at), piece, IoOp::Write, true)
                .await
            {
                result = Err(e);
                break;
            }
        }
        self.zones.borrow_mut()[i].streaming = false;
        self.notify();
        result
    }

    /// One write of at most [`Shard::max_piece_bytes`]. `holder`: the caller streams a large
    /// write into this zone and already holds it.
    async fn write_piece(
        self: &Rc<Self>,
        zone: u32,
        offset: Option<u64>,
        data: &[u8],
        op: IoOp,
        holder: bool,
    ) -> Result<u64> {
        let i = self.local(zone);
        let len = data.len() as u64;
        let mut reserved = 0u64;
        let result = loop {
            if holder {
                self.wait_not_exclusive(zone).await;
            } else {
                self.wait_writable(zone).await;
            }
            let caps = match self.admit(zone, offset, len, op) {
                Ok(Some(caps)) => caps,
                Ok(None) => {
                    self.wait_until(|s| !s.zones.borrow()[i].tail_busy()).await;
                    continue;
                }
                Err(e) => break Err(e),
            };
            let need: u64 = caps.iter().sum();
            if need > reserved {
                if let Err(e) = self.acquire_memory(zone, need - reserved).await {
                    break Err(e);
                }
                reserved = need;
                continue; // we may have waited: check the zone again
            }
            // Nothing awaited since `admit`: commit.
            let bufs = caps
                .iter()
                .map(|&c| (c, DmaBuf::fixed(c as usize)))
                .collect();
            self.release_memory(reserved - need);
            reserved = 0;
            let seq = self.seq.get();
            self.seq.set(seq + 1);
            let mut zones = self.zones.borrow_mut();
            let z = &mut zones[i];
            let at = z.wp;
            z.copy_in(data, bufs);
            let full = z.wp == self.geometry.zone_capacity_bytes;
            z.state = logical::after_write(z.state, full);
            z.last_write_seq = seq;
            z.last_write_at = Some(Instant::now());
            if full {
                z.target = z.wp;
            }
            let kick = full
                || z.chunks
                    .iter()
                    .any(|c| c.is_full() && c.end() > z.device_wp);
            drop(zones);
            self.stats.borrow_mut().s.bytes_written += len;
            if kick {
                self.kick(zone);
            }
            break Ok(at);
        };
        self.release_memory(reserved);
        result
    }

    /// Pads the zone's logical data with zeros to a block boundary (before a flush or finish);
    /// the write pointer moves to that boundary.
    async fn pad_to_block(self: &Rc<Self>, zone: u32) -> Result<()> {
        let i = self.local(zone);
        let bs = self.bs();
        let (wp, state) = {
            let z = &self.zones.borrow()[i];
            (z.wp, z.state)
        };
        if wp % bs == 0 || state == ZoneState::Full {
            return Ok(());
        }
        let pad = vec![0u8; (bs - wp % bs) as usize];
        self.write_inner_padding(zone, &pad).await
    }

    async fn write_inner_padding(self: &Rc<Self>, zone: u32, pad: &[u8]) -> Result<()> {
        // The padding always fits the tail chunk (chunk sizes are block multiples); it only
        // has to wait for a write-back holding the tail's memory.
        let i = self.local(zone);
        self.wait_until(|s| !s.zones.borrow()[i].tail_busy()).await;
        let mut zones = self.zones.borrow_mut();
        let z = &mut zones[i];
        if z.wp % self.bs() == 0 {
            return Ok(());
        }
        assert!(
            z.tail_room() >= pad.len() as u64,
            "padding fits the tail chunk"
        );
        z.copy_in(pad, Vec::new());
        let full = z.wp == self.geometry.zone_capacity_bytes;
        z.state = logical::after_write(z.state, full);
        Ok(())
    }

    // ---- memory ---------------------------------------------------------------------------

    fn release_memory(&self, bytes: u64) {
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
    async fn acquire_memory(self: &Rc<Self>, zone: u32, bytes: u64) -> Result<()> {
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
                return Ok(());
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
            let progress_possible = self.zones.borrow().iter().any(|z| z.writeback_running);
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

    // ---- reads ----------------------------------------------------------------------------

    /// Reads `len` bytes at `offset` of `zone`: from memory where the buffer holds the data,
    /// from the device below it; bytes past the logical write pointer read as zeros.
    pub(crate) async fn read(
        self: &Rc<Self>,
        zone: u32,
        offset: u64,
        len: usize,
    ) -> Result<DmaBuf> {
        self.check_zone(zone)?;
        let bs = self.bs();
        let end = offset + len as u64;
        self.geometry.check_read_end(zone, offset, len as u64)?;
        if !self.buffered {
            let (res, buf) = self
                .device
                .read(zone, offset, len, DmaBuf::with_capacity(len))
                .await;
            res?;
            return Ok(buf);
        }
        let i = self.local(zone);
        loop {
            self.wait_not_exclusive(zone).await;
            let mut out = DmaBuf::zeroed(len);
            let (mem_start, state) = {
                let zones = self.zones.borrow();
                let z = &zones[i];
                if z.in_memory(offset, end) {
                    z.copy_out(offset, &mut out).expect("checked in memory");
                    drop(zones);
                    self.stats.borrow_mut().s.read_hits += 1;
                    return Ok(out);
                }
                (z.chunks.front().map_or(z.wp, |c| c.start), z.state)
            };
            if state == ZoneState::Offline {
                return Err(DeviceError::Offline {
                    op: IoOp::Read,
                    zone,
                    offset_blocks: blocks(offset, bs),
                }
                .into());
            }
            if offset >= mem_start {
                // Part of the range is held by a write-back right now.
                self.wait_until(|s| s.zones.borrow()[i].in_memory(offset, end))
                    .await;
                continue;
            }
            // [offset, dev_end) from the device, the rest from memory.
            let dev_end = end.min(mem_start);
            let a = offset / bs * bs;
            let b = dev_end.div_ceil(bs) * bs;
            self.zones.borrow_mut()[i].readers += 1;
            let (res, dev) = self
                .device
                .read(
                    zone,
                    a,
                    (b - a) as usize,
                    DmaBuf::with_capacity((b - a) as usize),
                )
                .await;
            self.zones.borrow_mut()[i].readers -= 1;
            self.notify();
            res?;
            let n = (dev_end - offset) as usize;
            out[..n].copy_from_slice(&dev[(offset - a) as usize..(offset - a) as usize + n]);
            if dev_end < end {
                let zones = self.zones.borrow();
                if zones[i].copy_out(dev_end, &mut out[n..]).is_none() {
                    continue; // chunks moved meanwhile (evicted or held): read again
                }
            }
            self.stats.borrow_mut().s.read_misses += 1;
            return Ok(out);
        }
    }

    // ---- flush ----------------------------------------------------------------------------

    /// Whether zone `i` needs an active resource this core cannot get: its device zone is
    /// Empty, every active resource of the core is held, and no holder is on its way to
    /// release one (filling to capacity, or being finished or reset).
    fn activation_blocked(&self, i: usize) -> bool {
        let zones = self.zones.borrow();
        if zones[i].device != zone::DeviceZone::Empty {
            return false;
        }
        let Some(max) = self.active_max else {
            return false;
        };
        let cap = self.geometry.zone_capacity_bytes;
        self.active_used.get() >= max
            && !zones.iter().any(|z| {
                z.device.is_active() && (z.exclusive || (z.wp == cap && z.device_wp < cap))
            })
    }

    fn too_many_active(&self, zone: u32) -> ZiobError {
        DeviceError::TooManyActive {
            zone,
            max_active: self.active_max.unwrap_or(u32::MAX),
        }
        .into()
    }

    /// Writes the zone's buffered data to the device (padding a partial block) and waits for
    /// it, without the device cache flush.
    async fn writeback_zone(self: &Rc<Self>, zone: u32) -> Result<()> {
        let i = self.local(zone);
        self.wait_writable(zone).await;
        if let Some(e) = &self.zones.borrow()[i].error {
            return Err(e.clone());
        }
        let dirty = self.zones.borrow()[i].dirty_bytes() > 0;
        if dirty && self.activation_blocked(i) {
            return Err(self.too_many_active(zone));
        }
        self.pad_to_block(zone).await?;
        let (target, generation) = {
            let mut zones = self.zones.borrow_mut();
            let z = &mut zones[i];
            z.target = z.target.max(z.wp);
            (z.wp, z.generation)
        };
        self.kick(zone);
        self.wait_until(|s| {
            let z = &s.zones.borrow()[i];
            z.device_wp >= target
                || z.error.is_some()
                || z.generation != generation
                || (z.waiting_for_tokens && s.activation_blocked(i))
        })
        .await;
        let z = &self.zones.borrow()[i];
        match &z.error {
            Some(e) => Err(e.clone()),
            None if z.device_wp < target && z.generation == generation => {
                Err(self.too_many_active(zone))
            }
            None => Ok(()),
        }
    }

    /// Makes `zone`'s data durable: write-back, then the device's cache flush.
    pub(crate) async fn flush_zone(self: &Rc<Self>, zone: u32) -> Result<()> {
        self.check_zone(zone)?;
        if self.buffered {
            self.writeback_zone(zone).await?;
        }
        self.device_flush().await
    }

    async fn device_flush(&self) -> Result<()> {
        self.device.flush().await?;
        self.stats.borrow_mut().s.device_flushes += 1;
        Ok(())
    }

    /// Makes every zone of this shard durable. Reports the first error after trying all.
    pub(crate) async fn sync(self: &Rc<Self>) -> Result<()> {
        let mut first_err = None;
        if self.buffered {
            let dirty: Vec<u32> = self
                .zones
                .borrow()
                .iter()
                .filter(|z| z.dirty_bytes() > 0 || z.error.is_some())
                .map(|z| z.index)
                .collect();
            let results =
                futures::future::join_all(dirty.into_iter().map(|z| self.writeback_zone(z))).await;
            first_err = results.into_iter().find_map(|r| r.err());
        }
        let flushed = self.device_flush().await;
        match (first_err, flushed) {
            (Some(e), _) => Err(e),
            (None, r) => r,
        }
    }

    // ---- zone management ------------------------------------------------------------------

    /// Applies a zone management action to one zone.
    pub(crate) async fn action(self: &Rc<Self>, zone: u32, action: ZoneAction) -> Result<()> {
        self.check_zone(zone)?;
        if !self.buffered {
            return Ok(self
                .device
                .zone_action(action, ZoneTarget::One(zone))
                .await?);
        }
        let i = self.local(zone);
        self.wait_writable(zone).await;
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
                Ok(())
            }
        }
    }

    /// Applies `action` to every owned zone it applies to (Select All semantics).
    pub(crate) async fn action_all(self: &Rc<Self>, action: ZoneAction) -> Result<()> {
        let pick: Vec<u32> = self
            .zones
            .borrow()
            .iter()
            .filter(|z| {
                use ZoneState::*;
                match action {
                    ZoneAction::Open => z.state == Closed,
                    ZoneAction::Close => z.state.is_open(),
                    ZoneAction::Finish => z.state.is_active(),
                    ZoneAction::Reset => z.state.is_active() || z.state == Full,
                    ZoneAction::Offline => z.state == ReadOnly,
                }
            })
            .map(|z| z.index)
            .collect();
        for z in pick {
            self.action(z, action).await?;
        }
        Ok(())
    }

    async fn finish(self: &Rc<Self>, zone: u32) -> Result<()> {
        let i = self.local(zone);
        self.zones.borrow_mut()[i].exclusive = true;
        let res = self.finish_exclusive(zone).await;
        self.zones.borrow_mut()[i].exclusive = false;
        self.notify();
        res
    }

    async fn finish_exclusive(self: &Rc<Self>, zone: u32) -> Result<()> {
        let i = self.local(zone);
        if let Some(e) = &self.zones.borrow()[i].error {
            return Err(e.clone());
        }
        let dirty = self.zones.borrow()[i].dirty_bytes() > 0;
        if dirty && self.activation_blocked(i) {
            return Err(self.too_many_active(zone));
        }
        self.pad_to_block(zone).await?;
        let target = {
            let mut zones = self.zones.borrow_mut();
            let z = &mut zones[i];
            z.target = z.wp;
            z.wp
        };
        self.kick(zone);
        self.wait_until(|s| {
            let z = &s.zones.borrow()[i];
            (z.device_wp >= target && !z.writeback_running)
                || z.error.is_some()
                || (z.waiting_for_tokens && s.activation_blocked(i))
        })
        .await;
        if let Some(e) = &self.zones.borrow()[i].error {
            return Err(e.clone());
        }
        if self.zones.borrow()[i].device_wp < target {
            return Err(self.too_many_active(zone));
        }
        let device = self.zones.borrow()[i].device;
        if device != zone::DeviceZone::Full {
            self.device
                .zone_action(ZoneAction::Finish, ZoneTarget::One(zone))
                .await?;
            self.zones.borrow_mut()[i].device = zone::DeviceZone::Full;
            self.release_tokens(device);
            self.stats.borrow_mut().s.device_zone_finishes += 1;
        }
        let mut zones = self.zones.borrow_mut();
        let z = &mut zones[i];
        z.device = zone::DeviceZone::Full;
        z.state = ZoneState::Full;
        // As on the device, a Full zone's write pointer is its capacity; past the data it
        // reads as zeros.
        z.wp = self.geometry.zone_capacity_bytes;
        z.device_wp = z.wp;
        z.issued_wp = z.wp;
        Ok(())
    }

    async fn reset(self: &Rc<Self>, zone: u32) -> Result<()> {
        let i = self.local(zone);
        let target = {
            let mut zones = self.zones.borrow_mut();
            let z = &mut zones[i];
            z.exclusive = true;
            z.resetting = true;
            z.generation += 1;
            std::mem::take(&mut z.target)
        };
        // A write-back in flight cannot be taken back: let it land, then reset over it.
        self.wait_until(|s| {
            let z = &s.zones.borrow()[i];
            !z.writeback_running && z.readers == 0
        })
        .await;
        let res = self.reset_exclusive(zone).await;
        let mut zones = self.zones.borrow_mut();
        zones[i].exclusive = false;
        zones[i].resetting = false;
        if res.is_err() {
            // The reset did not happen: the zone keeps its data, and its write-back resumes.
            zones[i].target = target;
        }
        drop(zones);
        self.notify();
        if res.is_err() {
            self.kick(zone);
        }
        res
    }

    /// Resets the device zone, then drops the zone's buffered data. A failed device reset
    /// changes nothing (the error is returned). No write-back starts meanwhile: the zone is
    /// `resetting` (see `kick`) and exclusive (no pressure write-back).
    async fn reset_exclusive(self: &Rc<Self>, zone: u32) -> Result<()> {
        let i = self.local(zone);
        let (device, device_wp) = {
            let z = &self.zones.borrow()[i];
            (z.device, z.device_wp)
        };
        if device != zone::DeviceZone::Empty || device_wp > 0 {
            self.device
                .zone_action(ZoneAction::Reset, ZoneTarget::One(zone))
                .await?;
            self.stats.borrow_mut().s.device_zone_resets += 1;
        }
        self.token_queue.borrow_mut().retain(|&q| q != zone);
        let freed = {
            let mut zones = self.zones.borrow_mut();
            let z = &mut zones[i];
            z.waiting_for_tokens = false;
            let freed = z.drop_chunks();
            z.device = zone::DeviceZone::Empty;
            z.state = ZoneState::Empty;
            z.wp = 0;
            z.device_wp = 0;
            z.issued_wp = 0;
            z.completed_ahead.clear();
            z.error = None;
            freed
        };
        // The device state changed first, then the resources: the counts never disagree.
        self.release_tokens(device);
        self.release_memory(freed);
        Ok(())
    }

    // ---- reports and stats ----------------------------------------------------------------

    /// The zones this shard owns within `[first, first + count)`, as applications see them.
    pub(crate) async fn report(&self, first: u32, count: u32) -> Result<Vec<ZoneInfo>> {
        if !self.buffered {
            let all = self.device.report_zones(first, count).await?;
            return Ok(all
                .into_iter()
                .filter(|z| z.index as usize % self.cores == self.core)
                .collect());
        }
        let last = first.saturating_add(count);
        Ok(self
            .zones
            .borrow()
            .iter()
            .filter(|z| z.index >= first && z.index < last)
            .map(|z| ZoneInfo {
                index: z.index,
                start_bytes: u64::from(z.index) * self.geometry.zone_size_bytes,
                capacity_bytes: self.geometry.zone_capacity_bytes,
                write_pointer_bytes: z.wp,
                state: z.state,
            })
            .collect())
    }

    /// A snapshot of the counters.
    pub(crate) fn stats(&self) -> ShardStats {
        let mut s = self.stats.borrow().snapshot();
        let zones = self.zones.borrow();
        s.dirty_bytes = zones.iter().map(|z| z.dirty_bytes()).sum();
        s.clean_bytes = zones.iter().map(|z| z.clean_bytes()).sum();
        s.memory_used_bytes = self.memory_used.get();
        debug_assert!(s.memory_used_bytes >= zones.iter().map(|z| z.memory_bytes()).sum::<u64>());
        s
    }

    /// A one-line-per-zone dump of the shard's bookkeeping, for diagnosing a stuck test.
    pub(crate) fn debug_state(&self) -> String {
        let mut out = format!(
            "core {}: open {}/{:?} active {}/{:?} memory {}/{} queue {:?}\n",
            self.core,
            self.open_used.get(),
            self.open_max,
            self.active_used.get(),
            self.active_max,
            self.memory_used.get(),
            self.budget_bytes,
            self.token_queue.borrow()
        );
        for z in self.zones.borrow().iter() {
            out += &format!(
                "  zone {} {:?} wp {} device {:?} device_wp {} issued {} target {} running {} waiting {} exclusive {} streaming {} error {}\n",
                z.index, z.state, z.wp, z.device, z.device_wp, z.issued_wp, z.target,
                z.writeback_running, z.waiting_for_tokens, z.exclusive, z.streaming, z.error.is_some()
            );
        }
        out
    }

    /// Memory charged against the budget right now.
    pub(crate) fn memory_used_bytes(&self) -> u64 {
        self.memory_used.get()
    }

    /// Stops background work (the idle write-back ticker) and new write-backs.
    pub(crate) fn close(&self) {
        self.closed.set(true);
        self.notify();
    }

    /// After [`Shard::close`]: waits until no write-back or device close of this shard is in
    /// flight, so the shard issues nothing to the device any more.
    pub(crate) async fn quiesce(&self) {
        self.wait_until(|s| s.zones.borrow().iter().all(|z| !z.writeback_running))
            .await;
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
