//! Issue #11 item 12: a read waiting for a chunk held by a write-back must not hang when
//! another writer evicts that chunk before the reader runs again (the data is then on the
//! device). Many readers and writers over many zones on two cores with a small budget, as
//! `ziob-bench --workload readafterwrite --qd 512 --zones 64 --cores 2`; a watchdog turns a
//! hang into a failure.

mod shard_support;

use shard_support::{record, watchdog, Rng, SlowMem};
use ziob::{DmaBuf, Geometry, Runtime, Ziob, ZiobConfig};

const ZONES: u32 = 64;
const TASKS_PER_CORE: u64 = 256;
const ROUNDS: u64 = 8;

fn run(seed: u64, device: impl Fn(&Geometry) -> SlowMem + Send + 'static) {
    let rt = Runtime::builder().cores(2).build().unwrap();
    rt.block_on(move || async move {
        let g = Geometry::new(ZONES, 4 << 20);
        let dev = device(&g);
        let cfg = ZiobConfig {
            shard_budget_bytes: 768 << 10,
            writeback_unit_bytes: Some(16 << 10),
            idle_writeback: None,
            ..ZiobConfig::default()
        };
        let z = Ziob::with_device(dev, cfg).await.unwrap();
        let mut cores = Vec::new();
        for core in 0..2usize {
            let z = z.clone();
            cores.push(ziob::runtime::spawn(async move {
                ziob::runtime::call_on(core, move || async move {
                    let mut tasks = Vec::new();
                    for t in 0..TASKS_PER_CORE {
                        let z = z.clone();
                        let id = core as u64 * TASKS_PER_CORE + t;
                        tasks.push(ziob::runtime::spawn(async move {
                            let mut rng = Rng::new(seed ^ (id << 20));
                            for round in 0..ROUNDS {
                                let zone = rng.below(u64::from(ZONES)) as u32;
                                let len = 512 + rng.below(12 << 10) as usize;
                                let data = record(zone, id << 16 | round, len);
                                let off = z.append(zone, DmaBuf::from_slice(&data)).await.unwrap();
                                let got = z.read(zone, off, len).await.unwrap();
                                assert!(
                                    got[..] == data[..],
                                    "seed {seed}: zone {zone} offset {off} read back wrong"
                                );
                            }
                        }));
                    }
                    for t in tasks {
                        t.await;
                    }
                })
                .await
                .unwrap();
            }));
        }
        let all = futures::future::join_all(cores);
        let z2 = z.clone();
        watchdog(
            60,
            format!("seed {seed}: read-after-write workload"),
            async move {
                all.await;
            },
        )
        .await;
        let _ = z2;
        watchdog(30, "close", z.close()).await.unwrap();
    })
    .unwrap();
}

#[test]
fn reads_of_chunks_evicted_while_waiting_complete_on_mem() {
    for seed in shard_support::seeds(0..3) {
        run(seed, move |g| SlowMem::new("mem:raw", g, seed));
    }
}
