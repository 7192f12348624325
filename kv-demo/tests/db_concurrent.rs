//! Many threads at once: batches spanning shards are seen whole or not at all by snapshots,
//! scans and reads, while flushes and compactions run underneath.

mod db_common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use db_common::{key, tiny, with_watchdog};
use kv_demo::{Db, WriteBatch, WriteOptions};
use ziob::Runtime;

/// Writer threads each rewrite a group of keys (spread over the shards) in one batch with
/// one value per round; reader threads check through snapshots and scans that every group
/// always holds a single value — a torn cross-shard batch or an out-of-order publication
/// would show two.
#[test]
fn cross_shard_batches_are_seen_whole() {
    with_watchdog(300, || {
        let rt = Runtime::builder().cores(2).build().unwrap();
        let db = futures::executor::block_on(Db::open(
            rt.handle(),
            "mem:zones=64,zone_size=1M",
            tiny(4),
        ))
        .unwrap();
        const GROUPS: u64 = 4;
        const KEYS: u64 = 8;
        let group_key = |g: u64, i: u64| key(g * 100 + i);
        let shards: std::collections::BTreeSet<usize> =
            (0..KEYS).map(|i| db.shard_of(&group_key(0, i))).collect();
        assert!(shards.len() > 1, "a group must span shards");
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..GROUPS)
            .map(|g| {
                let db = db.clone();
                std::thread::spawn(move || {
                    futures::executor::block_on(async {
                        for round in 0..400u64 {
                            let mut b = WriteBatch::new();
                            for i in 0..KEYS {
                                let mut v = round.to_le_bytes().to_vec();
                                v.extend_from_slice(&[g as u8; 40]);
                                b.put(group_key(g, i), v).unwrap();
                            }
                            db.write(b, &WriteOptions::default()).await.unwrap();
                        }
                    })
                })
            })
            .collect();
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let db = db.clone();
                let stop = stop.clone();
                std::thread::spawn(move || {
                    futures::executor::block_on(async {
                        let mut checks = 0u64;
                        while !stop.load(Ordering::Acquire) || checks == 0 {
                            checks += 1;
                            let snap = db.snapshot();
                            if r == 0 {
                                let mut s = db.scan(None, None, Some(&snap)).await.unwrap();
                                let mut seen: Vec<Vec<Vec<u8>>> = vec![Vec::new(); GROUPS as usize];
                                while let Some((k, v)) = s.next().await.unwrap() {
                                    let n: u64 =
                                        std::str::from_utf8(&k[3..]).unwrap().parse().unwrap();
                                    seen[(n / 100) as usize].push(v.to_vec());
                                }
                                for (g, vals) in seen.iter().enumerate() {
                                    assert!(
                                        vals.is_empty() || vals.len() == KEYS as usize,
                                        "group {g}: {} of {KEYS} keys",
                                        vals.len()
                                    );
                                    assert!(
                                        vals.windows(2).all(|w| w[0] == w[1]),
                                        "group {g} torn in a scan"
                                    );
                                }
                            } else {
                                for g in 0..GROUPS {
                                    let mut vals = Vec::new();
                                    for i in 0..KEYS {
                                        vals.push(
                                            db.get_at(&group_key(g, i), &snap).await.unwrap(),
                                        );
                                    }
                                    assert!(
                                        vals.windows(2).all(|w| w[0] == w[1]),
                                        "group {g} torn in gets"
                                    );
                                }
                            }
                        }
                        checks
                    })
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Release);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
        futures::executor::block_on(async {
            let st = db.stats().await;
            assert!(st.flush_bytes > 0, "no flush ran underneath: {st:?}");
            for g in 0..GROUPS {
                for i in 0..KEYS {
                    let v = db.get(&group_key(g, i)).await.unwrap().unwrap();
                    assert_eq!(&v[..8], &399u64.to_le_bytes());
                }
            }
            db.close().await.unwrap();
        });
    });
}

/// Read your writes: a write that returned is visible to its writer's next read, even while
/// another thread's `sync` writes (whose lower sequence numbers publish only once durable)
/// are in flight.
#[test]
fn a_returned_write_is_visible_at_once() {
    with_watchdog(300, || {
        let dev = db_common::EmuFile::new("ryw");
        let rt = Runtime::builder().cores(2).build().unwrap();
        let db = futures::executor::block_on(Db::open(
            rt.handle(),
            &dev.spec(),
            db_common::tiny_emu(2, 64),
        ))
        .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let syncer = {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                futures::executor::block_on(async {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Acquire) {
                        i += 1;
                        db.put(
                            key(900_000 + i % 50),
                            vec![1u8; 100],
                            &WriteOptions { sync: true },
                        )
                        .await
                        .unwrap();
                    }
                })
            })
        };
        futures::executor::block_on(async {
            for i in 0..2000u64 {
                let k = key(i);
                db.put(
                    k.clone(),
                    i.to_le_bytes().to_vec(),
                    &WriteOptions::default(),
                )
                .await
                .unwrap();
                assert_eq!(
                    db.get(&k).await.unwrap().as_deref(),
                    Some(&i.to_le_bytes()[..]),
                    "write {i} not visible to its writer"
                );
            }
        });
        stop.store(true, Ordering::Release);
        syncer.join().unwrap();
        futures::executor::block_on(db.close()).unwrap();
    });
}

