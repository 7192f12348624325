//! Client calls dropped at random points (seeded: polled a few times, then dropped) from
//! tokio tasks, over a device whose calls take a while: afterwards no zone is wedged (each
//! takes an append, a flush and a read within a watchdog) and every append that completed is
//! readable with its bytes.

mod client_support;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use client_support::shard_support::{self, PollBudget, SlowMem};
use client_support::{bounded, record, tokio_rt, Rng};
use ziob::{Client, ErrorKind, Geometry, Runtime, Ziob, ZiobConfig, ZiobError};

/// (zone, offset, record id, length) of every acknowledged append.
type Acked = Arc<Mutex<Vec<(u32, u64, u64, usize)>>>;

const ZONES: u32 = 9;

/// Awaits `fut` whole, or polls it `budget` times and drops it (then `None`).
async fn maybe_drop<F: Future>(fut: F, budget: Option<u32>) -> Option<F::Output> {
    match budget {
        None => Some(fut.await),
        Some(b) => PollBudget::new(fut, b).await,
    }
}

fn expected(e: &ZiobError) -> bool {
    // A finish makes its zone Full; appends to it then fail, as on the device.
    matches!(
        e.kind(),
        Some(ErrorKind::ZoneFull | ErrorKind::BoundaryError)
    )
}

#[test]
fn dropped_calls_never_wedge_a_zone_or_lose_a_completed_append() {
    for seed in shard_support::seeds(0..6) {
        bounded(180, &format!("seed {seed}"), move || run(seed));
    }
}

fn run(seed: u64) {
    let rt = Runtime::builder().cores(3).build().unwrap();
    let client: Client<SlowMem> = rt
        .block_on(move || async move {
            let g = Geometry::new(ZONES, 2 << 20);
            let cfg = ZiobConfig {
                shard_budget_bytes: 1 << 20,
                writeback_unit_bytes: Some(64 << 10),
                ..ZiobConfig::default()
            };
            let z = Ziob::with_device(SlowMem::new("mem:client-cancel", &g, seed), cfg)
                .await
                .unwrap();
            z.client()
        })
        .unwrap();
    let trt = tokio_rt(3);
    let acked: Acked = Arc::default();
    trt.block_on(async {
        let mut tasks = Vec::new();
        for t in 0..12u64 {
            let (c, acked) = (client.clone(), acked.clone());
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng::new(seed << 16 ^ t);
                for n in 0..50u64 {
                    let zone = rng.below(u64::from(ZONES)) as u32;
                    let budget = match rng.below(3) {
                        0 => None,
                        _ => Some(rng.below(4) as u32),
                    };
                    let id = t << 32 | n;
                    match rng.below(20) {
                        0..=11 => {
                            let len = 1 + rng.below(9000) as usize;
                            let data = record(zone, id, len);
                            let call = if n % 2 == 0 {
                                futures::future::Either::Left(c.append(zone, data.into()))
                            } else {
                                futures::future::Either::Right(c.append_slice(zone, &data))
                            };
                            match maybe_drop(call, budget).await {
                                Some(Ok(off)) => acked.lock().unwrap().push((zone, off, id, len)),
                                Some(Err(e)) if expected(&e) => {}
                                Some(Err(e)) => panic!("seed {seed}: append: {e}"),
                                None => {}
                            }
                        }
                        12..=14 => {
                            if let Some(Err(e)) = maybe_drop(c.read(zone, 0, 4096), budget).await {
                                panic!("seed {seed}: read: {e}");
                            }
                        }
                        15..=17 => {
                            if let Some(Err(e)) = maybe_drop(c.flush(zone), budget).await {
                                panic!("seed {seed}: flush: {e}");
                            }
                        }
                        18 => {
                            if let Some(Err(e)) = maybe_drop(c.sync(), budget).await {
                                panic!("seed {seed}: sync: {e}");
                            }
                        }
                        _ => {
                            // Rare: a finish (runs to the end once it reached the core).
                            if rng.below(4) == 0 {
                                if let Some(Err(e)) = maybe_drop(c.finish(zone), budget).await {
                                    panic!("seed {seed}: finish: {e}");
                                }
                            }
                        }
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        // No zone wedged: each takes a flush, an append (unless finished) and a read.
        for zone in 0..ZONES {
            let check = async {
                c_flush_append_read(&client, zone, seed).await;
            };
            tokio::time::timeout(Duration::from_secs(30), check)
                .await
                .unwrap_or_else(|_| panic!("seed {seed}: zone {zone} wedged"));
        }
        // Every completed append reads back.
        let acked = acked.lock().unwrap().clone();
        for (zone, off, id, len) in acked {
            let got = client.read(zone, off, len).await.unwrap();
            assert_eq!(
                &got[..],
                &record(zone, id, len)[..],
                "seed {seed}: zone {zone} off {off} len {len}"
            );
        }
        tokio::time::timeout(Duration::from_secs(30), client.close())
            .await
            .expect("close hangs")
            .unwrap();
    });
}

async fn c_flush_append_read(client: &Client<SlowMem>, zone: u32, seed: u64) {
    client.flush(zone).await.unwrap();
    match client.append_slice(zone, b"after").await {
        Ok(off) => assert_eq!(&client.read(zone, off, 5).await.unwrap()[..], b"after"),
        Err(e) if expected(&e) => {}
        Err(e) => panic!("seed {seed}: zone {zone}: {e}"),
    }
}
