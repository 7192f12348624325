//! Reopening: after a clean close everything is back; after a crash (simulated power loss:
//! ZIOB's unsynced buffer dropped) every acknowledged `sync` write is back with its latest
//! value, and every batch — spanning shards or not — is back whole or not at all.

mod db_common;

use std::collections::BTreeMap;

use db_common::{key, tiny_emu, with_watchdog, EmuFile, Rng};
use kv_demo::{Db, WriteBatch, WriteOptions};
use ziob::Runtime;

async fn all(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut s = db.scan(None, None, None).await.unwrap();
    let mut out = BTreeMap::new();
    while let Some((k, v)) = s.next().await.unwrap() {
        out.insert(k.to_vec(), v.to_vec());
    }
    out
}

/// Several open / write / close cycles on one emu device, with flushes and compactions in
/// every cycle: each reopen finds exactly the model (tables from the manifest, the rest from
/// the WAL).
#[test]
fn reopen_after_close_keeps_everything() {
    with_watchdog(300, || {
        let dev = EmuFile::new("reopen");
        let rt = Runtime::builder().cores(2).build().unwrap();
        let mut model = BTreeMap::new();
        let mut rng = Rng(11);
        for cycle in 0..4u64 {
            futures::executor::block_on(async {
                let db = Db::open(rt.handle(), &dev.spec(), tiny_emu(2, 64))
                    .await
                    .unwrap();
                assert_eq!(all(&db).await, model, "cycle {cycle}: after reopen");
                for i in 0..600u64 {
                    let k = key(rng.below(300));
                    if rng.below(5) == 0 {
                        db.delete(k.clone(), &WriteOptions::default())
                            .await
                            .unwrap();
                        model.remove(&k);
                    } else {
                        let v = format!("c{cycle}-{i}-{}", "y".repeat(rng.below(80) as usize));
                        db.put(k.clone(), v.clone().into_bytes(), &WriteOptions::default())
                            .await
                            .unwrap();
                        model.insert(k, v.into_bytes());
                    }
                }
                let st = db.stats().await;
                assert!(st.flush_bytes > 0, "cycle {cycle}: no flush: {st:?}");
                assert_eq!(all(&db).await, model);
                db.close().await.unwrap();
            });
        }
    });
}

/// Crash loop: `sync` writes (puts, deletes, batches) interleaved with flushes and
/// compactions, the device abandoned at a random point; after reopen every acknowledged
/// write is there with its latest value, and the store goes on working.
#[test]
fn sync_writes_survive_a_crash() {
    with_watchdog(300, || {
        let dev = EmuFile::new("crash");
        let rt = Runtime::builder().cores(2).build().unwrap();
        let mut model = BTreeMap::new();
        let mut rng = Rng(23);
        let sync = WriteOptions { sync: true };
        for round in 0..6u64 {
            futures::executor::block_on(async {
                let db = Db::open(rt.handle(), &dev.spec(), tiny_emu(2, 64))
                    .await
                    .unwrap();
                assert_eq!(all(&db).await, model, "round {round}: after the crash");
                let n = 100 + rng.below(400);
                for i in 0..n {
                    let k = key(rng.below(200));
                    match rng.below(10) {
                        0 => {
                            db.delete(k.clone(), &sync).await.unwrap();
                            model.remove(&k);
                        }
                        1 => {
                            let mut b = WriteBatch::new();
                            for j in 0..4 {
                                let k = key(rng.below(200));
                                let v = format!("b{round}.{i}.{j}").into_bytes();
                                b.put(k.clone(), v.clone()).unwrap();
                                model.insert(k, v);
                            }
                            db.write(b, &sync).await.unwrap();
                        }
                        _ => {
                            let v = format!("r{round}-{i}-{}", "z".repeat(rng.below(100) as usize));
                            db.put(k.clone(), v.clone().into_bytes(), &sync)
                                .await
                                .unwrap();
                            model.insert(k, v.into_bytes());
                        }
                    }
                }
                db.abandon().await.unwrap();
            });
        }
        futures::executor::block_on(async {
            let db = Db::open(rt.handle(), &dev.spec(), tiny_emu(2, 64))
                .await
                .unwrap();
            assert_eq!(all(&db).await, model, "after the last crash");
            for (k, v) in &model {
                assert_eq!(db.get(k).await.unwrap().as_deref(), Some(&v[..]));
            }
            db.close().await.unwrap();
        });
    });
}

