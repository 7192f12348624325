//! Crash test for emu: a child process writes and flushes in a loop, printing every write
//! pointer set it has flushed; the parent SIGKILLs it at a random moment, reopens the device
//! and checks that every acknowledged flush survived: write pointers at or past the last
//! acknowledged ones, and every byte below a write pointer the one that was written.
//!
//! This file has its own `main` (harness = false): run with `ZIOB_CRASH_CHILD=PATH` it is the
//! child. The seed is printed; set `ZIOB_CRASH_SEED` to replay it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ziob_backends::{EmuDevice, Geometry, LatencyModel, ZonedDevice};
use ziob_runtime::DmaBuf;

mod support;
use support::{on_core, Rng};

const ZONES: u32 = 6;
const ZONE_BYTES: u64 = 8 << 20;
const BS: u64 = 4096;
const ROUNDS: u64 = 4;

fn pattern(zone: u32, offset: u64, len: u64) -> Vec<u8> {
    (offset..offset + len)
        .map(|o| ((u64::from(zone) * 131 + (o / BS) * 7 + o) % 251) as u8)
        .collect()
}

/// The child: writes random-length chunks round-robin over the zones, flushes every few
/// writes and prints `flushed wp0 wp1 …` after each completed flush.
fn child(path: String, seed: u64) {
    on_core(move || async move {
        let dev = EmuDevice::open(&path, LatencyModel::default())
            .await
            .unwrap();
        let mut rng = Rng(seed | 1);
        let mut wps = vec![0u64; ZONES as usize];
        for (z, info) in dev.report_all().await.unwrap().iter().enumerate() {
            wps[z] = info.write_pointer_bytes;
        }
        let mut writes = 0u64;
        loop {
            let zone = rng.below(u64::from(ZONES)) as u32;
            let len = (1 + rng.below(32)) * BS;
            let at = wps[zone as usize];
            if at + len > ZONE_BYTES {
                if wps.iter().all(|&w| w + BS > ZONE_BYTES) {
                    println!("done");
                    return;
                }
                continue;
            }
            let (r, _) = dev
                .write(zone, at, DmaBuf::from_slice(&pattern(zone, at, len)))
                .await;
            r.unwrap();
            wps[zone as usize] += len;
            writes += 1;
            if writes.is_multiple_of(3) {
                dev.flush().await.unwrap();
                let line: Vec<String> = wps.iter().map(|w| w.to_string()).collect();
                println!("flushed {}", line.join(" "));
            }
        }
    });
}

fn round(dir: &Path, seed: u64) {
    let path = dir.join(format!("crash-{seed}.zns"));
    let mut g = Geometry::new(ZONES, ZONE_BYTES);
    g.max_open_zones = Some(ZONES);
    let p = path.clone();
    on_core(move || async move {
        EmuDevice::create(&p, &g).await.unwrap();
    });
    let mut rng = Rng(seed);
    let kill_after = Duration::from_millis(20 + rng.below(300));
    let mut proc = Command::new(std::env::current_exe().unwrap())
        .env("ZIOB_CRASH_CHILD", &path)
        .env("ZIOB_CRASH_SEED", seed.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = proc.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });
    let start = Instant::now();
    while start.elapsed() < kill_after {
        if proc.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = proc.kill(); // SIGKILL
    let status = proc.wait().unwrap();
    let lines = reader.join().unwrap();
    let acked: Vec<u64> = lines
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("flushed "))
        .map(|l| l.split(' ').map(|w| w.parse().unwrap()).collect())
        .unwrap_or_else(|| vec![0; ZONES as usize]);
    println!(
        "seed {seed}: killed after {kill_after:?} ({status}), {} flushes acknowledged, last {acked:?}",
        lines.len()
    );
    let p = path.clone();
    on_core(move || async move {
        let dev = EmuDevice::open(&p, LatencyModel::default()).await.unwrap();
        for info in dev.report_all().await.unwrap() {
            let z = info.index;
            let wp = info.write_pointer_bytes;
            assert!(
                wp >= acked[z as usize],
                "seed {seed}: zone {z} write pointer {wp} is behind the acknowledged flush {}",
                acked[z as usize]
            );
            let mut off = 0;
            while off < ZONE_BYTES {
                let len = (1 << 20).min(ZONE_BYTES - off);
                let (r, buf) = dev
                    .read(z, off, len as usize, DmaBuf::with_capacity(len as usize))
                    .await;
                r.unwrap();
                let data = wp.saturating_sub(off).min(len) as usize;
                assert!(
                    buf[..data] == pattern(z, off, data as u64)[..],
                    "seed {seed}: zone {z}: data below the write pointer {wp} differs near offset {off}"
                );
                assert!(
                    buf[data..].iter().all(|&b| b == 0),
                    "seed {seed}: zone {z}: data past the write pointer"
                );
                off += len;
            }
        }
    });
    std::fs::remove_file(&path).unwrap();
}

fn main() {
    if let Ok(path) = std::env::var("ZIOB_CRASH_CHILD") {
        let seed = std::env::var("ZIOB_CRASH_SEED").unwrap().parse().unwrap();
        child(path, seed);
        return;
    }
    let seed: u64 = std::env::var("ZIOB_CRASH_SEED")
        .ok()
        .map(|s| s.parse().expect("ZIOB_CRASH_SEED is a number"))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    println!("emu_crash_kill9: seed {seed} (set ZIOB_CRASH_SEED={seed} to replay)");
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(seed | 1);
    for _ in 0..ROUNDS {
        round(dir.path(), rng.next());
    }
    println!("emu_crash_kill9: {ROUNDS} kill -9 rounds passed");
}
