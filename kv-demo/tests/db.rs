//! The store's API against a model: puts, deletes, batches, gets, scans and snapshots across
//! flushes and compactions forced by a tiny write buffer, on `mem:` devices.

mod db_common;

use std::collections::BTreeMap;

use bytes::Bytes;
use db_common::{key, open_tiny_mem, tiny, with_watchdog, Rng};
use kv_demo::{Db, DbError, Snapshot, WriteBatch, WriteOptions};
use ziob::Runtime;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

async fn scan_all(
    db: &Db,
    start: Option<&[u8]>,
    end: Option<&[u8]>,
    snap: Option<&Snapshot>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut s = db.scan(start, end, snap).await.unwrap();
    let mut out = Vec::new();
    while let Some((k, v)) = s.next().await.unwrap() {
        out.push((k.to_vec(), v.to_vec()));
    }
    out
}

fn model_range(m: &Model, start: Option<&[u8]>, end: Option<&[u8]>) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.iter()
        .filter(|(k, _)| start.is_none_or(|s| &k[..] >= s) && end.is_none_or(|e| &k[..] < e))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Random operations against a `BTreeMap`, checked by gets, bounded scans and snapshots
/// taken along the way, over several seeds and shard counts.
#[test]
fn matches_a_model_across_flushes_and_compactions() {
    with_watchdog(300, || {
        for (seed, shards) in [(1u64, 1usize), (2, 2), (3, 3)] {
            run_model(seed, shards, 3000);
        }
    });
}

fn run_model(seed: u64, shards: usize, ops: usize) {
    let rt = Runtime::builder().cores(2).build().unwrap();
    futures::executor::block_on(async {
        let db = Db::open(rt.handle(), "mem:zones=64,zone_size=1M", tiny(shards))
            .await
            .unwrap();
        let w = WriteOptions::default();
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut model = Model::new();
        let mut snaps: Vec<(Snapshot, Model)> = Vec::new();
        for i in 0..ops {
            let k = key(rng.below(400));
            match rng.below(100) {
                0..=54 => {
                    let v = format!("v{i}-{}", "x".repeat(rng.below(60) as usize)).into_bytes();
                    db.put(k.clone(), v.clone(), &w).await.unwrap();
                    model.insert(k, v);
                }
                55..=69 => {
                    db.delete(k.clone(), &w).await.unwrap();
                    model.remove(&k);
                }
                70..=79 => {
                    let mut b = WriteBatch::new();
                    for j in 0..1 + rng.below(6) {
                        let k = key(rng.below(400));
                        if rng.below(3) == 0 {
                            b.delete(k.clone()).unwrap();
                            model.remove(&k);
                        } else {
                            let v = format!("b{i}.{j}").into_bytes();
                            b.put(k.clone(), v.clone()).unwrap();
                            model.insert(k, v);
                        }
                    }
                    db.write(b, &w).await.unwrap();
                }
                80..=91 => {
                    let got = db.get(&k).await.unwrap();
                    assert_eq!(
                        got.as_deref(),
                        model.get(&k).map(|v| &v[..]),
                        "seed {seed} op {i}: get"
                    );
                }
                92..=94 => {
                    let a = key(rng.below(400));
                    let b = key(rng.below(400));
                    let (a, b) = if a <= b { (a, b) } else { (b, a) };
                    let start = (rng.below(4) != 0).then_some(&a[..]);
                    let end = (rng.below(4) != 0).then_some(&b[..]);
                    assert_eq!(
                        scan_all(&db, start, end, None).await,
                        model_range(&model, start, end),
                        "seed {seed} op {i}: scan"
                    );
                }
                95..=96 => {
                    snaps.push((db.snapshot(), model.clone()));
                    if snaps.len() > 3 {
                        snaps.remove(rng.below(snaps.len() as u64) as usize);
                    }
                }
                97 => db.flush().await.unwrap(),
                _ => {
                    if let Some((s, m)) = snaps.get(rng.below(snaps.len().max(1) as u64) as usize) {
                        let k = key(rng.below(400));
                        assert_eq!(
                            db.get_at(&k, s).await.unwrap().as_deref(),
                            m.get(&k).map(|v| &v[..]),
                            "seed {seed} op {i}: get_at"
                        );
                        assert_eq!(
                            scan_all(&db, None, None, Some(s)).await,
                            model_range(m, None, None),
                            "seed {seed} op {i}: snapshot scan"
                        );
                    }
                }
            }
        }
        assert_eq!(
            scan_all(&db, None, None, None).await,
            model_range(&model, None, None)
        );
        for (s, m) in &snaps {
            assert_eq!(
                scan_all(&db, None, None, Some(s)).await,
                model_range(m, None, None)
            );
        }
        let st = db.stats().await;
        eprintln!(
            "seed {seed} shards {shards}: levels {:?} stalls {} flush {} compaction {}",
            st.levels, st.write_stalls, st.flush_bytes, st.compaction_write_bytes
        );
        assert!(st.flush_bytes > 0, "no flush happened: {st:?}");
        assert!(
            st.compaction_write_bytes > 0 || st.levels[1].0 > 0,
            "no compaction: {st:?}"
        );
        drop(snaps);
        db.close().await.unwrap();
    });
}

