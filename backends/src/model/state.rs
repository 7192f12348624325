//! Zone states and the one transition engine, [`ZoneTable`], shared by every backend that
//! tracks zone state itself (mem, emu, nil).
//!
//! The table models the controller: backends keep it behind one `std::sync::Mutex`, hold the
//! lock only for a table call (never across an `.await`) and do their data I/O outside it.
//! A write *reserves* its range at the write pointer ([`ZoneTable::begin_write`]), the backend
//! moves the data, then reports the outcome ([`ZoneTable::complete`]).

use crate::model::error::{DeviceError, IoOp, Result};
use crate::model::geometry::Geometry;
// The vocabulary lives in `model::zone`; re-exported here for the paths backends use.
pub use crate::model::zone::{PersistedZone, ZoneAction, ZoneInfo, ZoneState, ZoneTarget};

/// A reserved write range, handed back to [`ZoneTable::complete`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a reservation must be completed"]
pub struct Reservation {
    /// Write or append.
    pub op: IoOp,
    /// Zone index.
    pub zone: u32,
    /// Where the data goes, in bytes from the zone start.
    pub offset_bytes: u64,
    /// Length in bytes.
    pub len_bytes: u64,
    /// Unique per zone (never reused): tells reservations at the same offset apart.
    id: u64,
}

impl Reservation {
    /// First byte after the reserved range, in bytes from the zone start.
    pub fn end_bytes(&self) -> u64 {
        self.offset_bytes + self.len_bytes
    }
}

/// What became of a reserved write (see [`ZoneTable::complete`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteFate {
    /// Its data and every earlier reservation's data of the zone are complete: the write
    /// pointer that is persisted covers it.
    Done,
    /// It completed, but an earlier reservation of the zone is still in flight; the fate is
    /// decided when that one completes ([`ZoneTable::take_fate`]).
    Pending,
    /// Its own data transfer failed; the write pointer goes back to its start once the writes
    /// issued after it have completed.
    Failed,
    /// It will never count as written: an earlier reservation of the zone failed (or, a
    /// backend bug caught by a debug assertion, the zone was reset while it was in flight).
    Aborted,
}

/// A reservation of a zone that is not yet part of the zone's completed prefix.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    id: u64,
    end_bytes: u64,
    /// Its data transfer succeeded (it waits for an earlier reservation).
    done: bool,
}

/// The refusal a write or append gets from a zone in `state` before any position check:
/// Zone Is Offline, Zone Is Read Only or Zone Is Full. `offset_blocks` is where the op was
/// addressed (the zone start for an append).
fn write_state_refusal(
    op: IoOp,
    zone: u32,
    state: ZoneState,
    offset_blocks: u64,
    capacity_blocks: u64,
) -> Option<DeviceError> {
    match state {
        ZoneState::Offline => Some(DeviceError::Offline {
            op,
            zone,
            offset_blocks,
        }),
        ZoneState::ReadOnly => Some(DeviceError::ReadOnly {
            op,
            zone,
            offset_blocks,
        }),
        ZoneState::Full => Some(DeviceError::ZoneFull {
            op,
            zone,
            offset_blocks,
            capacity_blocks,
        }),
        _ => None,
    }
}

/// Checks a read of `len_bytes` at `offset_bytes` of a zone in `state`, in the device's
/// order: alignment, offline zone, zone end. The zone index is the caller's.
pub fn check_read_position(
    geometry: &Geometry,
    zone: u32,
    state: ZoneState,
    offset_bytes: u64,
    len_bytes: u64,
) -> Result<()> {
    geometry.check_aligned(IoOp::Read, zone, offset_bytes, len_bytes)?;
    if state == ZoneState::Offline {
        return Err(DeviceError::Offline {
            op: IoOp::Read,
            zone,
            offset_blocks: offset_bytes / geometry.block_size_bytes,
        });
    }
    geometry.check_read_end(zone, offset_bytes, len_bytes)
}

/// Checks a write at `offset` (an append: `None`) of `len_bytes` to a zone in `state` with
/// its write pointer at `wp_bytes`, in the device's order: alignment, append size, state,
/// write pointer, capacity. Returns where the data goes. The zone index and the open/active
/// resources are the caller's.
pub fn check_write_position(
    geometry: &Geometry,
    op: IoOp,
    zone: u32,
    state: ZoneState,
    wp_bytes: u64,
    offset: Option<u64>,
    len_bytes: u64,
) -> Result<u64> {
    if op == IoOp::Append {
        geometry.check_append(zone, len_bytes)?;
    } else {
        geometry.check_aligned(op, zone, offset.unwrap_or(0), len_bytes)?;
    }
    check_write_target(geometry, op, zone, state, wp_bytes, offset, len_bytes)
}

