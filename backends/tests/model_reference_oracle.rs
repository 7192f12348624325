//! Property test: random op sequences against the shared [`ZoneTable`] and a tiny independent
//! reference model of the ZNS zone state machine must agree on every outcome and every zone.
//! proptest prints the failing case and persists its seed on failure.

use proptest::prelude::*;
use ziob_backends::{ErrorKind, Geometry, WriteFate, ZoneAction, ZoneState, ZoneTable, ZoneTarget};

const BS: u64 = 4096;
const ZONES: usize = 5;
const CAP_BLOCKS: u64 = 4;
const MAX_APPEND_BLOCKS: u64 = 2;

#[derive(Debug, Clone)]
enum Op {
    Write {
        zone: u32,
        at_wp: bool,
        blocks: u64,
    },
    Append {
        zone: u32,
        blocks: u64,
    },
    Action {
        action: ZoneAction,
        zone: Option<u32>,
    },
    ReadOnly {
        zone: u32,
    },
    Offline {
        zone: u32,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let zone = 0..ZONES as u32 + 1; // one past the end to reach LBA Out of Range
    let action = prop_oneof![
        Just(ZoneAction::Open),
        Just(ZoneAction::Close),
        Just(ZoneAction::Finish),
        Just(ZoneAction::Reset),
        Just(ZoneAction::Offline),
    ];
    prop_oneof![
        6 => (zone.clone(), prop::bool::weighted(0.85), 0..4u64)
            .prop_map(|(zone, at_wp, blocks)| Op::Write { zone, at_wp, blocks }),
        4 => (zone.clone(), 0..4u64).prop_map(|(zone, blocks)| Op::Append { zone, blocks }),
        6 => (action, prop::option::weighted(0.8, zone.clone()))
            .prop_map(|(action, zone)| Op::Action { action, zone }),
        1 => zone.clone().prop_map(|zone| Op::ReadOnly { zone }),
        1 => zone.prop_map(|zone| Op::Offline { zone }),
    ]
}

/// The reference: states, write pointers in blocks, and the implicit-open order.
#[derive(Debug, Clone)]
struct Reference {
    state: Vec<ZoneState>,
    wp: Vec<u64>,
    implicit_order: Vec<usize>,
    max_open: Option<usize>,
    max_active: Option<usize>,
}

impl Reference {
    fn count(&self, f: impl Fn(ZoneState) -> bool) -> usize {
        self.state.iter().filter(|&&s| f(s)).count()
    }
    fn open(&self) -> usize {
        self.count(|s| matches!(s, ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened))
    }
    fn active(&self) -> usize {
        self.open() + self.count(|s| s == ZoneState::Closed)
    }
    fn set(&mut self, z: usize, s: ZoneState) {
        self.implicit_order.retain(|&x| x != z);
        if s == ZoneState::ImplicitlyOpened {
            self.implicit_order.push(z);
        }
        self.state[z] = s;
    }
    /// Gets resources for zone z to become open (from Empty: an active one too).
    fn make_room(&mut self, z: usize) -> Result<(), ErrorKind> {
        if self.state[z] == ZoneState::Empty && self.max_active.is_some_and(|m| self.active() >= m)
        {
            return Err(ErrorKind::TooManyActive);
        }
        if self.max_open.is_some_and(|m| self.open() >= m) {
            let victim = *self.implicit_order.first().ok_or(ErrorKind::TooManyOpen)?;
            self.set(victim, ZoneState::Closed);
        }
        Ok(())
    }
    fn write(&mut self, z: usize, at: Option<u64>, n: u64) -> Result<(), ErrorKind> {
        if z >= ZONES {
            return Err(ErrorKind::OutOfRange);
        }
        if n == 0 {
            return Err(ErrorKind::Misaligned);
        }
        if at.is_none() && n > MAX_APPEND_BLOCKS {
            return Err(ErrorKind::AppendTooLarge);
        }
        match self.state[z] {
            ZoneState::Offline => return Err(ErrorKind::Offline),
            ZoneState::ReadOnly => return Err(ErrorKind::ReadOnly),
            ZoneState::Full => return Err(ErrorKind::ZoneFull),
            _ => {}
        }
        let at = at.unwrap_or(self.wp[z]);
        if at != self.wp[z] {
            return Err(ErrorKind::InvalidWrite);
        }
        if at + n > CAP_BLOCKS {
            return Err(ErrorKind::BoundaryError);
        }
        if matches!(self.state[z], ZoneState::Empty | ZoneState::Closed) {
            self.make_room(z)?;
            self.set(z, ZoneState::ImplicitlyOpened);
        }
        self.wp[z] += n;
        if self.wp[z] == CAP_BLOCKS {
            self.set(z, ZoneState::Full);
        }
        Ok(())
    }
    fn action(&mut self, a: ZoneAction, z: usize) -> Result<(), ErrorKind> {
        use ZoneState::*;
        match (a, self.state[z]) {
            (ZoneAction::Open, ExplicitlyOpened) | (ZoneAction::Close, Closed) => {}
            (ZoneAction::Finish, Full)
            | (ZoneAction::Reset, Empty)
            | (ZoneAction::Offline, Offline) => {}
            (ZoneAction::Open, ImplicitlyOpened) => self.set(z, ExplicitlyOpened),
            (ZoneAction::Open, Empty | Closed) => {
                self.make_room(z)?;
                self.set(z, ExplicitlyOpened);
            }
            (ZoneAction::Close, ImplicitlyOpened | ExplicitlyOpened) => self.set(z, Closed),
            (ZoneAction::Finish, Empty | ImplicitlyOpened | ExplicitlyOpened | Closed) => {
                self.set(z, Full);
                self.wp[z] = CAP_BLOCKS;
            }
            (ZoneAction::Reset, ImplicitlyOpened | ExplicitlyOpened | Closed | Full) => {
                self.set(z, Empty);
                self.wp[z] = 0;
            }
            (ZoneAction::Offline, ReadOnly) => self.set(z, Offline),
            _ => return Err(ErrorKind::InvalidTransition),
        }
        Ok(())
    }
    fn action_all(&mut self, a: ZoneAction) -> Result<(), ErrorKind> {
        use ZoneState::*;
        let applies = |s: ZoneState| match a {
            ZoneAction::Open => s == Closed,
            ZoneAction::Close => matches!(s, ImplicitlyOpened | ExplicitlyOpened),
            ZoneAction::Finish => matches!(s, ImplicitlyOpened | ExplicitlyOpened | Closed),
            ZoneAction::Reset => matches!(s, ImplicitlyOpened | ExplicitlyOpened | Closed | Full),
            ZoneAction::Offline => s == ReadOnly,
        };
        let chosen: Vec<usize> = (0..ZONES).filter(|&z| applies(self.state[z])).collect();
        if a == ZoneAction::Open
            && self
                .max_open
                .is_some_and(|m| self.open() + chosen.len() > m)
        {
            return Err(ErrorKind::TooManyOpen);
        }
        for z in chosen {
            self.action(a, z)?;
        }
        Ok(())
    }
    fn device_initiated(&mut self, z: usize, s: ZoneState) {
        self.set(z, s);
    }
}

fn run(ops: Vec<Op>, max_open: Option<u32>, max_active: Option<u32>) -> Result<(), TestCaseError> {
    let g = Geometry {
        block_size_bytes: BS,
        zone_size_bytes: 6 * BS,
        zone_capacity_bytes: CAP_BLOCKS * BS,
        zone_count: ZONES as u32,
        max_open_zones: max_open,
        max_active_zones: max_active,
        max_append_bytes: MAX_APPEND_BLOCKS * BS,
        volatile_write_cache: true,
    };
    let mut table = ZoneTable::new(&g);
    let mut reference = Reference {
        state: vec![ZoneState::Empty; ZONES],
        wp: vec![0; ZONES],
        implicit_order: Vec::new(),
        max_open: max_open.map(|m| m as usize),
        max_active: max_active.map(|m| m as usize),
    };
    for (step, op) in ops.into_iter().enumerate() {
        let (got, want) = match op.clone() {
            Op::Write {
                zone,
                at_wp,
                blocks,
            } => {
                let wp = reference.wp.get(zone as usize).copied().unwrap_or(0);
                let at = if at_wp { wp } else { wp + 1 };
                let got = table
                    .begin_write(zone, at * BS, blocks * BS)
                    .map(|r| assert_eq!(table.complete(r, true), WriteFate::Done));
                (
                    got.map_err(|e| e.kind()),
                    reference.write(zone as usize, Some(at), blocks),
                )
            }
            Op::Append { zone, blocks } => {
                let got = table.begin_append(zone, blocks * BS).map(|r| {
                    assert_eq!(
                        r.offset_bytes,
                        reference.wp[zone as usize] * BS,
                        "append landed off the write pointer"
                    );
                    assert_eq!(table.complete(r, true), WriteFate::Done);
                });
                (
                    got.map_err(|e| e.kind()),
                    reference.write(zone as usize, None, blocks),
                )
            }
            Op::Action {
                action,
                zone: Some(zone),
            } => {
                let got = table
                    .apply(action, ZoneTarget::One(zone))
                    .map_err(|e| e.kind());
                let want = if zone as usize >= ZONES {
                    Err(ErrorKind::OutOfRange)
                } else {
                    reference.action(action, zone as usize)
                };
                (got, want)
            }
            Op::Action { action, zone: None } => (
                table.apply(action, ZoneTarget::All).map_err(|e| e.kind()),
                reference.action_all(action),
            ),
            Op::ReadOnly { zone } | Op::Offline { zone } if zone as usize >= ZONES => continue,
            Op::ReadOnly { zone } => {
                table.make_read_only(zone);
                reference.device_initiated(zone as usize, ZoneState::ReadOnly);
                (Ok(()), Ok(()))
            }
            Op::Offline { zone } => {
                table.make_offline(zone);
                reference.device_initiated(zone as usize, ZoneState::Offline);
                (Ok(()), Ok(()))
            }
        };
        prop_assert_eq!(got, want, "step {}: {:?}", step, op);
        let report = table.report(0, ZONES as u32).unwrap();
        for (z, info) in report.iter().enumerate() {
            prop_assert_eq!(
                info.state,
                reference.state[z],
                "step {}: {:?}: state of zone {}",
                step,
                op,
                z
            );
            if !matches!(info.state, ZoneState::ReadOnly | ZoneState::Offline) {
                prop_assert_eq!(
                    info.write_pointer_bytes,
                    reference.wp[z] * BS,
                    "step {}: {:?}: wp of zone {}",
                    step,
                    op,
                    z
                );
            }
        }
        prop_assert_eq!(table.open_in_use() as usize, reference.open());
        prop_assert_eq!(table.active_in_use() as usize, reference.active());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn zone_table_matches_the_reference(
        ops in prop::collection::vec(op(), 1..80),
        limits in prop_oneof![
            Just((Some(2), Some(3))),
            Just((Some(1), Some(1))),
            Just((Some(3), None)),
            Just((None, Some(2))),
            Just((None, None)),
        ],
    ) {
        run(ops, limits.0, limits.1)?;
    }
}
