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
