//! Zone placement by core: with `tables_on_background_core`, one shard on two cores puts
//! its tables on zones of the background core (core 1, ZIOB then on both cores); without
//! it, ZIOB runs on the shard's core alone. Either way every key reads back, before and
//! after a reopen.

mod db_common;

use db_common::{key, tiny_emu, with_watchdog, EmuFile};
use kv_demo::placement::TABLE_CLASSES;
use kv_demo::{Db, WriteOptions};
use ziob::Runtime;
use ziob_zonefs::ZoneUse;

#[test]
fn tables_go_to_the_background_cores_zones() {
    with_watchdog(120, || {
        for tables_on_background_core in [true, false] {
            let rt = Runtime::builder().cores(2).build().unwrap();
            let file = EmuFile::new("placement");
            let spec = file.spec();
            let spec = spec.as_str();
            let opts = kv_demo::Options {
                tables_on_background_core,
                ..tiny_emu(1, 64)
            };
            futures::executor::block_on(async {
                let db = Db::open(rt.handle(), spec, opts.clone()).await.unwrap();
                let fs = db.fs().clone();
                let slots: Vec<usize> = TABLE_CLASSES.iter().map(|&c| fs.slot_of(c)).collect();
                // A zone a table class had open before the placement (the store's format
                // marker is written at format) stays in use: not counted.
                let open_at_start: std::collections::BTreeSet<u32> = fs
                    .zones()
                    .await
                    .into_iter()
                    .filter(|(_, u, _, _)| matches!(u, ZoneUse::Open(s) if slots.contains(s)))
                    .map(|z| z.0)
                    .collect();
                let mut table_zones = std::collections::BTreeSet::new();
                for i in 0..3000u64 {
                    db.put(key(i), vec![i as u8; 600], &WriteOptions::default())
                        .await
                        .unwrap();
                    if i % 100 == 99 {
                        db.flush().await.unwrap();
                        for (z, usage, _, _) in fs.zones().await {
                            if matches!(usage, ZoneUse::Open(s) if slots.contains(&s))
                                && !open_at_start.contains(&z)
                            {
                                table_zones.insert(z);
                            }
                        }
                    }
                }
                assert!(table_zones.len() >= 2, "{table_zones:?}");
                let client = fs.client();
                if tables_on_background_core {
                    assert_eq!(client.cores(), 2);
                    assert!(
                        table_zones.iter().all(|&z| client.owner_core(z) == 1),
                        "tables on core 1's zones: {table_zones:?}"
                    );
                } else {
                    assert_eq!(client.cores(), 1, "ZIOB on the shard's core alone");
                }
                for i in (0..3000u64).step_by(7) {
                    let v = db.get(&key(i)).await.unwrap().expect("a key written");
                    assert_eq!(&v[..], &vec![i as u8; 600][..]);
                }
                // The file system's handle keeps the device open: dropped before the reopen.
                drop(fs);
                db.close().await.unwrap();
                let db = Db::open(rt.handle(), spec, opts).await.unwrap();
                for i in (0..3000u64).step_by(7) {
                    let v = db.get(&key(i)).await.unwrap().expect("a key after reopen");
                    assert_eq!(&v[..], &vec![i as u8; 600][..]);
                }
                db.close().await.unwrap();
            });
        }
    });
}
