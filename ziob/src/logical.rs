//! The zone states the buffer shows to applications: the NVMe ZNS transitions without
//! resource limits (the buffer lifts the device's open/active limits, see `shard`).

use ziob_backends::{DeviceError, ZoneAction, ZoneState};

/// The state after a successful zone management `action` on a zone in `state`, or the
/// error a ZNS device returns (Invalid Zone State Transition, Zone Is Read Only, Zone Is
/// Offline). Mirrors the device model's table; a test checks both agree on every pair.
pub(crate) fn apply_action(
    zone: u32,
    action: ZoneAction,
    state: ZoneState,
) -> Result<ZoneState, DeviceError> {
    use ZoneState::*;
    Ok(match (action, state) {
        (ZoneAction::Open, Empty | Closed | ImplicitlyOpened | ExplicitlyOpened) => {
            ExplicitlyOpened
        }
        (ZoneAction::Close, Closed) => Closed,
        (ZoneAction::Close, ImplicitlyOpened | ExplicitlyOpened) => Closed,
        (ZoneAction::Finish, Empty | ImplicitlyOpened | ExplicitlyOpened | Closed | Full) => Full,
        (ZoneAction::Reset, Empty | ImplicitlyOpened | ExplicitlyOpened | Closed | Full) => Empty,
        (ZoneAction::Offline, Offline | ReadOnly) => Offline,
        _ => {
            return Err(DeviceError::InvalidTransition {
                zone,
                action,
                state,
            })
        }
    })
}

/// The state after data was written to a zone in `state` (which accepted it).
pub(crate) fn after_write(state: ZoneState, full: bool) -> ZoneState {
    if full {
        ZoneState::Full
    } else if state == ZoneState::ExplicitlyOpened {
        state
    } else {
        ZoneState::ImplicitlyOpened
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ziob_backends::{Geometry, ZoneTable, ZoneTarget};

    const STATES: [ZoneState; 5] = [
        ZoneState::Empty,
        ZoneState::ImplicitlyOpened,
        ZoneState::ExplicitlyOpened,
        ZoneState::Closed,
        ZoneState::Full,
    ];
    const ACTIONS: [ZoneAction; 5] = [
        ZoneAction::Open,
        ZoneAction::Close,
        ZoneAction::Finish,
        ZoneAction::Reset,
        ZoneAction::Offline,
    ];

    /// Drives a device-model zone (no limits) into `state`.
    fn table_in(state: ZoneState) -> ZoneTable {
        let g = Geometry::new(1, 1 << 20);
        let mut t = ZoneTable::new(&g);
        match state {
            ZoneState::Empty => {}
            ZoneState::ImplicitlyOpened => {
                let r = t.begin_write(0, 0, 4096).unwrap();
                t.complete(r, true);
            }
            ZoneState::ExplicitlyOpened => t.apply(ZoneAction::Open, ZoneTarget::One(0)).unwrap(),
            ZoneState::Closed => {
                t.apply(ZoneAction::Open, ZoneTarget::One(0)).unwrap();
                t.apply(ZoneAction::Close, ZoneTarget::One(0)).unwrap();
            }
            ZoneState::Full => t.apply(ZoneAction::Finish, ZoneTarget::One(0)).unwrap(),
            _ => unreachable!(),
        }
        t
    }

    #[test]
    fn agrees_with_the_device_model_on_every_pair() {
        for state in STATES {
            for action in ACTIONS {
                let mut t = table_in(state);
                assert_eq!(t.info(0).unwrap().state, state);
                let model = t
                    .apply(action, ZoneTarget::One(0))
                    .map(|_| t.info(0).unwrap().state);
                let ours = apply_action(0, action, state);
                match (model, ours) {
                    (Ok(a), Ok(b)) => assert_eq!(a, b, "{action:?} from {state:?}"),
                    (Err(a), Err(b)) => assert_eq!(a.kind(), b.kind(), "{action:?} from {state:?}"),
                    (a, b) => panic!("{action:?} from {state:?}: model {a:?}, buffer {b:?}"),
                }
            }
        }
    }
}
