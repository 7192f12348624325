//! Reads racing deletes and garbage collection: reader threads read files while a writer
//! creates, fills, syncs and deletes files and runs GC on a small device whose zones are
//! reset and reused all the time. A read returns the file's bytes (a prefix of what was
//! appended, as far as the file's size went) or `NotFound` once the file is gone — never
//! zeros, never another file's bytes, never a device error from a reset zone. Seeded;
//! `ZONEFS_RACE_ITERS` sets the writer's files (default 800).

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use support::{b, bounded, runtime, Rng};
use ziob::{Client, ZiobConfig};
use ziob_zonefs::{FsError, MkfsOptions, WriteLifetime, ZoneFs};

/// The content of file `n` at `offset`: differs between files at every offset.
fn content(n: u64, from: u64, len: usize) -> Vec<u8> {
    (from..from + len as u64)
        .map(|o| (n.wrapping_mul(37).wrapping_add(o / 7) % 251 + 1) as u8)
        .collect()
}

fn name(n: u64) -> String {
    format!("f{n:06}")
}

#[test]
fn reads_racing_deletes_and_gc_never_see_foreign_bytes() {
    let iters: u64 = std::env::var("ZONEFS_RACE_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(800);
    for buffered in [true, false] {
        bounded(600, move || {
            let rt = runtime(2);
            let config = ZiobConfig {
                buffered,
                ..ZiobConfig::default()
            };
            let client = b(Client::open(
                rt.handle(),
                "mem:zones=16,zone_size=64K",
                config,
            ))
            .unwrap();
            b(ZoneFs::mkfs(&client, MkfsOptions::default())).unwrap();
            let fs = b(ZoneFs::mount(client.clone())).unwrap().blocking();
            // Files [low, high) may exist.
            let high = Arc::new(AtomicU64::new(0));
            let low = Arc::new(AtomicU64::new(0));
            let stop = Arc::new(AtomicBool::new(false));
            let reads = Arc::new(AtomicU64::new(0));
            let readers: Vec<_> = (0..3u64)
                .map(|r| {
                    let (fs, high, low, stop, reads) = (
                        fs.clone(),
                        high.clone(),
                        low.clone(),
                        stop.clone(),
                        reads.clone(),
                    );
                    std::thread::spawn(move || {
                        let mut rng = Rng(r * 1_000_003 + 17);
                        while !stop.load(Ordering::Relaxed) {
                            let (lo, hi) = (low.load(Ordering::SeqCst), high.load(Ordering::SeqCst));
                            if hi == lo {
                                std::thread::yield_now();
                                continue;
                            }
                            let n = lo + rng.next() % (hi - lo);
                            let from = rng.next() % 20_000;
                            let len = 1 + (rng.next() % 40_000) as usize;
                            match fs.read_at(&name(n), from, len) {
                                Ok(got) => {
                                    reads.fetch_add(1, Ordering::Relaxed);
                                    let want = content(n, from, got.len());
                                    if got[..] != want[..] {
                                        let bad = (0..got.len()).find(|&i| got[i] != want[i]).unwrap();
                                        panic!(
                                            "read of {} at {from}+{len}: byte {} is {:#x}, want {:#x} (buffered={buffered})",
                                            name(n),
                                            from + bad as u64,
                                            got[bad],
                                            want[bad]
                                        );
                                    }
                                }
                                Err(FsError::NotFound(_)) => {}
                                Err(e) => panic!("read of {}: {e}", name(n)),
                            }
                        }
                    })
                })
                .collect();
            let mut rng = Rng(99);
            let mut live = std::collections::VecDeque::new();
            for n in 0..iters {
                fs.create(&name(n), WriteLifetime::Medium).unwrap();
                high.store(n + 1, Ordering::SeqCst);
                let size = 2000 + rng.next() % 30_000;
                let mut at = 0;
                while at < size {
                    let len = (1 + rng.next() % 8000).min(size - at);
                    fs.append(&name(n), &content(n, at, len as usize)).unwrap();
                    at += len;
                }
                fs.sync(&name(n)).unwrap();
                live.push_back(n);
                // Keep 8 files: delete one of the 4 oldest.
                if live.len() > 8 {
                    let i = (rng.next() % 4) as usize;
                    let victim = live.remove(i).unwrap();
                    fs.delete(&name(victim)).unwrap();
                    low.store(live[0], Ordering::SeqCst);
                }
                if n % 5 == 0 {
                    b(fs.fs().gc(2)).unwrap();
                }
            }
            stop.store(true, Ordering::Relaxed);
            for r in readers {
                r.join().unwrap();
            }
            let stats = b(fs.fs().stats());
            println!(
                "buffered={buffered}: {} reads checked, GC reclaimed {} zones",
                reads.load(Ordering::Relaxed),
                stats.gc_zones
            );
            assert!(stats.gc_zones > 0);
            drop(fs);
            b(client.close()).unwrap();
        });
    }
}
