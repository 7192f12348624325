//! Dropped futures: writes cancelled at any await (polled a random number of times, then
//! dropped) leave no stuck shard and no torn batch; the store goes on and reopens.

mod db_common;

use std::future::Future;
use std::task::{Context, Poll};

use db_common::{key, tiny_emu, with_watchdog, EmuFile, Rng};
use kv_demo::{Db, WriteBatch, WriteOptions};
use ziob::Runtime;

#[test]
fn cancelled_writes_are_whole_or_absent() {
    with_watchdog(300, || {
        let dev = EmuFile::new("cancel");
        let rt = Runtime::builder().cores(2).build().unwrap();
        const KEYS: u64 = 9;
        let check = |db: Db| async move {
            let mut vals = Vec::new();
            for i in 0..KEYS {
                vals.push(db.get(&key(i)).await.unwrap().map(|v| v[..8].to_vec()));
            }
            assert!(
                vals.windows(2).all(|w| w[0] == w[1]),
                "torn batch: {vals:?}"
            );
            db
        };
        futures::executor::block_on(async {
            let db = Db::open(rt.handle(), &dev.spec(), tiny_emu(3, 64))
                .await
                .unwrap();
            let mut rng = Rng(99);
            let waker = futures::task::noop_waker();
            let mut cancelled = 0;
            for n in 0..1500u64 {
                let mut b = WriteBatch::new();
                for i in 0..KEYS {
                    let mut v = n.to_le_bytes().to_vec();
                    v.extend_from_slice(&[i as u8; 30]);
                    b.put(key(i), v).unwrap();
                }
                let sync = rng.below(4) == 0;
                let w = WriteOptions { sync };
                let mut f = Box::pin(db.write(b, &w));
                let polls = rng.below(4);
                let mut done = false;
                for _ in 0..polls {
                    if let Poll::Ready(r) = f.as_mut().poll(&mut Context::from_waker(&waker)) {
                        r.unwrap();
                        done = true;
                        break;
                    }
                    std::thread::yield_now();
                }
                if !done && polls < 3 {
                    cancelled += 1;
                    drop(f);
                } else if !done {
                    f.await.unwrap();
                }
                if n % 100 == 0 {
                    let db2 = check(db.clone()).await;
                    drop(db2);
                }
            }
            assert!(
                cancelled > 100,
                "too few writes were cancelled: {cancelled}"
            );
            let db = check(db).await;
            db.flush().await.unwrap();
            db.close().await.unwrap();
            let db = Db::open(rt.handle(), &dev.spec(), tiny_emu(3, 64))
                .await
                .unwrap();
            let db = check(db).await;
            db.close().await.unwrap();
        });
    });
}

/// `Scan::next` dropped at random awaits (a table block read, a shard's merge step) loses no
/// entry: the scan still returns every key exactly once, in order.
#[test]
fn cancelled_scan_steps_lose_nothing() {
    with_watchdog(300, || {
        let dev = EmuFile::new("cancel-scan");
        let rt = Runtime::builder().cores(2).build().unwrap();
        futures::executor::block_on(async {
            let opts = kv_demo::Options {
                // Block reads go to the device (not the block cache or ZIOB's buffer), so
                // they wait.
                cache_bytes: 0,
                buffered: false,
                ..tiny_emu(3, 64)
            };
            let db = Db::open(rt.handle(), &dev.spec(), opts).await.unwrap();
            const KEYS: u64 = 3000;
            let w = WriteOptions::default();
            for i in 0..KEYS {
                db.put(key(i), vec![i as u8; 100], &w).await.unwrap();
                if i == KEYS / 2 {
                    db.flush().await.unwrap();
                }
            }
            let mut rng = Rng(7);
            let waker = futures::task::noop_waker();
            let mut scan = db.scan(None, None, None).await.unwrap();
            let mut got = Vec::new();
            let mut cancelled = 0;
            loop {
                let polls = 1 + rng.below(3);
                let mut f = Box::pin(scan.next());
                let mut out = None;
                for _ in 0..polls {
                    if let Poll::Ready(r) = f.as_mut().poll(&mut Context::from_waker(&waker)) {
                        out = Some(r.unwrap());
                        break;
                    }
                    std::thread::yield_now();
                }
                let out = match out {
                    Some(o) => o,
                    None if rng.below(2) == 0 => {
                        cancelled += 1;
                        drop(f);
                        continue;
                    }
                    None => f.await.unwrap(),
                };
                match out {
                    Some((k, v)) => got.push((k.to_vec(), v.to_vec())),
                    None => break,
                }
            }
            drop(scan);
            let mut want: Vec<_> = (0..KEYS).map(|i| (key(i), vec![i as u8; 100])).collect();
            want.sort();
            assert_eq!(got.len(), want.len(), "{cancelled} cancelled steps");
            assert!(got == want, "scan lost or repeated entries");
            assert!(
                cancelled > 10,
                "too few scan steps were cancelled: {cancelled}"
            );
            db.close().await.unwrap();
        });
    });
}