/// The state, write-pointer and capacity part of [`check_write_position`], for a caller that
/// takes any length (the ZIOB buffer accepts partial blocks). Returns where the data goes.
pub fn check_write_target(
    geometry: &Geometry,
    op: IoOp,
    zone: u32,
    state: ZoneState,
    wp_bytes: u64,
    offset: Option<u64>,
    len_bytes: u64,
) -> Result<u64> {
    let bs = geometry.block_size_bytes;
    let offset_blocks = offset.unwrap_or(0) / bs;
    if let Some(e) = write_state_refusal(
        op,
        zone,
        state,
        offset_blocks,
        geometry.zone_capacity_blocks(),
    ) {
        return Err(e);
    }
    let at = offset.unwrap_or(wp_bytes);
    if at != wp_bytes {
        return Err(DeviceError::InvalidWrite {
            zone,
            offset_blocks,
            wp_blocks: wp_bytes / bs,
        });
    }
    if at + len_bytes > geometry.zone_capacity_bytes {
        return Err(geometry.capacity_error(op, zone, at, len_bytes));
    }
    Ok(at)
}

/// The error a device gives a write of `len_bytes` at `offset_bytes` that crosses the capacity
/// of a zone in `state` with its write pointer at `wp_bytes`: a state or write-pointer refusal
/// first (the device's order of checks), else the capacity boundary error. Backends that send
/// a large write as several commands refuse it whole with this, so no part of it lands.
pub(crate) fn capacity_crossing_refusal(
    geometry: &Geometry,
    zone: u32,
    state: ZoneState,
    wp_bytes: u64,
    offset_bytes: u64,
    len_bytes: u64,
) -> DeviceError {
    let checked = check_write_position(
        geometry,
        IoOp::Write,
        zone,
        state,
        wp_bytes,
        Some(offset_bytes),
        len_bytes,
    );
    checked
        .err()
        .unwrap_or_else(|| geometry.capacity_error(IoOp::Write, zone, offset_bytes, len_bytes))
}

/// A counted resource (open or active zones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tokens {
    in_use: u32,
    max: Option<u32>,
}

impl Tokens {
    fn available(&self) -> bool {
        self.max.is_none_or(|m| self.in_use < m)
    }
    fn take(&mut self) {
        self.in_use += 1;
    }
    fn give(&mut self) {
        assert!(self.in_use > 0, "resource released twice");
        self.in_use -= 1;
    }
}

#[derive(Debug, Clone)]
struct Zone {
    state: ZoneState,
    /// Where the next write goes: the end of the data written or reserved since the last reset
    /// (the write pointer unless Full/Read Only/Offline).
    written_bytes: u64,
    /// End of the zone's contiguous completed prefix: every byte below it was written by a
    /// reservation that completed. This, never `written_bytes`, is what gets persisted.
    completed_bytes: u64,
    /// When the zone was last opened (smaller = older); the oldest implicitly opened zone is
    /// the one the controller closes to free an open resource (as QEMU does).
    opened_seq: u64,
    /// Reservations past `completed_bytes`, in offset (and id) order.
    in_flight: std::collections::VecDeque<InFlight>,
    /// Start of the lowest failed reservation while writes issued after it are in flight; new
    /// writes are refused until they have all completed and the write pointer went back.
    failed_at_bytes: Option<u64>,
    /// Fates decided for reservations after their own completion call, until taken.
    fates: Vec<(u64, WriteFate)>,
    /// Id of the next reservation.
    next_id: u64,
}

impl Zone {
    fn new(state: ZoneState, written_bytes: u64) -> Zone {
        Zone {
            state,
            written_bytes,
            completed_bytes: written_bytes,
            opened_seq: 0,
            in_flight: std::collections::VecDeque::new(),
            failed_at_bytes: None,
            fates: Vec::new(),
            next_id: 0,
        }
    }

