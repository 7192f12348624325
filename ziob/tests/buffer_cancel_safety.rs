//! Issue #11 item 11: every public operation may be dropped at any await point, from the
//! zone's owning core or from another core, without leaving a zone stuck, memory charged or
//! acknowledged data lost. Seeded: drivers on both cores issue random operations on zones of
//! both cores and drop most of them part-way (after a random number of polls, or when a short
//! timer fires first). Afterwards every zone must still work (each step under a watchdog),
//! every acknowledged append that no reset may have covered must read back, and with all
//! zones reset the memory budget must be whole again.

mod shard_support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{select, Either};
use shard_support::{record, watchdog, PollBudget, Rng, SlowMem};
use ziob::{
    DmaBuf, Geometry, Runtime, Ziob, ZiobConfig, ZiobError, ZoneAction, ZoneState, ZoneTarget,
    ZonedDevice,
};

const ZONES: u32 = 6;
/// Zones from here on are never reset or finished (one per core): every acknowledged
/// append to them is checked. (A dropped reset may still land any time later, so appends to
/// a zone that saw one cannot all be checked.)
const KEPT_ZONES: u32 = 4;
const ZONE_BYTES: u64 = 4 << 20;

/// What the drivers saw, with a logical clock to order operations across tasks.
#[derive(Default)]
struct Log {
    /// (zone, start, end, offset, id, len) of acknowledged appends.
    appends: Vec<(u32, u64, u64, u64, u64, usize)>,
    /// (zone, start, end) of resets; `u64::MAX` as end when the reset was dropped or failed
    /// (it may still take effect).
    resets: Vec<(u32, u64, u64)>,
}

struct Shared {
    clock: AtomicU64,
    log: Mutex<Log>,
}

impl Shared {
    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::SeqCst)
    }
}

/// Runs `fut` to completion, or drops it part-way: after a random number of `Pending` polls,
/// or when a short timer fires first.
async fn maybe_cancelled<T>(rng: &mut Rng, fut: impl std::future::Future<Output = T>) -> Option<T> {
    match rng.below(10) {
        0..=5 => PollBudget::new(fut, rng.below(8) as u32).await,
        6..=7 => {
            let timer = ziob::runtime::sleep(Duration::from_micros(rng.below(400)));
            match select(std::pin::pin!(fut), std::pin::pin!(timer)).await {
                Either::Left((v, _)) => Some(v),
                Either::Right(_) => None,
            }
        }
        _ => Some(fut.await),
    }
}

/// No faults are injected and no device limit is set, so no write-back may fail: one that
/// does means the buffer and the device disagree (say, a reset done on the device but not in
/// the buffer).
fn check<T>(seed: u64, what: &str, res: &Option<ziob::Result<T>>) {
    if let Some(Err(e @ ZiobError::Writeback { .. })) = res {
        panic!("seed {seed}: {what}: {e}");
    }
}

async fn driver(z: Ziob<SlowMem>, shared: Arc<Shared>, seed: u64, id0: u64) {
    let mut rng = Rng::new(seed ^ id0);
    for n in 0..150u64 {
        let zone = rng.below(u64::from(ZONES)) as u32;
        let id = id0 | n;
        match rng.below(20) {
            0..=7 => {
                let len = if rng.below(12) == 0 {
                    70_000 + rng.below(100_000) as usize // streamed in pieces
                } else {
                    1 + rng.below(20_000) as usize
                };
                let data = record(zone, id, len);
                let start = shared.tick();
                let res =
                    maybe_cancelled(&mut rng, z.append(zone, DmaBuf::from_slice(&data))).await;
                check(seed, "append", &res);
                if let Some(Ok(off)) = res {
                    let end = shared.tick();
                    shared
                        .log
                        .lock()
                        .unwrap()
                        .appends
                        .push((zone, start, end, off, id, len));
                }
            }
            8 => {
                let wp = z.report(zone, 1).await.unwrap()[0].write_pointer_bytes;
                let len = 1 + rng.below(9000) as usize;
                let data = record(zone, id, len);
                let res =
                    maybe_cancelled(&mut rng, z.write_at(zone, wp, DmaBuf::from_slice(&data)))
                        .await;
                check(seed, "write_at", &res);
            }
            9..=11 => {
                let off = rng.below(ZONE_BYTES / 2);
                let len = 1 + rng.below(40_000) as usize;
                let _ = maybe_cancelled(&mut rng, z.read(zone, off, len)).await;
            }
            12..=13 => {
                let res = maybe_cancelled(&mut rng, z.flush(zone)).await;
                check(seed, "flush", &res);
            }
            14 => {
                let res = maybe_cancelled(&mut rng, z.sync()).await;
                check(seed, "sync", &res);
            }
            15..=16 if zone < KEPT_ZONES => {
                let start = shared.tick();
                let res = maybe_cancelled(
                    &mut rng,
                    z.zone_action(ZoneAction::Reset, ZoneTarget::One(zone)),
                )
                .await;
                check(seed, "reset", &res);
                let end = match res {
                    Some(Ok(())) => shared.tick(),
                    _ => u64::MAX,
                };
                shared.log.lock().unwrap().resets.push((zone, start, end));
            }
            17 if zone < KEPT_ZONES => {
                let res = maybe_cancelled(
                    &mut rng,
                    z.zone_action(ZoneAction::Finish, ZoneTarget::One(zone)),
                )
                .await;
                check(seed, "finish", &res);
            }
            15..=18 => {
                let _ = maybe_cancelled(
                    &mut rng,
                    z.zone_action(ZoneAction::Close, ZoneTarget::One(zone)),
                )
                .await;
            }
            _ => {
                let _ = maybe_cancelled(
                    &mut rng,
                    z.zone_action(ZoneAction::Open, ZoneTarget::One(zone)),
                )
                .await;
            }
        }
    }
}