/// Batches spanning every shard, not synced (so each shard's WAL may lose a different tail
/// in the crash), the last one of a round sometimes synced: after reopen each group of keys
/// holds one batch's values (never a mix), at least the last synced one.
#[test]
fn cross_shard_batches_are_atomic_after_a_crash() {
    with_watchdog(300, || {
        for seed in [5, 6, 7] {
            atomic_rounds(seed);
        }
    });
}

fn atomic_rounds(seed: u64) {
    {
        let dev = EmuFile::new("atomic");
        let rt = Runtime::builder().cores(2).build().unwrap();
        let mut rng = Rng(seed);
        const KEYS: u64 = 12;
        let mut synced_floor = 0u64;
        let mut batch_no = 0u64;
        for round in 0..6u64 {
            futures::executor::block_on(async {
                let db = Db::open(rt.handle(), &dev.spec(), tiny_emu(3, 64))
                    .await
                    .unwrap();
                let shards: std::collections::BTreeSet<_> =
                    (0..KEYS).map(|i| db.shard_of(&key(i))).collect();
                assert_eq!(shards.len(), 3, "the group must span every shard");
                let mut vals = Vec::new();
                for i in 0..KEYS {
                    let v = db.get(&key(i)).await.unwrap();
                    vals.push(v.map(|v| u64::from_le_bytes(v[..8].try_into().unwrap())));
                }
                assert!(
                    vals.windows(2).all(|w| w[0] == w[1]),
                    "round {round}: torn batch {vals:?}"
                );
                let got = vals[0].unwrap_or(0);
                assert!(
                    got >= synced_floor,
                    "round {round}: batch {got} < synced {synced_floor}"
                );
                assert!(got <= batch_no);
                let n = 50 + rng.below(300);
                for i in 0..n {
                    batch_no += 1;
                    let mut b = WriteBatch::new();
                    for k in 0..KEYS {
                        let mut v = batch_no.to_le_bytes().to_vec();
                        v.extend_from_slice(&[k as u8; 50]);
                        b.put(key(k), v).unwrap();
                    }
                    let sync = i + 1 == n && rng.below(2) == 0;
                    db.write(b, &WriteOptions { sync }).await.unwrap();
                    if sync {
                        synced_floor = batch_no;
                    }
                }
                db.abandon().await.unwrap();
            });
        }
    }
}

/// A one-shard store on a two-core runtime: ZIOB runs on the shard's core only, whether a
/// reopen names the count (1) or takes the store's own (0), through crashes and clean closes,
/// and every acknowledged `sync` write is back; a count the store lacks is refused.
#[test]
fn a_one_shard_store_on_two_cores_keeps_ziob_on_its_core_across_reopens() {
    with_watchdog(300, || {
        let dev = EmuFile::new("one-shard");
        let rt = Runtime::builder().cores(2).build().unwrap();
        let sync = WriteOptions { sync: true };
        let mut model = BTreeMap::new();
        let mut rng = Rng(41);
        futures::executor::block_on(async {
            for (round, shards) in [1usize, 0, 0, 1, 0].into_iter().enumerate() {
                let db = Db::open(rt.handle(), &dev.spec(), tiny_emu(shards, 64))
                    .await
                    .unwrap();
                assert_eq!(db.shards(), 1, "round {round}");
                assert_eq!(
                    db.fs().client().cores(),
                    1,
                    "round {round} (shards {shards}): ZIOB on core 0 only"
                );
                assert_eq!(all(&db).await, model, "round {round}: after reopen");
                for i in 0..300u64 {
                    let k = key(rng.below(150));
                    let v = format!("o{round}-{i}-{}", "w".repeat(rng.below(90) as usize));
                    db.put(k.clone(), v.clone().into_bytes(), &sync)
                        .await
                        .unwrap();
                    model.insert(k, v.into_bytes());
                }
                if round % 2 == 0 {
                    db.abandon().await.unwrap();
                } else {
                    db.close().await.unwrap();
                }
            }
            let Err(err) = Db::open(rt.handle(), &dev.spec(), tiny_emu(2, 64)).await else {
                panic!("two shards asked of a one-shard store opened");
            };
            assert!(matches!(err, kv_demo::DbError::InvalidArgument(_)), "{err}");
            let db = Db::open(rt.handle(), &dev.spec(), tiny_emu(0, 64))
                .await
                .unwrap();
            assert_eq!(all(&db).await, model, "at the end");
            db.close().await.unwrap();
        });
    });
}