    /// Aborts every reservation: completed ones waiting for an earlier one get their fate now,
    /// the others when they complete. Only a release-build fallback of a reset that a backend
    /// issued with writes in flight (a bug: their data may land after the reset, over data
    /// written after it); backends wait until [`ZoneTable::has_in_flight`] is false.
    fn abort_in_flight(&mut self) {
        for r in self.in_flight.drain(..) {
            if r.done {
                self.fates.push((r.id, WriteFate::Aborted));
            }
        }
        self.failed_at_bytes = None;
    }
}

/// The zone state machine of one device: states, write pointers and the open/active resource
/// tokens. Pure bookkeeping, no I/O.
#[derive(Debug, Clone)]
pub struct ZoneTable {
    geometry: Geometry,
    zones: Vec<Zone>,
    open: Tokens,
    active: Tokens,
    next_seq: u64,
}

impl ZoneTable {
    /// A table of `geometry.zone_count` Empty zones.
    pub fn new(geometry: &Geometry) -> ZoneTable {
        let empty = PersistedZone {
            state: ZoneState::Empty,
            written_bytes: 0,
        };
        ZoneTable::restore(geometry, &vec![empty; geometry.zone_count as usize])
            .expect("an all-empty table is valid")
    }

    /// Rebuilds a table from persisted zones, as after a power cycle: opened zones come back
    /// Closed (NVMe: controller reset closes open zones). Returns a description of the first
    /// inconsistent entry instead of a table.
    pub fn restore(
        geometry: &Geometry,
        persisted: &[PersistedZone],
    ) -> std::result::Result<ZoneTable, String> {
        if persisted.len() != geometry.zone_count as usize {
            return Err(format!(
                "{} zone entries for {} zones",
                persisted.len(),
                geometry.zone_count
            ));
        }
        let mut zones = Vec::with_capacity(persisted.len());
        let mut active = 0;
        for (i, p) in persisted.iter().enumerate() {
            if p.written_bytes > geometry.zone_capacity_bytes
                || p.written_bytes % geometry.block_size_bytes != 0
            {
                return Err(format!(
                    "zone {i}: {} bytes written does not fit a capacity of {} bytes in whole blocks",
                    p.written_bytes, geometry.zone_capacity_bytes
                ));
            }
            let state = if p.state.is_open() {
                ZoneState::Closed
            } else {
                p.state
            };
            let consistent = match state {
                ZoneState::Empty => p.written_bytes == 0,
                ZoneState::Closed => p.written_bytes < geometry.zone_capacity_bytes,
                _ => true,
            };
            if !consistent {
                return Err(format!(
                    "zone {i}: state {state} with {} bytes written",
                    p.written_bytes
                ));
            }
            if state.is_active() {
                active += 1;
            }
            zones.push(Zone::new(state, p.written_bytes));
        }
        let table = ZoneTable {
            geometry: *geometry,
            zones,
            open: Tokens {
                in_use: 0,
                max: geometry.max_open_zones,
            },
            active: Tokens {
                in_use: active,
                max: geometry.max_active_zones,
            },
            next_seq: 1,
        };
        table.check_invariants();
        Ok(table)
    }

    /// The geometry the table was built for.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// Open resources in use.
    pub fn open_in_use(&self) -> u32 {
        self.open.in_use
    }

    /// Active resources in use.
    pub fn active_in_use(&self) -> u32 {
        self.active.in_use
    }

    fn zone_index(&self, zone: u32) -> Result<usize> {
        self.geometry.check_zone(zone)?;
        Ok(zone as usize)
    }

    /// The report entry of `zone`.
    pub fn info(&self, zone: u32) -> Result<ZoneInfo> {
        let z = &self.zones[self.zone_index(zone)?];
        let write_pointer_bytes = if z.state == ZoneState::Full {
            self.geometry.zone_capacity_bytes
        } else {
            z.written_bytes
        };
        Ok(ZoneInfo {
            index: zone,
            start_bytes: u64::from(zone) * self.geometry.zone_size_bytes,
            capacity_bytes: self.geometry.zone_capacity_bytes,
            write_pointer_bytes,
            state: z.state,
        })
    }

    /// Whether `zone` has reservations not yet in its completed prefix (false for a zone that
    /// does not exist).
    pub fn has_in_flight(&self, zone: u32) -> bool {
        self.zones
            .get(zone as usize)
            .is_some_and(|z| !z.in_flight.is_empty())
    }