fn run(seed: u64) {
    Runtime::builder()
        .cores(2)
        .build()
        .unwrap()
        .block_on(move || async move {
            let g = Geometry::new(ZONES, ZONE_BYTES);
            let dev = SlowMem::new("mem:cancel", &g, seed);
            let cfg = ZiobConfig {
                shard_budget_bytes: 128 << 10,
                writeback_unit_bytes: Some(16 << 10),
                idle_writeback: Some(Duration::from_millis(2)),
                ..ZiobConfig::default()
            };
            let z = Ziob::with_device(dev.clone(), cfg).await.unwrap();
            let shared = Arc::new(Shared {
                clock: AtomicU64::new(0),
                log: Mutex::default(),
            });
            let mut cores = Vec::new();
            for core in 0..2usize {
                let (z, shared) = (z.clone(), shared.clone());
                cores.push(ziob::runtime::spawn(async move {
                    ziob::runtime::call_on(core, move || async move {
                        let tasks: Vec<_> = (0..4u64)
                            .map(|t| {
                                let id0 = (core as u64 * 4 + t) << 32;
                                ziob::runtime::spawn(driver(z.clone(), shared.clone(), seed, id0))
                            })
                            .collect();
                        for t in tasks {
                            t.await;
                        }
                    })
                    .await
                    .unwrap();
                }));
            }
            let dump = z.clone();
            watchdog(60, format!("seed {seed}: drivers"), async {
                let all = futures::future::join_all(cores);
                let t = std::pin::pin!(all);
                let s = std::pin::pin!(ziob::runtime::sleep(Duration::from_secs(50)));
                if let Either::Right(_) = select(t, s).await {
                    panic!("seed {seed}: drivers stuck:\n{}", dump.debug_state().await.unwrap());
                }
            })
            .await;
            // Dropped calls made from another core may still be finishing: let them.
            ziob::runtime::sleep(Duration::from_millis(100)).await.unwrap();
            let what = |s: &str| format!("seed {seed}: {s}");
            // No faults are injected and no device limit is set: every write-back succeeds,
            // unless the buffer and the device disagree (a reset or finish half done).
            watchdog(20, what("sync"), z.sync())
                .await
                .unwrap_or_else(|e| panic!("seed {seed}: sync after the drivers: {e}"));
            for zone in 0..ZONES {
                let buffer = z.report(zone, 1).await.unwrap()[0];
                let device = dev.mem.report_zones(zone, 1).await.unwrap()[0];
                assert_eq!(
                    (buffer.write_pointer_bytes, buffer.state == ZoneState::Full),
                    (device.write_pointer_bytes, device.state == ZoneState::Full),
                    "seed {seed}: zone {zone}: the buffer and the device disagree after a sync"
                );
            }

            // Acknowledged appends no reset may have covered read back.
            let log = std::mem::take(&mut *shared.log.lock().unwrap());
            let mut checked = 0;
            for &(zone, start, _end, off, id, len) in &log.appends {
                let covered = log
                    .resets
                    .iter()
                    .any(|&(rz, _rs, re)| rz == zone && re >= start);
                if covered {
                    continue;
                }
                let got = watchdog(20, what("read back"), z.read(zone, off, len))
                    .await
                    .unwrap();
                assert!(
                    got[..] == record(zone, id, len)[..],
                    "seed {seed}: zone {zone}: acknowledged append at {off} ({len} bytes) reads back wrong"
                );
                checked += 1;
            }
            eprintln!(
                "seed {seed}: {} acknowledged appends, {checked} checked, {} resets",
                log.appends.len(),
                log.resets.len()
            );

            // No zone is stuck: reset, append, flush, read, each under a watchdog.
            for zone in 0..ZONES {
                let step = |s: &str| format!("seed {seed}: zone {zone}: {s}");
                watchdog(20, step("reset"), z.zone(zone).reset()).await.unwrap();
                let data = record(zone, 7, 5000);
                let off = watchdog(20, step("append"), z.append(zone, DmaBuf::from_slice(&data)))
                    .await
                    .unwrap();
                assert_eq!(off, 0);
                watchdog(20, step("flush"), z.flush(zone)).await.unwrap();
                let got = watchdog(20, step("read"), z.read(zone, 0, 5000)).await.unwrap();
                assert!(got[..] == data[..], "seed {seed}: zone {zone}");
                watchdog(20, step("reset again"), z.zone(zone).reset())
                    .await
                    .unwrap();
            }
            // Idle with every zone empty: the whole budget is free.
            let used = z.memory_used_bytes().await.unwrap();
            assert!(
                used.iter().all(|&u| u == 0),
                "seed {seed}: memory still charged with every zone reset: {used:?}\n{}",
                z.debug_state().await.unwrap()
            );
            watchdog(20, what("close"), z.close()).await.unwrap();
        })
        .unwrap();
}

#[test]
fn operations_dropped_part_way_leave_no_zone_stuck_and_no_memory_charged() {
    for seed in shard_support::seeds(0..4) {
        run(seed);
    }
}