/// Polls `fut` to its end on this thread with a no-op waker, pausing a seeded while
/// whenever it is pending — as if its thread were preempted at each await point. The
/// longer pauses let another thread's `close` run to its end between two steps of a call.
fn poll_with_pauses<T>(fut: impl std::future::Future<Output = T>, rng: &mut db_common::Rng) -> T {
    let mut fut = std::pin::pin!(fut);
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    loop {
        if let std::task::Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        // Mostly short pauses; now and then one longer than a whole close.
        let pause = if rng.below(8) == 0 {
            2_000 + rng.below(18_000)
        } else {
            rng.below(1_000)
        };
        std::thread::sleep(std::time::Duration::from_micros(pause));
    }
}

/// Keys written before the race, from `PREFILL_BASE` on.
const PREFILLED: u64 = 3_000;
const PREFILL_BASE: u64 = 1 << 40;

/// Reads while writing: writer 0 gets one key it acknowledged (`acked`, in tables by then
/// mostly: the write buffer is 4 KiB), writer 1 scans up to 256 of the keys written before
/// the race (a table at a time), a slow consumer that a `close` may overtake. Every step
/// is paused. The others read nothing.
fn read_back(
    db: &Db,
    acked: &[Vec<u8>],
    t: u64,
    rng: &mut db_common::Rng,
) -> Result<(), kv_demo::DbError> {
    let k = &acked[rng.below(acked.len() as u64) as usize];
    match t {
        0 => {
            let v = poll_with_pauses(db.get(k), rng)?;
            assert!(v.is_some(), "own write unseen");
        }
        1 => {
            let from = key(PREFILL_BASE + rng.below(PREFILLED));
            let mut scan = poll_with_pauses(db.scan(Some(&from), None, None), rng)?;
            for _ in 0..256 {
                if poll_with_pauses(scan.next(), rng)?.is_none() {
                    break;
                }
                // A slow consumer: the scan may outlive the store.
                std::thread::sleep(std::time::Duration::from_micros(rng.below(200)));
            }
        }
        _ => {}
    }
    Ok(())
}

/// Writers and readers racing `close` all return — `Ok` before it, `Closed` after, never an
/// I/O error of the closed device — and nothing hangs (a writer must not queue for a WAL
/// pump that close has stopped). After reopen, what was acknowledged is there and a write
/// that returned `Closed` is not: a write in progress when close begins (say between its
/// WAL append and its sync) finishes before close goes on. The writers pause at their
/// await points and close comes at a seeded time, so the rounds search the interleavings.
#[test]
fn writers_racing_close_return() {
    with_watchdog(600, || {
        let dev = db_common::EmuFile::new("close-race");
        let rt = Runtime::builder().cores(2).build().unwrap();
        let rounds: u64 = db_common::env_or("KV_CLOSE_RACE_ROUNDS", 12);
        let seed = db_common::env_or("KV_CLOSE_RACE_SEED", 7);
        // No block cache: reads of tables go to the device, which close closes.
        let opts = || kv_demo::Options {
            cache_bytes: 0,
            ..db_common::tiny_emu(2, 64)
        };
        let mut rng = db_common::Rng(seed | 1);
        // Keys for the scans, in tables of the lower levels, read a table at a time.
        let db = futures::executor::block_on(Db::open(rt.handle(), &dev.spec(), opts())).unwrap();
        futures::executor::block_on(async {
            for i in 0..PREFILLED {
                let w = WriteOptions::default();
                db.put(key(PREFILL_BASE + i), vec![9; 64], &w)
                    .await
                    .unwrap();
            }
            db.close().await.unwrap();
        });
        for round in 0..rounds {
            let db =
                futures::executor::block_on(Db::open(rt.handle(), &dev.spec(), opts())).unwrap();
            let writers: Vec<_> = (0..6u64)
                .map(|t| {
                    let db = db.clone();
                    let mut rng = db_common::Rng((seed ^ (round << 8) ^ (t << 32)) | 1);
                    std::thread::spawn(move || {
                        let mut acked = Vec::new();
                        let mut refused = None;
                        for i in 0.. {
                            let k = key(round * 100_000 + t * 10_000 + i);
                            let w = WriteOptions {
                                sync: (i + t) % 2 == 0,
                            };
                            let put = db.put(k.clone(), vec![t as u8; 64], &w);
                            match poll_with_pauses(put, &mut rng) {
                                Ok(()) => acked.push(k),
                                Err(kv_demo::DbError::Closed) => {
                                    refused = Some(k);
                                    break;
                                }
                                Err(e) => panic!("seed {seed} round {round} writer {t}: {e}"),
                            }
                            match read_back(&db, &acked, t, &mut rng) {
                                Ok(()) => {}
                                Err(kv_demo::DbError::Closed) => break,
                                Err(e) => panic!("seed {seed} round {round} reader {t}: {e}"),
                            }
                        }
                        (acked, refused)
                    })
                })
                .collect();
            std::thread::sleep(std::time::Duration::from_micros(rng.below(30_000)));
            futures::executor::block_on(db.close()).unwrap();
            let (acked, refused): (Vec<_>, Vec<_>) =
                writers.into_iter().map(|w| w.join().unwrap()).unzip();
            let db =
                futures::executor::block_on(Db::open(rt.handle(), &dev.spec(), opts())).unwrap();
            futures::executor::block_on(async {
                for k in acked.iter().flatten() {
                    assert!(
                        db.get(k).await.unwrap().is_some(),
                        "seed {seed} round {round}: acknowledged write lost"
                    );
                }
                for k in refused.iter().flatten() {
                    assert!(
                        db.get(k).await.unwrap().is_none(),
                        "seed {seed} round {round}: a write that returned `Closed` is there"
                    );
                }
                db.close().await.unwrap();
            });
        }
    });
}