    /// Report Zones from `first`, at most `count` zones (fewer at the device end).
    pub fn report(&self, first: u32, count: u32) -> Result<Vec<ZoneInfo>> {
        self.zone_index(first)?;
        let end = first.saturating_add(count).min(self.geometry.zone_count);
        (first..end).map(|z| self.info(z)).collect()
    }

    /// Checks a read of `len_bytes` at `offset_bytes` of `zone`; returns how many bytes from
    /// the zone start hold data (the rest of the range reads as zeros).
    pub fn check_read(&self, zone: u32, offset_bytes: u64, len_bytes: u64) -> Result<u64> {
        let z = &self.zones[self.zone_index(zone)?];
        check_read_position(&self.geometry, zone, z.state, offset_bytes, len_bytes)?;
        Ok(z.written_bytes)
    }

    /// [`check_read`](Self::check_read) of a read at any byte offset and of any length (a
    /// device reading through the host's page cache): everything but the alignment.
    pub fn check_read_unaligned(
        &self,
        zone: u32,
        offset_bytes: u64,
        len_bytes: u64,
    ) -> Result<u64> {
        let z = &self.zones[self.zone_index(zone)?];
        if z.state == ZoneState::Offline {
            return Err(DeviceError::Offline {
                op: IoOp::Read,
                zone,
                offset_blocks: offset_bytes / self.geometry.block_size_bytes,
            });
        }
        self.geometry
            .check_read_end(zone, offset_bytes, len_bytes)?;
        Ok(z.written_bytes)
    }

    /// Reserves a write of `len_bytes` at `offset_bytes`, which must be the write pointer.
    pub fn begin_write(
        &mut self,
        zone: u32,
        offset_bytes: u64,
        len_bytes: u64,
    ) -> Result<Reservation> {
        self.begin(IoOp::Write, zone, Some(offset_bytes), len_bytes)
    }

    /// Reserves a zone append of `len_bytes` at the write pointer.
    pub fn begin_append(&mut self, zone: u32, len_bytes: u64) -> Result<Reservation> {
        self.begin(IoOp::Append, zone, None, len_bytes)
    }

    fn begin(
        &mut self,
        op: IoOp,
        zone: u32,
        offset: Option<u64>,
        len_bytes: u64,
    ) -> Result<Reservation> {
        let i = self.zone_index(zone)?;
        let z = &self.zones[i];
        let at = check_write_position(
            &self.geometry,
            op,
            zone,
            z.state,
            z.written_bytes,
            offset,
            len_bytes,
        )?;
        if let Some(failed_at) = z.failed_at_bytes {
            return Err(DeviceError::Aborted {
                op,
                zone,
                offset_blocks: at / self.geometry.block_size_bytes,
                reason: format!(
                    "the write at block {} failed; the zone takes writes again once the writes \
                     issued after it have completed",
                    failed_at / self.geometry.block_size_bytes
                ),
            });
        }
        match z.state {
            ZoneState::Empty => self.acquire(i, true)?,
            ZoneState::Closed => self.acquire(i, false)?,
            _ => {}
        }
        let z = &mut self.zones[i];
        let id = z.next_id;
        z.next_id += 1;
        z.in_flight.push_back(InFlight {
            id,
            end_bytes: at + len_bytes,
            done: false,
        });
        if !z.state.is_open() {
            z.state = ZoneState::ImplicitlyOpened;
            z.opened_seq = self.next_seq;
            self.next_seq += 1;
        }
        z.written_bytes = at + len_bytes;
        if z.written_bytes == self.geometry.zone_capacity_bytes {
            z.state = ZoneState::Full;
            self.open.give();
            self.active.give();
        }
        self.check_invariants();
        Ok(Reservation {
            op,
            zone,
            offset_bytes: at,
            len_bytes,
            id,
        })
    }

    /// Takes the resources zone `i` needs to become open (`from_empty`: an active one too),
    /// closing the oldest implicitly opened zone if the open limit is reached. Changes nothing
    /// on error. The caller sets the new state.
    fn acquire(&mut self, i: usize, from_empty: bool) -> Result<()> {
        let zone = i as u32;
        if from_empty && !self.active.available() {
            return Err(DeviceError::TooManyActive {
                zone,
                max_active: self.active.max.unwrap_or(u32::MAX),
            });
        }
        if !self.open.available() {
            let victim = (0..self.zones.len())
                .filter(|&v| v != i && self.zones[v].state == ZoneState::ImplicitlyOpened)
                .min_by_key(|&v| self.zones[v].opened_seq);
            let Some(v) = victim else {
                return Err(DeviceError::TooManyOpen {
                    zone,
                    max_open: self.open.max.unwrap_or(u32::MAX),
                });
            };
            tracing::debug!(zone = v, for_zone = zone, "implicitly closing zone");
            self.set_state(v, ZoneState::Closed);
            self.open.give();
        }
        self.open.take();
        if from_empty {
            self.active.take();
        }
        Ok(())
    }

