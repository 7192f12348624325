//! The in-memory mirror of a zoned block device's zones (state and write pointer), so that
//! invalid writes, appends and transitions are refused *before* anything is issued, with the
//! same typed [`DeviceError`]s as the model ([`crate::ZoneTable`]).
//!
//! The mirror predicts, the device decides: it is refreshed from a zone report after every
//! failure, after every zone management command and whenever the device may have closed a
//! zone by itself (an implicit close to free an open resource). Pure bookkeeping, no I/O.

use crate::model::error::{DeviceError, IoOp, Result};
use crate::model::geometry::Geometry;
use crate::model::state::{
    check_read_position, check_write_position, ZoneAction, ZoneInfo, ZoneState,
};
use crate::zbd::ioctl::{BlkZone, SECTOR_BYTES};

/// Converts a kernel zone descriptor into a report entry. `capacity_valid`: the report had
/// `BLK_ZONE_REP_CAPACITY` (otherwise the capacity is the zone length).
///
/// The write pointer of a Full zone is normalised to the capacity: the block layer reports
/// `start + len` (the next zone's start) for it. Read Only and Offline zones have no usable
/// write pointer; it is clamped into `[0, capacity]`.
pub fn zone_info(
    index: u32,
    z: &BlkZone,
    capacity_valid: bool,
) -> std::result::Result<ZoneInfo, String> {
    let state = ZoneState::from_nvme_code(z.cond).ok_or_else(|| {
        format!(
            "zone {index} has condition {:#x} (conventional zones are not supported)",
            z.cond
        )
    })?;
    let capacity_sectors = if capacity_valid { z.capacity } else { z.len };
    let capacity_bytes = capacity_sectors * SECTOR_BYTES;
    let write_pointer_bytes = match state {
        ZoneState::Empty => 0,
        ZoneState::Full => capacity_bytes,
        _ => (z.wp.saturating_sub(z.start) * SECTOR_BYTES).min(capacity_bytes),
    };
    Ok(ZoneInfo {
        index,
        start_bytes: z.start * SECTOR_BYTES,
        capacity_bytes,
        write_pointer_bytes,
        state,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Zone {
    state: ZoneState,
    /// Write pointer in bytes from the zone start (the capacity for a Full zone).
    wp_bytes: u64,
    /// Where data written since the last reset ends (below the capacity for a zone finished
    /// through this mirror; reads past it return zeros without touching the device).
    data_end_bytes: u64,
}

/// What a write or append checked by [`Mirror::plan_write`] will do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WritePlan {
    /// Where the data goes, in bytes from the zone start.
    pub offset_bytes: u64,
    /// The device will have to close an implicitly opened zone to free an open resource:
    /// refresh the mirror afterwards (which zone it picks is the device's choice).
    pub closes_another_zone: bool,
}

/// The zones of one device as last seen or predicted.
#[derive(Debug, Clone)]
pub struct Mirror {
    geometry: Geometry,
    zones: Vec<Zone>,
}

impl Mirror {
    /// A mirror of `geometry.zone_count` zones from a full report.
    pub fn new(geometry: &Geometry, report: &[ZoneInfo]) -> Mirror {
        assert_eq!(report.len(), geometry.zone_count as usize);
        let mut m = Mirror {
            geometry: *geometry,
            zones: vec![
                Zone {
                    state: ZoneState::Empty,
                    wp_bytes: 0,
                    data_end_bytes: 0,
                };
                report.len()
            ],
        };
        m.refresh(report);
        m
    }

    /// Takes the device's word for the reported zones. A zone that was Full and still is
    /// keeps where its data ended (the report only says "capacity").
    pub fn refresh(&mut self, report: &[ZoneInfo]) {
        for info in report {
            let z = &mut self.zones[info.index as usize];
            let keep_data_end = z.state == ZoneState::Full && info.state == ZoneState::Full;
            z.state = info.state;
            z.wp_bytes = info.write_pointer_bytes;
            if !keep_data_end {
                z.data_end_bytes = info.write_pointer_bytes;
            }
        }
    }

    /// The state of `zone` (which must exist).
    pub fn state(&self, zone: u32) -> ZoneState {
        self.zones[zone as usize].state
    }

    /// An implicitly opened zone other than `zone`, if any (the one a controller would close
    /// to free an open resource).
    pub fn implicitly_opened_other_than(&self, zone: u32) -> Option<u32> {
        self.zones
            .iter()
            .enumerate()
            .find(|&(i, z)| i as u32 != zone && z.state == ZoneState::ImplicitlyOpened)
            .map(|(i, _)| i as u32)
    }

    fn index(&self, zone: u32) -> Result<usize> {
        self.geometry.check_zone(zone)?;
        Ok(zone as usize)
    }

    fn open_and_active(&self) -> (u32, u32) {
        let open = self.zones.iter().filter(|z| z.state.is_open()).count() as u32;
        let active = self.zones.iter().filter(|z| z.state.is_active()).count() as u32;
        (open, active)
    }

    /// Checks a read; returns where the zone's data ends (bytes from the zone start).
    pub fn check_read(&self, zone: u32, offset_bytes: u64, len_bytes: u64) -> Result<u64> {
        let z = &self.zones[self.index(zone)?];
        check_read_position(&self.geometry, zone, z.state, offset_bytes, len_bytes)?;
        Ok(z.data_end_bytes)
    }

    /// Checks a write at `offset` (or an append: `None`) of `len_bytes`, in the model's order:
    /// zone, alignment, append size, state, write pointer, capacity, then resources.
    pub fn plan_write(
        &self,
        op: IoOp,
        zone: u32,
        offset: Option<u64>,
        len_bytes: u64,
    ) -> Result<WritePlan> {
        let i = self.index(zone)?;
        let z = self.zones[i];
        let at = check_write_position(
            &self.geometry,
            op,
            zone,
            z.state,
            z.wp_bytes,
            offset,
            len_bytes,
        )?;
        let closes_another_zone = match z.state {
            ZoneState::Empty => self.check_resources(i, true)?,
            ZoneState::Closed => self.check_resources(i, false)?,
            _ => false,
        };
        Ok(WritePlan {
            offset_bytes: at,
            closes_another_zone,
        })
    }

    /// Whether zone `i` can get an open resource (and an active one, `from_empty`); returns
    /// whether the device must close an implicitly opened zone for it.
    fn check_resources(&self, i: usize, from_empty: bool) -> Result<bool> {
        let zone = i as u32;
        let (open, active) = self.open_and_active();
        if let Some(max_active) = self.geometry.max_active_zones {
            if from_empty && active >= max_active {
                return Err(DeviceError::TooManyActive { zone, max_active });
            }
        }
        match self.geometry.max_open_zones {
            Some(max_open) if open >= max_open => {
                let victim = self
                    .zones
                    .iter()
                    .enumerate()
                    .any(|(v, z)| v != i && z.state == ZoneState::ImplicitlyOpened);
                if victim {
                    Ok(true)
                } else {
                    Err(DeviceError::TooManyOpen { zone, max_open })
                }
            }
            _ => Ok(false),
        }
    }

    /// Records a completed write of `len_bytes` at `offset_bytes` (checked by
    /// [`Mirror::plan_write`]).
    pub fn wrote(&mut self, zone: u32, offset_bytes: u64, len_bytes: u64) {
        let cap = self.geometry.zone_capacity_bytes;
        let z = &mut self.zones[zone as usize];
        z.wp_bytes = offset_bytes + len_bytes;
        z.data_end_bytes = z.wp_bytes;
        assert!(z.wp_bytes <= cap, "write pointer past the capacity");
        if z.wp_bytes == cap {
            z.state = ZoneState::Full;
        } else if !z.state.is_open() {
            z.state = ZoneState::ImplicitlyOpened;
        }
    }

    /// Checks a zone management action on one zone. Returns whether the device may have to
    /// close another zone (an open needing an open resource) — refresh afterwards.
    pub fn plan_action(&self, action: ZoneAction, zone: u32) -> Result<bool> {
        use ZoneState::*;
        let i = self.index(zone)?;
        let state = self.zones[i].state;
        let refuse = Err(DeviceError::InvalidTransition {
            zone,
            action,
            state,
        });
        match (action, state) {
            (ZoneAction::Open, ImplicitlyOpened | ExplicitlyOpened) => Ok(false),
            (ZoneAction::Open, Empty) => self.check_resources(i, true),
            (ZoneAction::Open, Closed) => self.check_resources(i, false),
            (ZoneAction::Close, ImplicitlyOpened | ExplicitlyOpened | Closed) => Ok(false),
            (ZoneAction::Finish, Empty | ImplicitlyOpened | ExplicitlyOpened | Closed | Full) => {
                Ok(false)
            }
            (ZoneAction::Reset, Empty | ImplicitlyOpened | ExplicitlyOpened | Closed | Full) => {
                Ok(false)
            }
            (ZoneAction::Offline, Offline) => Ok(false),
            (ZoneAction::Offline, ReadOnly) => Err(DeviceError::InvalidArgument(format!(
                "offline of zone {zone}: the Linux block layer has no Offline Zone command"
            ))),
            _ => refuse,
        }
    }

    /// The zones a Select All action applies to (as the model selects them), after checking
    /// that an Open All has the open resources for all of them (it changes nothing if not).
    pub fn select_all(&self, action: ZoneAction) -> Result<Vec<u32>> {
        let selected = |s: ZoneState| match action {
            ZoneAction::Open => s == ZoneState::Closed,
            ZoneAction::Close => s.is_open(),
            ZoneAction::Finish => s.is_active(),
            ZoneAction::Reset => s.is_active() || s == ZoneState::Full,
            ZoneAction::Offline => s == ZoneState::ReadOnly,
        };
        let chosen: Vec<u32> = (0..self.geometry.zone_count)
            .filter(|&z| selected(self.zones[z as usize].state))
            .collect();
        if action == ZoneAction::Open {
            if let Some(max_open) = self.geometry.max_open_zones {
                let free = max_open.saturating_sub(self.open_and_active().0) as usize;
                if chosen.len() > free {
                    return Err(DeviceError::TooManyOpen {
                        zone: chosen[free],
                        max_open,
                    });
                }
            }
        }
        Ok(chosen)
    }

    /// Records a completed Finish of `zone`: Full, with its data ending where the write
    /// pointer was.
    pub fn finished(&mut self, zone: u32) {
        let cap = self.geometry.zone_capacity_bytes;
        let z = &mut self.zones[zone as usize];
        if z.state != ZoneState::Full {
            z.data_end_bytes = z.wp_bytes;
        }
        z.state = ZoneState::Full;
        z.wp_bytes = cap;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::error::ErrorKind;

    const MIB_SECTORS: u64 = 2048;

    fn geometry() -> Geometry {
        let mut g = Geometry::new(4, 8 << 20);
        g.zone_capacity_bytes = 6 << 20;
        g.max_open_zones = Some(2);
        g.max_active_zones = Some(3);
        g.max_append_bytes = 64 << 10;
        g
    }

    fn blk(index: u64, cond: ZoneState, wp_sectors: u64) -> BlkZone {
        let start = index * 8 * MIB_SECTORS;
        BlkZone {
            start,
            len: 8 * MIB_SECTORS,
            wp: start + wp_sectors,
            type_: crate::zbd::ioctl::BLK_ZONE_TYPE_SEQWRITE_REQ,
            cond: cond.nvme_code(),
            capacity: 6 * MIB_SECTORS,
            ..BlkZone::default()
        }
    }

    fn mirror(states: [(ZoneState, u64); 4]) -> Mirror {
        let report: Vec<ZoneInfo> = states
            .iter()
            .enumerate()
            .map(|(i, &(s, wp))| zone_info(i as u32, &blk(i as u64, s, wp), true).unwrap())
            .collect();
        Mirror::new(&geometry(), &report)
    }

    #[test]
    fn full_zone_write_pointer_is_normalised_to_capacity() {
        // The block layer reports a Full zone's wp at the next zone's start.
        let z = zone_info(1, &blk(1, ZoneState::Full, 8 * MIB_SECTORS), true).unwrap();
        assert_eq!(z.write_pointer_bytes, 6 << 20);
        assert_eq!(z.start_bytes, 8 << 20);
        assert_eq!(z.capacity_bytes, 6 << 20);
        let z = zone_info(1, &blk(1, ZoneState::ImplicitlyOpened, 16), false).unwrap();
        assert_eq!(z.write_pointer_bytes, 8192);
        assert_eq!(
            z.capacity_bytes,
            8 << 20,
            "no capacity flag: capacity = zone size"
        );
        let mut conventional = blk(0, ZoneState::Empty, 0);
        conventional.cond = 0;
        assert!(zone_info(0, &conventional, true)
            .unwrap_err()
            .contains("conventional"));
    }

    #[test]
    fn writes_are_checked_like_the_model() {
        use ZoneState::*;
        let m = mirror([(ImplicitlyOpened, 8), (Full, 0), (Empty, 0), (Empty, 0)]);
        let e = m.plan_write(IoOp::Write, 0, Some(0), 4096).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Zone Invalid Write: write at block 0 of zone 0, write pointer is at block 1"
        );
        assert_eq!(
            m.plan_write(IoOp::Append, 1, None, 4096)
                .unwrap_err()
                .kind(),
            ErrorKind::ZoneFull
        );
        let e = m
            .plan_write(IoOp::Write, 0, Some(4096), 6 << 20)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BoundaryError);
        assert_eq!(
            m.plan_write(IoOp::Append, 0, None, 128 << 10)
                .unwrap_err()
                .kind(),
            ErrorKind::AppendTooLarge
        );
        assert_eq!(
            m.plan_write(IoOp::Write, 4, Some(0), 4096)
                .unwrap_err()
                .kind(),
            ErrorKind::OutOfRange
        );
        let p = m.plan_write(IoOp::Append, 0, None, 4096).unwrap();
        assert_eq!(p.offset_bytes, 4096);
        assert!(!p.closes_another_zone);
    }

    #[test]
    fn resources_are_predicted() {
        use ZoneState::*;
        // Two open (one implicitly), one closed: the active limit (3) is reached.
        let m = mirror([
            (ImplicitlyOpened, 8),
            (ExplicitlyOpened, 0),
            (Closed, 8),
            (Empty, 0),
        ]);
        let e = m.plan_write(IoOp::Write, 3, Some(0), 4096).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TooManyActive);
        let p = m.plan_write(IoOp::Write, 2, Some(4096), 4096).unwrap();
        assert!(p.closes_another_zone, "zone 0 must be closed for zone 2");
        let m = mirror([
            (ExplicitlyOpened, 0),
            (ExplicitlyOpened, 0),
            (Closed, 8),
            (Empty, 0),
        ]);
        let e = m.plan_write(IoOp::Write, 2, Some(4096), 4096).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Too Many Open Zones: zone 2 needs an open resource, all 2 are held by explicitly opened zones"
        );
        assert_eq!(
            m.plan_action(ZoneAction::Open, 2).unwrap_err().kind(),
            ErrorKind::TooManyOpen
        );
        assert_eq!(
            m.select_all(ZoneAction::Open).unwrap_err().kind(),
            ErrorKind::TooManyOpen
        );
        assert_eq!(m.select_all(ZoneAction::Close).unwrap(), vec![0, 1]);
    }

    #[test]
    fn transitions_and_data_end() {
        use ZoneState::*;
        let mut m = mirror([(Empty, 0), (Full, 0), (Empty, 0), (Empty, 0)]);
        assert_eq!(
            m.plan_action(ZoneAction::Close, 0).unwrap_err().to_string(),
            "Invalid Zone State Transition: cannot close zone 0 in state Empty"
        );
        assert_eq!(
            m.plan_action(ZoneAction::Open, 1).unwrap_err().kind(),
            ErrorKind::InvalidTransition
        );
        m.wrote(0, 0, 8192);
        assert_eq!(m.state(0), ImplicitlyOpened);
        assert_eq!(m.check_read(0, 0, 4096).unwrap(), 8192);
        m.finished(0);
        let report = zone_info(0, &blk(0, Full, 8 * MIB_SECTORS), true).unwrap();
        m.refresh(&[report]);
        assert_eq!(m.state(0), Full);
        assert_eq!(
            m.check_read(0, 0, 4096).unwrap(),
            8192,
            "a finished zone's data still ends where it was written"
        );
        m.wrote(2, 0, 6 << 20);
        assert_eq!(m.state(2), Full);
        let e = m.check_read(2, (8 << 20) - 4096, 8192).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BoundaryError);
    }
}
