//! Device errors at any point of a workload: an EIO injected into the n-th device operation
//! after open (WAL append or sync, table write, manifest edit, compaction, zone reset — in
//! turn), then power loss. The store reports the error instead of hanging, and after reopen
//! every acknowledged `sync` write is there with its latest value; the write that failed
//! is there whole or not at all.

mod db_common;

use std::collections::BTreeMap;

use db_common::{client_on, key, tiny, with_watchdog, Rng};
use kv_demo::{Db, WriteBatch, WriteOptions};
use ziob::backends::mem::{Fault, MemDevice};
use ziob::{Geometry, Runtime};

/// The workload's writes in order: each is a batch of `(key, value)` puts (value empty =
/// delete).
fn workload(seed: u64) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut rng = Rng(seed);
    (0..300u64)
        .map(|i| {
            let n = if rng.below(4) == 0 { 4 } else { 1 };
            (0..n)
                .map(|j| {
                    let k = key(rng.below(120));
                    let v = if rng.below(8) == 0 {
                        Vec::new()
                    } else {
                        format!("w{i}.{j}-{}", "q".repeat(rng.below(120) as usize)).into_bytes()
                    };
                    (k, v)
                })
                .collect()
        })
        .collect()
}

#[test]
fn an_eio_anywhere_loses_no_acknowledged_sync_write() {
    with_watchdog(900, || {
        for buffered in [true, false] {
            eio_runs(buffered);
        }
    });
}

fn eio_runs(buffered: bool) {
    {
        let rt = Runtime::builder().cores(2).build().unwrap();
        let g = Geometry::new(64, 1 << 20);
        let writes = workload(41);
        let mut fired_runs = 0;
        let mut k = 0u64;
        loop {
            let dev = MemDevice::new("mem:db-fault", &g).unwrap();
            let db = futures::executor::block_on(Db::open_on(
                rt.handle(),
                client_on(&rt, &dev, buffered),
                tiny(2),
            ))
            .unwrap();
            let base = dev.op_count();
            dev.inject(Fault::FailOp { op_index: base + k });
            let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            let mut failed: Option<&Vec<(Vec<u8>, Vec<u8>)>> = None;
            futures::executor::block_on(async {
                for w in &writes {
                    let mut b = WriteBatch::new();
                    for (k, v) in w {
                        if v.is_empty() {
                            b.delete(k.clone()).unwrap();
                        } else {
                            b.put(k.clone(), v.clone()).unwrap();
                        }
                    }
                    match db.write(b, &WriteOptions { sync: true }).await {
                        Ok(()) => {
                            for (k, v) in w {
                                if v.is_empty() {
                                    model.remove(k);
                                } else {
                                    model.insert(k.clone(), v.clone());
                                }
                            }
                        }
                        Err(_) => {
                            failed = Some(w);
                            break;
                        }
                    }
                }
                db.abandon().await.unwrap();
            });
            let fired = dev.op_count() > base + k;
            dev.crash();
            dev.clear_faults();
            let db = futures::executor::block_on(Db::open_on(
                rt.handle(),
                client_on(&rt, &dev, buffered),
                tiny(2),
            ))
            .unwrap_or_else(|e| {
                panic!("buffered {buffered}: EIO at op {k} after open: reopen: {e}")
            });
            futures::executor::block_on(async {
                let mut got = BTreeMap::new();
                let mut s = db.scan(None, None, None).await.unwrap();
                while let Some((k, v)) = s.next().await.unwrap() {
                    got.insert(k.to_vec(), v.to_vec());
                }
                drop(s);
                let mut with_failed = model.clone();
                if let Some(w) = failed {
                    for (k, v) in w {
                        if v.is_empty() {
                            with_failed.remove(k);
                        } else {
                            with_failed.insert(k.clone(), v.clone());
                        }
                    }
                }
                assert!(
                    got == model || got == with_failed,
                    "buffered {buffered}: EIO at op {k} after open (write failed: {}): the store lost \
                     or tore writes",
                    failed.is_some()
                );
                db.close().await.unwrap();
            });
            if !fired {
                break;
            }
            fired_runs += 1;
            // Every op early on, then a sample (the workload runs a few thousand ops).
            k += if k < 60 { 1 } else { 1 + k / 20 };
        }
        eprintln!("buffered {buffered}: EIO injected at {fired_runs} points of the workload");
        assert!(fired_runs > 50);
    }
}
