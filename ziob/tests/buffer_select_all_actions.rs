//! Zone management with Select All (`ZoneTarget::All`) acts on the zones in the state they
//! are in now, buffered and in pass-through. Seeded: zones are brought into random states
//! (appends, open, close, finish) through ZIOB and, the same way, on a reference `mem`
//! device; then one Select All action (open, close, finish, reset) runs on both. Every
//! zone's state must agree with the reference. (In pass-through the shard once chose the
//! zones from the states it saw when the instance was opened.)
//!
//! Seeds: `ZIOB_SHARD_SEEDS` (see `shard_support::seeds`).

mod shard_support;

use shard_support::Rng;
use ziob::backends::MemDevice;
use ziob::{DmaBuf, Geometry, Runtime, Ziob, ZiobConfig, ZoneAction, ZoneTarget, ZonedDevice};

const ZONES: u32 = 6;

#[test]
fn select_all_acts_on_the_zones_current_states() {
    for seed in shard_support::seeds(0..32) {
        Runtime::builder()
            .cores(2)
            .build()
            .unwrap()
            .block_on(move || async move {
                let mut rng = Rng::new(seed);
                let g = Geometry::new(ZONES, 64 << 10);
                let buffered = rng.below(2) == 0;
                let config = if buffered {
                    ZiobConfig::default()
                } else {
                    ZiobConfig::pass_through()
                };
                let z = Ziob::with_device(MemDevice::new("mem:all", &g).unwrap(), config)
                    .await
                    .unwrap();
                let reference = MemDevice::new("mem:reference", &g).unwrap();
                for zone in 0..ZONES {
                    let one = ZoneTarget::One(zone);
                    match rng.below(5) {
                        0 => {} // Empty
                        1 => {
                            z.zone_action(ZoneAction::Open, one).await.unwrap();
                            reference.zone_action(ZoneAction::Open, one).await.unwrap();
                        }
                        n => {
                            let data = vec![7u8; 4096 * (1 + rng.below(4)) as usize];
                            z.append(zone, DmaBuf::from_slice(&data)).await.unwrap();
                            let (res, _) =
                                reference.append(zone, DmaBuf::from_slice(&data)).await;
                            res.unwrap();
                            let then = match n {
                                3 => Some(ZoneAction::Close),
                                4 => Some(ZoneAction::Finish),
                                _ => None,
                            };
                            if let Some(a) = then {
                                z.zone_action(a, one).await.unwrap();
                                reference.zone_action(a, one).await.unwrap();
                            }
                        }
                    }
                }
                let action = [
                    ZoneAction::Open,
                    ZoneAction::Close,
                    ZoneAction::Finish,
                    ZoneAction::Reset,
                ][rng.below(4) as usize];
                z.zone_action(action, ZoneTarget::All).await.unwrap();
                reference
                    .zone_action(action, ZoneTarget::All)
                    .await
                    .unwrap();
                let got = z.report(0, ZONES).await.unwrap();
                let want = reference.report_zones(0, ZONES).await.unwrap();
                for (g, w) in got.iter().zip(&want) {
                    assert_eq!(
                        (g.index, g.state),
                        (w.index, w.state),
                        "seed {seed} (buffered: {buffered}): after {action:?} of all zones, zone {} is {:?}, the reference device has it {:?}",
                        g.index,
                        g.state,
                        w.state
                    );
                }
            })
            .unwrap();
    }
}