    /// Changes a zone's state outside its own reservations (management, implicit close,
    /// device-initiated).
    fn set_state(&mut self, i: usize, state: ZoneState) {
        self.zones[i].state = state;
    }

    /// Ends a reservation (`ok`: its data transfer succeeded) and says what became of it.
    ///
    /// The zone's completed prefix (what [`ZoneTable::snapshot`] persists) advances over every
    /// reservation whose own transfer and all earlier ones' succeeded, so it grows while later
    /// writes are still in flight. A reservation that completes before an earlier one is
    /// [`WriteFate::Pending`] until that one completes ([`ZoneTable::take_fate`]).
    ///
    /// A failed transfer is [`WriteFate::Failed`]: the reservations after it are
    /// [`WriteFate::Aborted`], new writes to the zone are refused until they have completed,
    /// and then the write pointer goes back to where the completed data ends. The zone keeps
    /// its state (a zone that became Full by the failed range is opened again if resources
    /// allow, else it stays Full with its data ending there); no byte that was not written is
    /// ever below a write pointer.
    pub fn complete(&mut self, r: Reservation, ok: bool) -> WriteFate {
        let i = r.zone as usize;
        let z = &mut self.zones[i];
        let Some(pos) = z.in_flight.iter().position(|f| f.id == r.id) else {
            // The zone was reset under it.
            return WriteFate::Aborted;
        };
        let fate = if z.failed_at_bytes.is_some_and(|f| f <= r.offset_bytes) {
            z.in_flight.remove(pos);
            WriteFate::Aborted
        } else if ok {
            z.in_flight[pos].done = true;
            WriteFate::Pending
        } else {
            z.failed_at_bytes = Some(r.offset_bytes);
            // Nothing from here on will count as written: completed reservations learn it now,
            // those still in flight when they complete.
            z.in_flight.remove(pos);
            let mut k = pos;
            while k < z.in_flight.len() {
                if z.in_flight[k].done {
                    let f = z.in_flight.remove(k).expect("index in range");
                    z.fates.push((f.id, WriteFate::Aborted));
                } else {
                    k += 1;
                }
            }
            WriteFate::Failed
        };
        let mut own = fate;
        while let Some(front) = z.in_flight.front().copied().filter(|f| f.done) {
            z.in_flight.pop_front();
            z.completed_bytes = front.end_bytes;
            if front.id == r.id {
                own = WriteFate::Done;
            } else {
                z.fates.push((front.id, WriteFate::Done));
            }
        }
        if z.failed_at_bytes.is_some() && z.in_flight.is_empty() {
            self.roll_back(i);
        }
        self.check_invariants();
        own
    }

    /// The fate of a reservation whose [`ZoneTable::complete`] said [`WriteFate::Pending`],
    /// once it is decided (taken: a second call says `None`).
    pub fn take_fate(&mut self, r: &Reservation) -> Option<WriteFate> {
        let fates = &mut self.zones[r.zone as usize].fates;
        let pos = fates.iter().position(|(id, _)| *id == r.id)?;
        Some(fates.swap_remove(pos).1)
    }

    /// After a failed reservation, with nothing in flight any more: the write pointer goes
    /// back to the end of the completed data.
    fn roll_back(&mut self, i: usize) {
        let cap = self.geometry.zone_capacity_bytes;
        let z = &mut self.zones[i];
        let reached_full = z.state == ZoneState::Full && z.written_bytes == cap;
        z.failed_at_bytes = None;
        z.written_bytes = z.completed_bytes;
        tracing::warn!(
            zone = i,
            write_pointer_bytes = z.written_bytes,
            "a write failed: the write pointer went back to the end of the completed data"
        );
        if reached_full && z.written_bytes < cap {
            // Full only because of the failed range: open it again if resources allow (else it
            // stays Full, like a zone finished early).
            if self.acquire(i, true).is_ok() {
                let z = &mut self.zones[i];
                z.state = ZoneState::ImplicitlyOpened;
                z.opened_seq = self.next_seq;
                self.next_seq += 1;
            }
        }
    }

