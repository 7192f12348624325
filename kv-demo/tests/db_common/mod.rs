//! Helpers shared by the `db*` tests (included with `mod db_common;`).
#![allow(dead_code)]

use std::time::Duration;

use kv_demo::{Db, Options};
use ziob::backends::mem::MemDevice;
use ziob::backends::AnyDevice;
use ziob::{Client, Runtime, ZiobConfig};

/// A small deterministic generator (xorshift64*), so a failure names its seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// The number in environment variable `name`, or `default` (tests that search take their
/// rounds and seeds this way, so a longer search needs no rebuild).
pub fn env_or(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

/// Options that make flushes and compactions happen after a few dozen writes.
pub fn tiny(shards: usize) -> Options {
    Options {
        shards,
        write_buffer_bytes: 4096,
        target_file_bytes: 4096,
        cache_bytes: 64 << 10,
        ..Options::default()
    }
}

/// Opens a new store with [`tiny`] options of `shards` on a fresh 64 × 1 MiB `mem:` device.
pub fn open_tiny_mem(rt: &Runtime, shards: usize) -> Db {
    futures::executor::block_on(Db::open(
        rt.handle(),
        "mem:zones=64,zone_size=1M",
        tiny(shards),
    ))
    .unwrap()
}

/// Runs `f` on a fresh thread; panics if it takes longer than `secs` (a hang watchdog, not a
/// speed check).
pub fn with_watchdog<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => {
            t.join().unwrap();
            v
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("hang: not done after {secs} s")
        }
        Err(_) => match t.join() {
            Err(p) => std::panic::resume_unwind(p),
            Ok(()) => unreachable!(),
        },
    }
}

pub fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// A fresh emu device path under /var/tmp (nothing created: `Db::open` creates it), removed
/// when dropped.
pub struct EmuFile(pub std::path::PathBuf);

impl EmuFile {
    pub fn new(tag: &str) -> EmuFile {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::path::PathBuf::from(format!(
            "/var/tmp/kv-engine-{tag}-{}-{n}.zns",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&p);
        EmuFile(p)
    }

    pub fn spec(&self) -> String {
        format!("emu:{}", self.0.display())
    }
}

impl Drop for EmuFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `tiny` options whose `emu:` device (created on first open) is `zones` × 1 MiB.
pub fn tiny_emu(shards: usize, zones: u32) -> Options {
    Options {
        emu_zones: zones,
        emu_zone_bytes: 1 << 20,
        ..tiny(shards)
    }
}

/// A ZIOB instance (zone write buffer on or off) over `dev`, made on core 0 of `rt`.
pub fn client_on(rt: &Runtime, dev: &MemDevice, buffered: bool) -> Client {
    let config = ZiobConfig {
        buffered,
        ..ZiobConfig::default()
    };
    futures::executor::block_on(Client::with_device(
        rt.handle(),
        AnyDevice::Mem(dev.clone()),
        config,
    ))
    .unwrap()
}
