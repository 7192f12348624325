//! Scans read in place ([`Scan::step`] with [`Scan::current`]) against owned reads and a
//! model, and flushes that leave out versions no reader can see.

mod db_common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use db_common::{key, tiny, with_watchdog, Rng};
use kv_demo::{Db, Options, Scan, Snapshot, WriteBatch, WriteOptions};
use ziob::Runtime;

/// Drains `scan` in place.
async fn drain_in_place(scan: &mut Scan) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    while scan.step().await.unwrap() {
        let (k, v) = scan.current().expect("a step to an entry lends it");
        out.push((k.to_vec(), v.to_vec()));
    }
    assert!(scan.current().is_none(), "an ended scan lends nothing");
    out
}

/// Over shards, memtables and tables (flushes and compactions forced by tiny buffers): a
/// scan stepped in place sees exactly what an owned scan and the model see, from any start,
/// within any end, also while writes go on after the scan began (it keeps its snapshot).
#[test]
fn in_place_scans_match_owned_scans_and_the_model() {
    with_watchdog(300, || {
        for (seed, shards) in [(11u64, 1usize), (12, 2), (13, 3)] {
            let rt = Runtime::builder().cores(2).build().unwrap();
            futures::executor::block_on(async {
                let db = Db::open(rt.handle(), "mem:zones=64,zone_size=1M", tiny(shards))
                    .await
                    .unwrap();
                let w = WriteOptions::default();
                let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
                let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
                for i in 0..2500 {
                    let k = key(rng.below(300));
                    if rng.below(5) == 0 {
                        db.delete(k.clone(), &w).await.unwrap();
                        model.remove(&k);
                    } else {
                        let v = format!("v{i}-{}", "y".repeat(rng.below(50) as usize));
                        db.put(k.clone(), v.clone().into_bytes(), &w).await.unwrap();
                        model.insert(k, v.into_bytes());
                    }
                    if i % 97 == 0 {
                        let a = key(rng.below(320));
                        let b = key(rng.below(320));
                        let (a, b) = if a <= b { (a, b) } else { (b, a) };
                        let start = (rng.below(3) != 0).then_some(&a[..]);
                        let end = (rng.below(3) != 0).then_some(&b[..]);
                        let want: Vec<(Vec<u8>, Vec<u8>)> = model
                            .iter()
                            .filter(|(k, _)| {
                                start.is_none_or(|s| &k[..] >= s) && end.is_none_or(|e| &k[..] < e)
                            })
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect();
                        let mut in_place = db.scan(start, end, None).await.unwrap();
                        let mut owned = db.scan(start, end, None).await.unwrap();
                        // Writes after the scans began are not seen by them.
                        for j in 0..20 {
                            db.put(key(rng.below(300)), format!("later{j}").into_bytes(), &w)
                                .await
                                .unwrap();
                        }
                        let got = drain_in_place(&mut in_place).await;
                        let mut got_owned = Vec::new();
                        while let Some((k, v)) = owned.next().await.unwrap() {
                            got_owned.push((k.to_vec(), v.to_vec()));
                        }
                        assert_eq!(got, want, "seed {seed} op {i}: in place");
                        assert_eq!(got_owned, want, "seed {seed} op {i}: owned");
                        // The later writes, now in the model too.
                        let all =
                            drain_in_place(&mut db.scan(None, None, None).await.unwrap()).await;
                        model = all.into_iter().collect();
                    }
                }
                let st = db.stats().await;
                assert!(st.flush_bytes > 0, "no flush happened: {st:?}");
                db.close().await.unwrap();
            });
        }
    });
}

/// A flush writes only the versions a reader can still see: of a key overwritten 400 times
/// with no snapshot live, one; with a snapshot live, the version it sees and the newer ones
/// (and it still reads it after the flush).
#[test]
fn flush_leaves_out_hidden_versions() {
    with_watchdog(120, || {
        let rt = Runtime::builder().cores(1).build().unwrap();
        futures::executor::block_on(async {
            // 800 writes of ~220 bytes stay in one memtable until the explicit flushes.
            let opts = Options {
                write_buffer_bytes: 1 << 20,
                ..tiny(1)
            };
            let db = Db::open(rt.handle(), "mem:zones=64,zone_size=4M", opts)
                .await
                .unwrap();
            let w = WriteOptions::default();
            let value = |i: usize| format!("{i:0>200}").into_bytes();
            for i in 0..400 {
                db.put(&b"k"[..], value(i), &w).await.unwrap();
            }
            db.flush().await.unwrap();
            let one = db.stats().await.flush_bytes;
            // One 200-byte version, a filter, an index and a footer.
            assert!(one < 600, "a flush of one live version wrote {one} bytes");
            for i in 400..600 {
                db.put(&b"k"[..], value(i), &w).await.unwrap();
            }
            let snap = db.snapshot();
            for i in 600..800 {
                db.put(&b"k"[..], value(i), &w).await.unwrap();
            }
            db.flush().await.unwrap();
            // The rule is the compaction's (only the oldest snapshot counts): the version the
            // snapshot sees and the 200 after it stay, the 199 before it go.
            let two = db.stats().await.flush_bytes - one;
            assert!(
                (201 * 200..201 * 240 + 600).contains(&two),
                "a flush of 201 live versions wrote {two} bytes"
            );
            assert_eq!(
                db.get_at(b"k", &snap).await.unwrap().as_deref(),
                Some(&value(599)[..])
            );
            assert_eq!(
                db.get(b"k").await.unwrap().as_deref(),
                Some(&value(799)[..])
            );
            let mut s = db.scan(None, None, Some(&snap)).await.unwrap();
            assert_eq!(
                drain_in_place(&mut s).await,
                vec![(b"k".to_vec(), value(599))]
            );
            drop(s);
            drop(snap);
            db.close().await.unwrap();
        });
    });
}