    /// Device-initiated: the zone becomes Read Only (releases its resources).
    pub fn make_read_only(&mut self, zone: u32) {
        self.release_and_set(zone as usize, ZoneState::ReadOnly);
    }

    /// Device-initiated: the zone becomes Offline (releases its resources).
    pub fn make_offline(&mut self, zone: u32) {
        self.release_and_set(zone as usize, ZoneState::Offline);
    }

    fn release_and_set(&mut self, i: usize, state: ZoneState) {
        let old = self.zones[i].state;
        if old.is_open() {
            self.open.give();
        }
        if old.is_active() {
            self.active.give();
        }
        self.set_state(i, state);
        self.check_invariants();
    }

    /// Applies a zone management action. A one-zone action changes nothing on error; an
    /// all-zones action checks its resources before changing anything.
    pub fn apply(&mut self, action: ZoneAction, target: ZoneTarget) -> Result<()> {
        let result = match target {
            ZoneTarget::One(zone) => {
                let i = self.zone_index(zone)?;
                self.apply_one(action, i)
            }
            ZoneTarget::All => self.apply_all(action),
        };
        self.check_invariants();
        result
    }

    fn apply_all(&mut self, action: ZoneAction) -> Result<()> {
        let selected = |s: ZoneState| match action {
            ZoneAction::Open => s == ZoneState::Closed,
            ZoneAction::Close => s.is_open(),
            ZoneAction::Finish => s.is_active(),
            ZoneAction::Reset => s.is_active() || s == ZoneState::Full,
            ZoneAction::Offline => s == ZoneState::ReadOnly,
        };
        let chosen: Vec<usize> = (0..self.zones.len())
            .filter(|&i| selected(self.zones[i].state))
            .collect();
        if action == ZoneAction::Open {
            if let Some(max) = self.open.max {
                let free = max.saturating_sub(self.open.in_use) as usize;
                if chosen.len() > free {
                    return Err(DeviceError::TooManyOpen {
                        zone: chosen[free] as u32,
                        max_open: max,
                    });
                }
            }
        }
        for i in chosen {
            self.apply_one(action, i)?;
        }
        Ok(())
    }

    fn apply_one(&mut self, action: ZoneAction, i: usize) -> Result<()> {
        use ZoneState::*;
        let state = self.zones[i].state;
        let refuse = || {
            Err(DeviceError::InvalidTransition {
                zone: i as u32,
                action,
                state,
            })
        };
        match (action, state) {
            (ZoneAction::Open, ExplicitlyOpened) => {}
            (ZoneAction::Open, ImplicitlyOpened) => self.set_state(i, ExplicitlyOpened),
            (ZoneAction::Open, Empty | Closed) => {
                self.acquire(i, state == Empty)?;
                self.set_state(i, ExplicitlyOpened);
                self.zones[i].opened_seq = self.next_seq;
                self.next_seq += 1;
            }
            (ZoneAction::Close, Closed) => {}
            (ZoneAction::Close, ImplicitlyOpened | ExplicitlyOpened) => {
                self.open.give();
                self.set_state(i, Closed);
            }
            (ZoneAction::Finish, Full) => {}
            (ZoneAction::Finish, Empty | ImplicitlyOpened | ExplicitlyOpened | Closed) => {
                self.release_and_set(i, Full);
            }
            (ZoneAction::Reset, Empty) => {}
            (ZoneAction::Reset, ImplicitlyOpened | ExplicitlyOpened | Closed | Full) => {
                let z = &mut self.zones[i];
                debug_assert!(
                    z.in_flight.is_empty(),
                    "zone {i} reset with writes in flight: the backend must wait for them, or \
                     their data lands after the reset"
                );
                z.abort_in_flight();
                z.written_bytes = 0;
                z.completed_bytes = 0;
                self.release_and_set(i, Empty);
            }
            (ZoneAction::Offline, Offline) => {}
            (ZoneAction::Offline, ReadOnly) => self.set_state(i, Offline),
            _ => return refuse(),
        }
        Ok(())
    }