/// `Scan::step` dropped at random awaits over overwritten and deleted keys (versions a
/// snapshot must skip, in memtables and tables of three shards, some written after the scan
/// began): the in-place scan still gives exactly the snapshot's keys, each once, in order,
/// and lends nothing after a dropped step.
#[test]
fn cancelled_in_place_steps_skip_versions_and_lose_nothing() {
    with_watchdog(300, || {
        let dev = EmuFile::new("cancel-step");
        let rt = Runtime::builder().cores(2).build().unwrap();
        futures::executor::block_on(async {
            let opts = kv_demo::Options {
                cache_bytes: 0,
                buffered: false,
                ..tiny_emu(3, 64)
            };
            let db = Db::open(rt.handle(), &dev.spec(), opts).await.unwrap();
            const KEYS: u64 = 2000;
            let w = WriteOptions::default();
            let mut rng = Rng(19);
            let mut model = std::collections::BTreeMap::new();
            for round in 0..3u64 {
                for i in 0..KEYS {
                    match rng.below(4) {
                        0 => {
                            db.delete(key(i), &w).await.unwrap();
                            model.remove(&key(i));
                        }
                        1 => {}
                        _ => {
                            let v = vec![(i + round) as u8; 60 + round as usize];
                            db.put(key(i), v.clone(), &w).await.unwrap();
                            model.insert(key(i), v);
                        }
                    }
                }
                if round < 2 {
                    db.flush().await.unwrap();
                }
            }
            let waker = futures::task::noop_waker();
            let mut scan = db.scan(None, None, None).await.unwrap();
            // Written after the scan began: not seen by it.
            for i in (0..KEYS).step_by(7) {
                db.put(key(i), &b"later"[..], &w).await.unwrap();
            }
            let mut got = Vec::new();
            let mut cancelled = 0;
            loop {
                let polls = 1 + rng.below(2);
                // `None`: the step was dropped.
                let more = {
                    let mut f = Box::pin(scan.step());
                    let mut out = None;
                    for _ in 0..polls {
                        if let Poll::Ready(r) = f.as_mut().poll(&mut Context::from_waker(&waker)) {
                            out = Some(r.unwrap());
                            break;
                        }
                        std::thread::yield_now();
                    }
                    match out {
                        Some(o) => Some(o),
                        None if rng.below(2) == 0 => None,
                        None => Some(f.await.unwrap()),
                    }
                };
                let Some(more) = more else {
                    cancelled += 1;
                    assert!(scan.current().is_none(), "a dropped step lends an entry");
                    continue;
                };
                if !more {
                    break;
                }
                let (k, v) = scan.current().expect("a step to an entry lends it");
                got.push((k.to_vec(), v.to_vec()));
            }
            drop(scan);
            let want: Vec<_> = model.into_iter().collect();
            assert_eq!(got.len(), want.len(), "{cancelled} cancelled steps");
            assert!(got == want, "scan lost, repeated or misread entries");
            assert!(
                cancelled > 5,
                "too few scan steps were cancelled: {cancelled}"
            );
            db.close().await.unwrap();
        });
    });
}
