//! A failed write-back must not wedge the shard. The device fails 1–3 runs of 1–12 of its
//! next ops with EIO (`Fault::FailOp`: a write-back, a device close, a flush, a report...;
//! short runs are retried away, long ones are kept as the zone's error) while tasks on
//! both cores append to and flush zones of a device with one open resource per core and a
//! small buffer. Checks, seeded:
//! - every call answers within the watchdog, with Ok or an error it may give here (the
//!   zone's write-back error, EIO of the call's own device op, `BufferFull`);
//! - `sync` answers (with the error or not), and so does `flush` of every zone;
//! - a zone whose flush reports the write-back error keeps reporting it (append, flush)
//!   until it is reset, its acknowledged data reads back meanwhile; the reset succeeds and
//!   clears it;
//! - afterwards every zone takes appends and flushes again, `sync` and `close` are Ok, and
//!   every append acknowledged in a zone that was not reset reads back.
//!
//! Seeds: `ZIOB_SHARD_SEEDS` (see `shard_support::seeds`).

mod shard_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use shard_support::{record, watchdog, Rng, SlowMem};
use ziob::backends::Fault;
use ziob::{DmaBuf, ErrorKind, Geometry, Runtime, Ziob, ZiobConfig, ZiobError};

const ZONES: u32 = 6;
const WATCHDOG_S: u64 = 20;

/// (zone, offset, id, len) of every acknowledged append.
type Acked = Arc<Mutex<Vec<(u32, u64, u64, usize)>>>;

/// Errors a call may return while faults are injected.
fn allowed(e: &ZiobError) -> bool {
    match e {
        ZiobError::Writeback { .. }
        | ZiobError::BufferFull { .. }
        | ZiobError::ZonesFailed { .. } => true,
        ZiobError::Device(d) => d.kind() == ErrorKind::Io,
        _ => false,
    }
}

#[test]
fn a_failed_writeback_keeps_its_error_until_reset_and_wedges_nothing() {
    // About one seed in eight keeps a write-back error (timing decides which op a fault hits):
    // 150 seeds make a run without one practically impossible (40 gave none in 1 of 4 runs).
    let seeds = shard_support::seeds(0..150);
    let mut resets = 0;
    for seed in seeds.clone() {
        resets += Runtime::builder()
            .cores(2)
            .build()
            .unwrap()
            .block_on(move || async move { run(seed).await })
            .unwrap();
    }
    // Not vacuous: some write-backs failed and their zones were reset.
    eprintln!("{resets} zones with a failed write-back over seeds {seeds:?}");
    if seeds.end - seeds.start >= 20 {
        assert!(resets > 0, "no seed of {seeds:?} made a write-back fail");
    }
}

