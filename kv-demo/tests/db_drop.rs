//! A `Db` dropped without `close` (never called, or its `close` future dropped at its
//! first await) still stops its background tasks and closes its device, as `close` would:
//! every write, sync or not, survives a power loss that comes after.

mod db_common;

use std::future::Future;
use std::task::{Context, Poll};
use std::time::Duration;

use db_common::{client_on, key, open_tiny_mem, tiny, with_watchdog};
use kv_demo::{Db, WriteOptions};
use ziob::backends::mem::MemDevice;
use ziob::{Client, Geometry, Runtime};

/// Waits until `client`'s instance is closed (its calls fail); the test's watchdog catches a
/// store that never closes it.
fn wait_closed(client: &Client) {
    while futures::executor::block_on(client.metrics()).is_ok() {
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn round(close_dropped: bool) {
    let rt = Runtime::builder().cores(2).build().unwrap();
    let dev = MemDevice::new("mem:db-drop", &Geometry::new(64, 1 << 20)).unwrap();
    let client = client_on(&rt, &dev, true);
    let db =
        futures::executor::block_on(Db::open_on(rt.handle(), client.clone(), tiny(2))).unwrap();
    futures::executor::block_on(async {
        for i in 0..200u64 {
            let w = WriteOptions { sync: i % 50 == 0 };
            db.put(key(i), format!("v{i}").into_bytes(), &w)
                .await
                .unwrap();
        }
    });
    if close_dropped {
        let mut f = Box::pin(db.close());
        let waker = futures::task::noop_waker();
        if let Poll::Ready(r) = f.as_mut().poll(&mut Context::from_waker(&waker)) {
            panic!("close finished at its first poll: {r:?}");
        }
        drop(f);
    } else {
        drop(db);
    }
    wait_closed(&client);
    dev.crash();
    let db = futures::executor::block_on(Db::open_on(
        rt.handle(),
        client_on(&rt, &dev, true),
        tiny(2),
    ))
    .unwrap();
    futures::executor::block_on(async {
        for i in 0..200u64 {
            let v = db.get(&key(i)).await.unwrap();
            assert_eq!(
                v.as_deref(),
                Some(format!("v{i}").as_bytes()),
                "key {i} after a drop without close (close dropped: {close_dropped})"
            );
        }
        db.close().await.unwrap();
    });
}

#[test]
fn a_db_dropped_without_close_closes_its_device() {
    with_watchdog(60, || round(false));
}

#[test]
fn a_db_whose_close_was_dropped_closes_its_device() {
    with_watchdog(60, || round(true));
}

/// A runtime shut down under an open store drops its flush, compaction and pump tasks
/// unfinished: `close` then fails with an error naming them instead of waiting forever for
/// tasks that are gone, and so does a writer.
#[test]
fn close_after_the_runtime_stopped_is_an_error_not_a_hang() {
    with_watchdog(60, || {
        let rt = Runtime::builder().cores(1).build().unwrap();
        let db = open_tiny_mem(&rt, 1);
        futures::executor::block_on(async {
            for i in 0..100u64 {
                db.put(key(i), b"v".to_vec(), &WriteOptions::default())
                    .await
                    .unwrap();
            }
        });
        drop(rt);
        let put =
            futures::executor::block_on(db.put(key(1), b"w".to_vec(), &WriteOptions::default()));
        assert!(put.is_err(), "a write after the runtime stopped succeeded");
        let e = futures::executor::block_on(db.close()).unwrap_err();
        assert!(
            e.to_string().contains("runtime was stopped")
                || e.to_string().contains("stopped unfinished"),
            "{e}"
        );
    });
}