    /// The zones as a persistent backend must store them: each zone's state with its data
    /// ending where its completed prefix ends (data of writes still in flight, or completed
    /// after an earlier one that is still in flight, may not be durable). An implicitly opened
    /// zone with no completed data is stored Empty, and a zone that is Full by writes not all
    /// completed is stored Closed (Empty with no completed data), so that no stored write
    /// pointer is past data that was not written.
    pub fn snapshot(&self) -> Vec<PersistedZone> {
        (0..self.zones.len()).map(|i| self.persisted(i)).collect()
    }

    /// Zone `zone` as [`snapshot`](Self::snapshot) stores it.
    pub fn snapshot_zone(&self, zone: u32) -> PersistedZone {
        self.persisted(zone as usize)
    }

    fn persisted(&self, i: usize) -> PersistedZone {
        let z = &self.zones[i];
        let pending = z.completed_bytes < z.written_bytes;
        let state = match z.state {
            ZoneState::ImplicitlyOpened | ZoneState::Full if pending && z.completed_bytes == 0 => {
                ZoneState::Empty
            }
            // Full by writes not all complete: its data ends below the capacity.
            ZoneState::Full if pending => ZoneState::Closed,
            ZoneState::ImplicitlyOpened if z.completed_bytes == 0 => ZoneState::Empty,
            s => s,
        };
        PersistedZone {
            state,
            written_bytes: z.completed_bytes,
        }
    }

