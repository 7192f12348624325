//! A quick throughput look at the store (a benchmark, not a test: the side-by-side numbers
//! come from `kv-demo` and `benches/`): `KV_NUM` random 16-byte keys with 100-byte values
//! filled, then as many random reads, over `mem:`.
//!
//! `cargo run --release -p kv-demo --example fill_read` (env: `KV_CORES` (2), `KV_NUM`
//! (200000), `KV_ON_CORE=1` to run the workload as a task on core 0).

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

fn main() {
    let cores: usize = std::env::var("KV_CORES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(2);
    let n: u64 = std::env::var("KV_NUM")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(200_000);
    let rt = Runtime::builder().cores(cores).build().unwrap();
    // KV_ON_CORE=1: the workload runs as a task on core 0 (as kv-demo --run_on=cores).
    let on_core = std::env::var("KV_ON_CORE").is_ok_and(|v| v == "1");
    let handle = rt.handle();
    let work = move || async move {
        let opts = Options {
            write_buffer_bytes: 4 << 20,
            target_file_bytes: 4 << 20,
            ..Options::default()
        };
        let db = Db::open(handle, "mem:zones=64,zone_size=64M", opts)
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
    };
    if on_core {
        rt.block_on(work).unwrap();
    } else {
        futures::executor::block_on(work());
    }
}