/// Keys and values over the documented limits are `InvalidArgument`, in every write call.
#[test]
fn over_limit_input_is_invalid_argument() {
    let rt = Runtime::builder().cores(1).build().unwrap();
    futures::executor::block_on(async {
        let db = Db::open(rt.handle(), "mem:zones=16,zone_size=1M", tiny(1))
            .await
            .unwrap();
        let w = WriteOptions::default();
        let long_key = vec![1u8; kv_demo::batch::KEY_BYTES_MAX + 1];
        let long_value = vec![2u8; kv_demo::batch::VALUE_BYTES_MAX + 1];
        assert!(matches!(
            db.put(long_key.clone(), Bytes::new(), &w).await,
            Err(DbError::InvalidArgument(_))
        ));
        assert!(matches!(
            db.put(Bytes::new(), long_value, &w).await,
            Err(DbError::InvalidArgument(_))
        ));
        assert!(matches!(
            db.delete(long_key, &w).await,
            Err(DbError::InvalidArgument(_))
        ));
        // At the limit is fine.
        let k = vec![3u8; kv_demo::batch::KEY_BYTES_MAX];
        db.put(k.clone(), &b"ok"[..], &w).await.unwrap();
        assert_eq!(db.get(&k).await.unwrap().as_deref(), Some(&b"ok"[..]));
        db.close().await.unwrap();
    });
}