    /// Asserts the counted tokens match the states and every write pointer is in range.
    fn check_invariants(&self) {
        if cfg!(debug_assertions) {
            let open = self.zones.iter().filter(|z| z.state.is_open()).count() as u32;
            let active = self.zones.iter().filter(|z| z.state.is_active()).count() as u32;
            assert_eq!(open, self.open.in_use, "open tokens out of step");
            assert_eq!(active, self.active.in_use, "active tokens out of step");
            for z in &self.zones {
                assert!(z.written_bytes <= self.geometry.zone_capacity_bytes);
                assert!(
                    z.completed_bytes <= z.written_bytes,
                    "completed past the reservations"
                );
                if z.state == ZoneState::Empty {
                    assert_eq!(z.written_bytes, 0, "an Empty zone holds data");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::error::ErrorKind;

    fn table() -> ZoneTable {
        let mut g = Geometry::new(3, 64 * 1024);
        g.max_open_zones = Some(2);
        ZoneTable::new(&g)
    }

    #[test]
    fn a_capacity_crossing_write_is_refused_in_the_device_order() {
        let g = Geometry::new(3, 64 * 1024);
        let cap = g.zone_capacity_bytes;
        let kind = |state, wp, at| capacity_crossing_refusal(&g, 1, state, wp, at, 2 * cap).kind();
        // The zone state first, then the write pointer, then the boundary.
        assert_eq!(kind(ZoneState::Full, cap, 0), ErrorKind::ZoneFull);
        assert_eq!(
            kind(ZoneState::ImplicitlyOpened, 4096, 0),
            ErrorKind::InvalidWrite
        );
        assert_eq!(
            kind(ZoneState::ImplicitlyOpened, 4096, 4096),
            ErrorKind::BoundaryError
        );
    }

    #[test]
    fn failed_last_reservation_rolls_back() {
        let mut t = table();
        let r = t.begin_write(0, 0, 4096).unwrap();
        t.complete(r, true);
        let r = t.begin_write(0, 4096, 8192).unwrap();
        t.complete(r, false);
        let z = t.info(0).unwrap();
        assert_eq!(
            (z.state, z.write_pointer_bytes),
            (ZoneState::ImplicitlyOpened, 4096)
        );
    }

    #[test]
    fn a_failed_reservation_aborts_later_ones_and_the_write_pointer_goes_back() {
        let mut t = table();
        let first = t.begin_append(1, 4096).unwrap();
        let second = t.begin_append(1, 4096).unwrap();
        let third = t.begin_append(1, 4096).unwrap();
        assert_eq!(second.offset_bytes, 4096);
        assert_eq!(t.complete(first, true), WriteFate::Done);
        assert_eq!(t.complete(third, true), WriteFate::Pending);
        assert_eq!(t.complete(second, false), WriteFate::Failed);
        assert_eq!(t.take_fate(&third), Some(WriteFate::Aborted));
        assert_eq!(t.take_fate(&third), None);
        let z = t.info(1).unwrap();
        assert_eq!(
            (z.state, z.write_pointer_bytes),
            (ZoneState::ImplicitlyOpened, 4096)
        );
        assert_eq!(t.snapshot()[1].written_bytes, 4096);
        // The zone takes writes again, at the write pointer.
        let again = t.begin_append(1, 4096).unwrap();
        assert_eq!(again.offset_bytes, 4096);
        assert_eq!(t.complete(again, true), WriteFate::Done);
    }

    #[test]
    fn writes_issued_after_a_failure_are_refused_until_the_ones_in_flight_completed() {
        let mut t = table();
        let first = t.begin_append(0, 4096).unwrap();
        let second = t.begin_append(0, 4096).unwrap();
        assert_eq!(t.complete(first, false), WriteFate::Failed);
        let e = t.begin_append(0, 4096).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Aborted, "{e}");
        assert_eq!(t.complete(second, true), WriteFate::Aborted);
        assert_eq!(t.begin_append(0, 4096).unwrap().offset_bytes, 0);
    }

    #[test]
    fn a_zone_full_only_by_a_failed_write_opens_again() {
        let mut t = table();
        let cap = t.geometry().zone_capacity_bytes;
        let r = t.begin_write(2, 0, cap).unwrap();
        assert_eq!(t.info(2).unwrap().state, ZoneState::Full);
        assert_eq!(t.complete(r, false), WriteFate::Failed);
        let z = t.info(2).unwrap();
        assert_eq!(
            (z.state, z.write_pointer_bytes),
            (ZoneState::ImplicitlyOpened, 0)
        );
    }

    #[test]
    fn snapshot_persists_the_completed_prefix_while_later_writes_are_in_flight() {
        let mut t = table();
        let w1 = t.begin_write(0, 0, 4096).unwrap();
        let w2 = t.begin_write(0, 4096, 8192).unwrap();
        assert_eq!(
            t.snapshot()[0].state,
            ZoneState::Empty,
            "nothing completed yet"
        );
        assert_eq!(t.complete(w1, true), WriteFate::Done);
        assert_eq!(
            t.snapshot()[0].written_bytes,
            4096,
            "w1 is durable with w2 in flight"
        );
        let w3 = t.begin_write(0, 12288, 4096).unwrap();
        assert_eq!(t.complete(w3, true), WriteFate::Pending, "w2 is in flight");
        assert_eq!(t.snapshot()[0].written_bytes, 4096);
        assert_eq!(t.complete(w2, true), WriteFate::Done);
        assert_eq!(t.take_fate(&w3), Some(WriteFate::Done));
        assert_eq!(t.snapshot()[0].written_bytes, 16384);
        t.apply(ZoneAction::Reset, ZoneTarget::One(0)).unwrap();
        assert_eq!(
            t.snapshot()[0],
            PersistedZone {
                state: ZoneState::Empty,
                written_bytes: 0
            },
        );
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "reset with writes in flight")]
    fn a_reset_with_a_write_in_flight_is_a_backend_bug() {
        let mut t = table();
        let _in_flight = t.begin_write(0, 0, 4096).unwrap();
        let _ = t.apply(ZoneAction::Reset, ZoneTarget::One(0));
    }

    #[test]
    fn restore_closes_open_zones_and_rejects_inconsistent_entries() {
        let g = *table().geometry();
        let mut zones = vec![
            PersistedZone {
                state: ZoneState::Empty,
                written_bytes: 0
            };
            3
        ];
        zones[0] = PersistedZone {
            state: ZoneState::ExplicitlyOpened,
            written_bytes: 0,
        };
        zones[1] = PersistedZone {
            state: ZoneState::ImplicitlyOpened,
            written_bytes: 8192,
        };
        let t = ZoneTable::restore(&g, &zones).unwrap();
        assert_eq!(t.info(0).unwrap().state, ZoneState::Closed);
        assert_eq!(t.info(1).unwrap().write_pointer_bytes, 8192);
        assert_eq!((t.open_in_use(), t.active_in_use()), (0, 2));
        zones[2] = PersistedZone {
            state: ZoneState::Closed,
            written_bytes: 64 * 1024,
        };
        assert_eq!(
            ZoneTable::restore(&g, &zones).unwrap_err(),
            "zone 2: state Closed with 65536 bytes written"
        );
        zones[2] = PersistedZone {
            state: ZoneState::Full,
            written_bytes: 100,
        };
        assert!(ZoneTable::restore(&g, &zones)
            .unwrap_err()
            .contains("whole blocks"));
    }
}
