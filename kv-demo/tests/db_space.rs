//! A long overwrite run on a small device: ≥ 5× the device's capacity written, never out of
//! space (compaction drops old versions, zonefs resets dead zones and collects mostly-dead
//! ones); write and space amplification reported.

mod db_common;

use db_common::{key, with_watchdog, Rng};
use kv_demo::{Db, Options, WriteOptions};
use ziob::Runtime;

const ZONES: u64 = 32;
const ZONE_BYTES: u64 = 1 << 20;

#[test]
fn overwrite_five_times_the_device_never_runs_out_of_space() {
    with_watchdog(600, || {
        let rt = Runtime::builder().cores(2).build().unwrap();
        futures::executor::block_on(async {
            let spec = format!("mem:zones={ZONES},zone_size={}M", ZONE_BYTES >> 20);
            let opts = Options {
                shards: 2,
                write_buffer_bytes: 256 << 10,
                target_file_bytes: 256 << 10,
                cache_bytes: 1 << 20,
                ..Options::default()
            };
            let db = Db::open(rt.handle(), &spec, opts).await.unwrap();
            let w = WriteOptions::default();
            let (keys, value_bytes) = (2000u64, 1000usize);
            let target = 5 * ZONES * ZONE_BYTES;
            let mut rng = Rng(7);
            let mut latest = vec![0u64; keys as usize];
            let mut written = 0u64;
            let mut round = 0u64;
            while written < target {
                round += 1;
                let k = rng.below(keys);
                let mut v = vec![(round % 251) as u8; value_bytes];
                v[..8].copy_from_slice(&round.to_le_bytes());
                if let Err(e) = db.put(key(k), v, &w).await {
                    panic!("put {round} after {written} bytes: {e}");
                }
                latest[k as usize] = round;
                written += (key(k).len() + value_bytes) as u64;
            }
            for (k, &r) in latest.iter().enumerate() {
                let got = db.get(&key(k as u64)).await.unwrap();
                match r {
                    0 => assert_eq!(got, None),
                    r => assert_eq!(&got.expect("lost key")[..8], &r.to_le_bytes()),
                }
            }
            let st = db.stats().await;
            eprintln!(
                "overwrite: {} MiB user bytes on a {} MiB device; write amplification {:.2} \
                 (device bytes / user bytes; flush {} MiB, compaction {} MiB, zonefs GC {} MiB \
                 in {} zones), space amplification {:.2} (zonefs df), levels {:?}",
                st.user_bytes >> 20,
                (ZONES * ZONE_BYTES) >> 20,
                st.write_amplification(),
                st.flush_bytes >> 20,
                st.compaction_write_bytes >> 20,
                st.fs.gc_bytes >> 20,
                st.fs.gc_zones,
                st.space_amplification(),
                st.levels,
            );
            assert!(st.user_bytes >= target);
            // Every table compacted away is deleted (its zones reset or collected): the
            // files left are exactly the tables of the tree (deletions run in the
            // background once no reader holds a table, and compactions may still be
            // running: count both again until they agree).
            let (mut files, mut tables) = (0, 0);
            for _ in 0..200 {
                tables = db.stats().await.levels.iter().map(|l| l.0).sum::<usize>();
                files = 0;
                for s in 0..db.shards() {
                    files += db.fs().list(&format!("kv/{s}")).await.unwrap().len();
                }
                if files == tables {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            assert_eq!(files, tables, "table files leaked");
            assert!(
                st.device_bytes > st.user_bytes,
                "device bytes not counted: {st:?}"
            );
            db.close().await.unwrap();
        });
    });
}

/// Batches spanning every shard are logged whole to each shard's WAL, so a WAL grows up to
/// `shards` times faster than its memtable: a memtable switch also comes at
/// `write_buffer_bytes` of WAL, so the WAL stays within the room the store gave it.
#[test]
fn cross_shard_batches_keep_the_wals_within_their_room() {
    with_watchdog(600, || {
        let rt = Runtime::builder().cores(2).build().unwrap();
        futures::executor::block_on(async {
            let opts = Options {
                shards: 8,
                write_buffer_bytes: 256 << 10,
                target_file_bytes: 256 << 10,
                ..Options::default()
            };
            let db = Db::open(rt.handle(), "mem:zones=128,zone_size=1M", opts)
                .await
                .unwrap();
            let mut rng = Rng(3);
            let mut written = 0u64;
            let mut n = 0u64;
            while written < 48 << 20 {
                n += 1;
                let mut b = kv_demo::WriteBatch::new();
                for i in 0..16u64 {
                    b.put(key(rng.below(1000) * 16 + i), vec![n as u8; 1000])
                        .unwrap();
                }
                written += b.payload_bytes() as u64;
                if let Err(e) = db.write(b, &WriteOptions::default()).await {
                    panic!("batch {n} after {} MiB: {e}", written >> 20);
                }
            }
            db.close().await.unwrap();
        });
    });
}

/// With ZIOB's buffer off (`--ziob=off`) on a device with open/active zone limits and a zone
/// capacity below the zone size, the store writes more than the device holds (50 MB of values
/// on 36 MiB of zone capacity) through flushes, compactions and zone
/// reclaim within the limits and reads back what it wrote.
#[test]
fn pass_through_with_zone_limits() {
    with_watchdog(600, || {
        let rt = Runtime::builder().cores(2).build().unwrap();
        futures::executor::block_on(async {
            let spec = "mem:zones=48,zone_size=1M,zone_capacity=768K,max_open=8,max_active=8";
            let opts = Options {
                shards: 2,
                write_buffer_bytes: 128 << 10,
                target_file_bytes: 128 << 10,
                buffered: false,
                ..Options::default()
            };
            let db = Db::open(rt.handle(), spec, opts).await.unwrap();
            let mut rng = Rng(17);
            let mut latest = vec![0u64; 1000];
            for round in 1..=100_000u64 {
                let k = rng.below(1000);
                let mut v = vec![0u8; 500];
                v[..8].copy_from_slice(&round.to_le_bytes());
                if let Err(e) = db.put(key(k), v, &WriteOptions::default()).await {
                    panic!("put {round}: {e}");
                }
                latest[k as usize] = round;
            }
            for (k, &r) in latest.iter().enumerate() {
                let got = db.get(&key(k as u64)).await.unwrap();
                match r {
                    0 => assert_eq!(got, None),
                    r => assert_eq!(&got.expect("lost key")[..8], &r.to_le_bytes()),
                }
            }
            let st = db.stats().await;
            assert!(st.compaction_write_bytes > 0, "no compaction: {st:?}");
            db.close().await.unwrap();
        });
    });
}