/// Runs one seed; returns how many zones had a failed write-back (and were reset).
async fn run(seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let mut g = Geometry::new(ZONES, 64 << 10);
    g.max_open_zones = Some(2); // one per core
    let dev = SlowMem::new("mem:wbfail", &g, seed);
    let config = ZiobConfig {
        writeback_unit_bytes: Some(8192),
        shard_budget_bytes: 40 << 10,
        idle_writeback: (rng.below(2) == 0).then(|| Duration::from_millis(2)),
        ..ZiobConfig::default()
    };
    let z = Ziob::with_device(dev.clone(), config).await.unwrap();
    let base = dev.mem.op_count();
    // 1–3 faults, each a run of 1–12 failed ops in a row: short runs are retried away
    // (transient), long ones outlast the retries and the error is kept.
    for _ in 0..1 + rng.below(3) {
        let at = base + rng.below(40);
        for k in 0..1 + rng.below(12) {
            dev.mem.inject(Fault::FailOp { op_index: at + k });
        }
    }
    let acked: Acked = Arc::default();
    let mut tasks = Vec::new();
    for core in 0..2usize {
        for t in 0..2u64 {
            let (z, acked) = (z.clone(), acked.clone());
            let id0 = (core as u64 * 2 + t) << 32;
            tasks.push(ziob::runtime::spawn(async move {
                ziob::runtime::call_on(core, move || async move {
                    let mut rng = Rng::new(seed ^ id0);
                    for n in 0..30u64 {
                        let zone = rng.below(u64::from(ZONES)) as u32;
                        let what = format!("seed {seed}: op {n} of task {id0:#x} on zone {zone}");
                        let res = match rng.below(10) {
                            0..=6 => {
                                let len = 1 + rng.below(9000) as usize;
                                let data = DmaBuf::from_slice(&record(zone, id0 | n, len));
                                match watchdog(WATCHDOG_S, &what, z.append(zone, data)).await {
                                    Ok(off) => {
                                        acked.lock().unwrap().push((zone, off, id0 | n, len));
                                        Ok(())
                                    }
                                    Err(ZiobError::Device(d))
                                        if matches!(
                                            d.kind(),
                                            ErrorKind::ZoneFull | ErrorKind::BoundaryError
                                        ) =>
                                    {
                                        Ok(())
                                    }
                                    Err(e) => Err(e),
                                }
                            }
                            7 | 8 => watchdog(WATCHDOG_S, &what, z.flush(zone)).await,
                            _ => watchdog(WATCHDOG_S, &what, z.sync()).await,
                        };
                        if let Err(e) = res {
                            assert!(allowed(&e), "{what}: unexpected error {e} ({e:?})");
                        }
                    }
                })
                .await
                .unwrap();
            }));
        }
    }
    for t in tasks {
        t.await;
    }
    dev.mem.clear_faults();
    let res = watchdog(
        WATCHDOG_S,
        format!("seed {seed}: sync after the faults"),
        z.sync(),
    )
    .await;
    if let Err(e) = &res {
        assert!(allowed(e), "seed {seed}: sync: {e}");
    }
    // Zones whose write-back failed report it until reset; a reset clears it.
    let mut reset = Vec::new();
    for zone in 0..ZONES {
        let what = format!("seed {seed}: flush of zone {zone} after the faults");
        match watchdog(WATCHDOG_S, &what, z.flush(zone)).await {
            Ok(()) => {}
            Err(e @ ZiobError::Writeback { .. }) => {
                let again = watchdog(WATCHDOG_S, &what, z.flush(zone)).await;
                assert!(
                    matches!(again, Err(ZiobError::Writeback { .. })),
                    "{what}: the write-back error ({e}) did not stay: {again:?}"
                );
                let data = DmaBuf::from_slice(&[1; 100]);
                let append = watchdog(WATCHDOG_S, &what, z.append(zone, data)).await;
                assert!(
                    matches!(append, Err(ZiobError::Writeback { .. })),
                    "{what}: an append after the write-back error ({e}) gave {append:?}"
                );
                // Its data stays readable until the reset.
                let records: Vec<_> = acked
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|r| r.0 == zone)
                    .copied()
                    .collect();
                for (_, off, id, len) in records {
                    let got = watchdog(WATCHDOG_S, &what, z.read(zone, off, len))
                        .await
                        .unwrap_or_else(|e| panic!("{what}: read of record {id}: {e}"));
                    assert!(
                        got[..] == record(zone, id, len)[..],
                        "{what}: record {id} at {off} (+{len}) does not read back after the write-back error"
                    );
                }
                watchdog(
                    WATCHDOG_S,
                    format!("seed {seed}: reset of zone {zone}"),
                    z.zone(zone).reset(),
                )
                .await
                .unwrap_or_else(|e| panic!("seed {seed}: reset of failed zone {zone}: {e}"));
                reset.push(zone);
            }
            Err(e) => panic!("{what}: {e} ({e:?})"),
        }
    }
    // Everything works again.
    for zone in 0..ZONES {
        let what = format!("seed {seed}: zone {zone} after recovery");
        let data = DmaBuf::from_slice(&record(zone, u64::MAX, 5000));
        let fits = {
            let info = z.zone(zone).report().await.unwrap();
            info.write_pointer_bytes + 5000 <= g.zone_capacity_bytes
                && info.state != ziob::ZoneState::Full
        };
        if fits {
            watchdog(WATCHDOG_S, &what, z.append(zone, data))
                .await
                .unwrap_or_else(|e| panic!("{what}: append: {e}"));
        }
        watchdog(WATCHDOG_S, &what, z.flush(zone))
            .await
            .unwrap_or_else(|e| panic!("{what}: flush: {e}"));
    }
    watchdog(WATCHDOG_S, format!("seed {seed}: final sync"), z.sync())
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: final sync: {e}"));
    let acked = std::mem::take(&mut *acked.lock().unwrap());
    for (zone, off, id, len) in acked {
        if reset.contains(&zone) {
            continue;
        }
        let got = z.read(zone, off, len).await.unwrap();
        assert!(
            got[..] == record(zone, id, len)[..],
            "seed {seed}: zone {zone}: record {id} at {off} (+{len}) does not read back"
        );
    }
    watchdog(WATCHDOG_S, format!("seed {seed}: close"), z.close())
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: close: {e}"));
    reset.len()
}
