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