/// Writers that outrun flushes and compactions wait, and all of them finish (many
/// concurrent writers on a tiny write buffer; a watchdog catches a lost wake-up).
#[test]
fn stalled_writers_resume() {
    with_watchdog(120, || {
        let rt = Runtime::builder().cores(2).build().unwrap();
        let db = futures::executor::block_on(Db::open(
            rt.handle(),
            "mem:zones=64,zone_size=1M",
            tiny(2),
        ))
        .unwrap();
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let db = db.clone();
                std::thread::spawn(move || {
                    futures::executor::block_on(async {
                        for i in 0..1500u64 {
                            let k = key(t * 10_000 + i % 500);
                            db.put(k, vec![t as u8; 200], &WriteOptions::default())
                                .await
                                .unwrap();
                        }
                    })
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        futures::executor::block_on(async {
            let st = db.stats().await;
            assert!(
                st.write_stalls > 0,
                "no writer stalled, the test proves nothing: {st:?}"
            );
            for t in 0..4u64 {
                for i in 0..500 {
                    assert_eq!(
                        db.get(&key(t * 10_000 + i)).await.unwrap().as_deref(),
                        Some(&vec![t as u8; 200][..])
                    );
                }
            }
            db.close().await.unwrap();
        });
    });
}

/// A compaction pauses while a memtable waits for its flush (flushes first on the core
/// they share), and writers that outrun both finish with every key read back, on an
/// unlimited device and on one with few active zones (a smoke test of the wiring; a
/// watchdog catches a hang — the pause's own bounds are `flush_first`'s unit tests).
#[test]
fn compactions_pause_for_waiting_flushes() {
    for spec in [
        "mem:zones=64,zone_size=1M",
        "mem:zones=64,zone_size=1M,zone_capacity=768K,max_open=8,max_active=8",
    ] {
        with_watchdog(120, move || {
            // Two cores: the shard on core 0, its flush and compaction on core 1.
            let rt = Runtime::builder().cores(2).build().unwrap();
            let db = futures::executor::block_on(Db::open(rt.handle(), spec, tiny(1))).unwrap();
            futures::executor::block_on(async {
                let w = WriteOptions::default();
                for i in 0..6000u64 {
                    db.put(key(i % 900), vec![i as u8; 200], &w).await.unwrap();
                }
                db.flush().await.unwrap();
                let st = db.stats().await;
                assert!(
                    st.compaction_pauses > 0,
                    "{spec}: no compaction paused for a flush: {st:?}"
                );
                assert!(st.compaction_write_bytes > 0, "{spec}: {st:?}");
                for i in 5100..6000u64 {
                    assert_eq!(
                        db.get(&key(i % 900)).await.unwrap().as_deref(),
                        Some(&vec![i as u8; 200][..]),
                        "{spec}"
                    );
                }
                db.close().await.unwrap();
            });
        });
    }
}

/// Flushes and compactions run as background tasks, which give way to the core's ordinary
/// tasks; they must still keep up when an ordinary task never lets the shard's core go idle:
/// stalled writers resume, `flush` and `close` finish (a watchdog catches starvation).
#[test]
fn writers_flush_and_close_finish_while_a_task_keeps_the_core_busy() {
    with_watchdog(120, || {
        let rt = Runtime::builder().cores(1).build().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spinning = stop.clone();
        rt.handle()
            .spawn_on(0, move || async move {
                while !spinning.load(std::sync::atomic::Ordering::Relaxed) {
                    ziob::runtime::yield_now().await;
                }
            })
            .unwrap();
        let db = open_tiny_mem(&rt, 1);
        futures::executor::block_on(async {
            for i in 0..3000u64 {
                db.put(key(i % 700), vec![i as u8; 200], &WriteOptions::default())
                    .await
                    .unwrap();
            }
            db.flush().await.unwrap();
            let st = db.stats().await;
            assert!(
                st.write_stalls > 0,
                "no writer stalled, the test proves nothing: {st:?}"
            );
            for i in 2300..3000u64 {
                assert_eq!(
                    db.get(&key(i % 700)).await.unwrap().as_deref(),
                    Some(&vec![i as u8; 200][..])
                );
            }
            db.close().await.unwrap();
        });
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
}

/// `Db`, `Snapshot` and `Scan` cross threads, and every future of the API is `Send` (so
/// callers on tokio's multi-thread runtime or any executor can hold them across awaits).
#[test]
fn handles_and_futures_are_send() {
    fn send<T: Send>(_: &T) {}
    fn send_sync<T: Send + Sync + Clone>() {}
    send_sync::<Db>();
    send_sync::<Snapshot>();
    let rt = Runtime::builder().cores(1).build().unwrap();
    futures::executor::block_on(async {
        let db = Db::open(rt.handle(), "mem:zones=16,zone_size=1M", tiny(1))
            .await
            .unwrap();
        let w = WriteOptions::default();
        let snap = db.snapshot();
        send(&db.put(&b"k"[..], &b"v"[..], &w));
        send(&db.delete(&b"k"[..], &w));
        send(&db.write(WriteBatch::new(), &w));
        send(&db.get(b"k"));
        send(&db.get_at(b"k", &snap));
        send(&db.scan(None, None, Some(&snap)));
        send(&db.flush());
        send(&db.stats());
        let mut scan = db.scan(None, None, None).await.unwrap();
        send(&scan);
        send(&scan.next());
        drop(scan);
        send(&db.clone().close());
        db.close().await.unwrap();
    });
}