/// Snapshots taken at any moment — before a flush begins, while one runs, between its start
/// and its install — keep seeing the same store while flushes and compactions go on under
/// them (a flush leaves out only versions no registered snapshot and no reader can see);
/// plain gets of one reader never go back in time. Single-key overwrites and cross-shard
/// batches (sequence numbers published in order) from two writers.
#[test]
fn snapshot_views_hold_while_flushes_leave_out_versions() {
    with_watchdog(300, || {
        let rt = Runtime::builder().cores(2).build().unwrap();
        let db = futures::executor::block_on(Db::open(
            rt.handle(),
            "mem:zones=64,zone_size=1M",
            tiny(3),
        ))
        .unwrap();
        const KEYS: u64 = 24;
        let stop = Arc::new(AtomicBool::new(false));
        let counter = Arc::new(AtomicU64::new(0));
        let writers: Vec<_> = (0..2u64)
            .map(|t| {
                let (db, counter) = (db.clone(), counter.clone());
                std::thread::spawn(move || {
                    futures::executor::block_on(async {
                        let w = WriteOptions::default();
                        let mut rng = Rng((t + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
                        // Each writer has its own keys: a key's values grow with its versions.
                        let own = |rng: &mut Rng| key(rng.below(KEYS / 2) * 2 + t);
                        for _ in 0..3000 {
                            // The value names when it was written: later writes, larger.
                            let value = |c: u64| format!("{c:010}-{}", "v".repeat(40)).into_bytes();
                            match rng.below(8) {
                                0 => {
                                    let mut b = WriteBatch::new();
                                    for _ in 0..4 {
                                        let c = counter.fetch_add(1, Ordering::AcqRel);
                                        b.put(own(&mut rng), value(c)).unwrap();
                                    }
                                    db.write(b, &w).await.unwrap();
                                }
                                1 => db.delete(own(&mut rng), &w).await.unwrap(),
                                _ => {
                                    let c = counter.fetch_add(1, Ordering::AcqRel);
                                    db.put(own(&mut rng), value(c), &w).await.unwrap();
                                }
                            }
                        }
                    })
                })
            })
            .collect();
        let readers: Vec<_> = (0..2u64)
            .map(|r| {
                let (db, stop) = (db.clone(), stop.clone());
                std::thread::spawn(move || {
                    futures::executor::block_on(async {
                        let view = |snap: Snapshot| {
                            let db = db.clone();
                            async move {
                                let mut s = db.scan(None, None, Some(&snap)).await.unwrap();
                                let mut out = Vec::new();
                                while s.step().await.unwrap() {
                                    let (k, v) = s.current().unwrap();
                                    out.push((k.to_vec(), v.to_vec()));
                                }
                                out
                            }
                        };
                        let mut checks = 0u64;
                        let mut newest = vec![Vec::new(); KEYS as usize];
                        while !stop.load(Ordering::Acquire) || checks < 3 {
                            checks += 1;
                            let snap = db.snapshot();
                            let before = view(snap.clone()).await;
                            if r == 0 {
                                // A flush under the snapshot, then one more memtable's worth.
                                db.flush().await.unwrap();
                            } else {
                                std::thread::sleep(std::time::Duration::from_millis(2));
                            }
                            let after = view(snap.clone()).await;
                            assert_eq!(
                                before, after,
                                "reader {r} check {checks}: the snapshot's view moved"
                            );
                            let model: std::collections::BTreeMap<_, _> =
                                after.into_iter().collect();
                            for i in 0..KEYS {
                                let k = key(i);
                                let got = db.get_at(&k, &snap).await.unwrap();
                                assert_eq!(
                                    got.as_deref(),
                                    model.get(&k).map(|v| &v[..]),
                                    "reader {r} check {checks}: get_at {i} vs the snapshot's scan"
                                );
                                // Plain gets: never older than this reader saw before (a
                                // deletion reads as nothing and resets nothing).
                                if let Some(v) = db.get(&k).await.unwrap() {
                                    let v = v.to_vec();
                                    assert!(
                                        v >= newest[i as usize],
                                        "reader {r}: key {i} went back in time"
                                    );
                                    newest[i as usize] = v;
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
            assert!(r.join().unwrap() >= 3);
        }
        futures::executor::block_on(async {
            let st = db.stats().await;
            assert!(st.flush_bytes > 0, "no flush ran: {st:?}");
            db.close().await.unwrap();
        });
    });
}

/// Once `flush` returns, `stats` counts the flush's bytes, every time. The count once came
/// after the flush woke its waiters, so a caller on another thread could read the stats
/// first: with that order this test failed in 9 runs of 9 (within its 300 flushes).
#[test]
fn a_returned_flush_is_in_the_stats() {
    with_watchdog(120, || {
        let rt = Runtime::builder().cores(1).build().unwrap();
        let db = db_common::open_tiny_mem(&rt, 1);
        futures::executor::block_on(async {
            let w = WriteOptions::default();
            let mut before = db.stats().await.flush_bytes;
            for i in 0..300u64 {
                db.put(key(i), vec![1u8; 100], &w).await.unwrap();
                db.flush().await.unwrap();
                let now = db.stats().await.flush_bytes;
                assert!(
                    now > before,
                    "flush {i} returned but the stats count no bytes"
                );
                before = now;
            }
            db.close().await.unwrap();
        });
    });
}
