//! A manual throughput look (not a speed assertion): `cargo test --release -p kv-demo --test
//! db_smoke_speed -- --ignored --nocapture`.

mod db_common;

use std::time::Instant;

use db_common::Rng;
use kv_demo::{Db, Options, WriteOptions};
use ziob::Runtime;

#[test]
#[ignore]
fn fillrandom_then_readrandom() {
    let cores: usize = std::env::var("KV_CORES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(2);
    let n: u64 = std::env::var("KV_NUM")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(200_000);
    let rt = Runtime::builder().cores(cores).build().unwrap();
    futures::executor::block_on(async {
        let opts = Options {
            write_buffer_bytes: 4 << 20,
            target_file_bytes: 4 << 20,
            ..Options::default()
        };
        let db = Db::open(rt.handle(), "mem:zones=64,zone_size=64M", opts)
            .await
            .unwrap();
        let mut rng = Rng(1);
        let w = WriteOptions::default();
        let t = Instant::now();
        for _ in 0..n {
            let mut k = [0u8; 16];
            k[..8].copy_from_slice(&rng.below(n).to_be_bytes());
            db.put(k.to_vec(), vec![7u8; 100], &w).await.unwrap();
        }
        let fill = t.elapsed();
        let t = Instant::now();
        let mut found = 0;
        for _ in 0..n {
            let mut k = [0u8; 16];
            k[..8].copy_from_slice(&rng.below(n).to_be_bytes());
            found += db.get(&k).await.unwrap().is_some() as u64;
        }
        let read = t.elapsed();
        let st = db.stats().await;
        eprintln!(
            "fillrandom {:.0} ops/s, readrandom {:.0} ops/s ({found} of {n} found); levels {:?}, stalls {}, wamp {:.2}",
            n as f64 / fill.as_secs_f64(),
            n as f64 / read.as_secs_f64(),
            st.levels,
            st.write_stalls,
            st.write_amplification()
        );
        db.close().await.unwrap();
    });
}
