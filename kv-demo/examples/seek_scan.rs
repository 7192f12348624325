//! A quick look at the read paths a scan uses (a benchmark, not a test: the side-by-side
//! numbers come from `kv-demo` and `benches/`): `KV_NUM` random 16-byte keys with 100-byte
//! values filled (db_bench's key layout), then readseq (one full scan) and `KV_NUM` seeks at
//! random keys, each taking the first entry at or after the key (db_bench's seekrandom with
//! `--seek_nexts=0`), over `mem:`.
//!
//! `cargo run --release -p kv-demo --example seek_scan` (env: `KV_CORES` (2), `KV_NUM`
//! (100000), `KV_BUFFER` (write buffer bytes, 16 MiB)).

use std::time::Instant;

use kv_demo::{Db, Options, WriteOptions};
use ziob::Runtime;

/// xorshift64*: a fixed key sequence.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default)
}

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.to_be_bytes());
    k
}

fn main() {
    let cores = env("KV_CORES", 2) as usize;
    let n = env("KV_NUM", 100_000);
    let buffer = env("KV_BUFFER", 16 << 20) as usize;
    let rt = Runtime::builder().cores(cores).build().unwrap();
    let handle = rt.handle();
    futures::executor::block_on(async move {
        let opts = Options {
            write_buffer_bytes: buffer,
            ..Options::default()
        };
        let db = Db::open(handle, "mem:zones=64,zone_size=64M", opts)
            .await
            .unwrap();
        let mut rng = Rng(1);
        let w = WriteOptions::default();
        let t = Instant::now();
        for _ in 0..n {
            db.put(key(rng.below(n)).to_vec(), vec![7u8; 100], &w)
                .await
                .unwrap();
        }
        let fill = t.elapsed();
        let t = Instant::now();
        let mut scan = db.scan(None, None, None).await.unwrap();
        let mut seen = 0u64;
        while scan.next().await.unwrap().is_some() {
            seen += 1;
        }
        drop(scan);
        let readseq = t.elapsed();
        let t = Instant::now();
        let mut found = 0u64;
        for _ in 0..n {
            let k = key(rng.below(n));
            let mut scan = db.scan(Some(&k), None, None).await.unwrap();
            if scan
                .next()
                .await
                .unwrap()
                .is_some_and(|(got, _)| got[..] == k)
            {
                found += 1;
            }
        }
        let seek = t.elapsed();
        let st = db.stats().await;
        let us = |d: std::time::Duration, ops: u64| d.as_secs_f64() * 1e6 / ops.max(1) as f64;
        println!(
            "fillrandom {:.3} us/op; readseq {:.3} us/op ({seen} entries); seekrandom {:.3} us/op ({found} of {n} found); levels {:?}",
            us(fill, n),
            us(readseq, seen),
            us(seek, n),
            st.levels
        );
        db.close().await.unwrap();
    });
}
