//! Shared pieces of the zonefs tests: emu devices under /var/tmp, a ZIOB runtime, opening a
//! client, and closing or abandoning it (a crash: buffered data is lost).

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use ziob::{Client, Runtime, ZiobConfig};
use ziob_zonefs::{MkfsOptions, ZoneFs};

/// Runs `f` on a thread of its own and panics if it does not finish within `secs` (a hang
/// watchdog, not a speed check).
pub fn bounded<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("hang: not finished within {secs} s"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the test thread panicked"),
    }
}

/// A fresh emu file under /var/tmp, removed when dropped.
pub struct EmuFile(pub PathBuf);

impl EmuFile {
    /// Creates a device of `zones` zones of `zone_bytes` (at most `max_active` active zones).
    pub fn create(tag: &str, zones: u32, zone_bytes: u64, max_active: Option<u32>) -> EmuFile {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let f = EmuFile(PathBuf::from(format!(
            "/var/tmp/i15-zonefs-{tag}-{}-{n}.zns",
            std::process::id()
        )));
        let _ = std::fs::remove_file(&f.0);
        let spec = f.spec();
        let rt = Runtime::builder().cores(1).build().unwrap();
        rt.block_on(move || async move {
            let mut g = ziob::Geometry::new(zones, zone_bytes);
            g.max_active_zones = max_active;
            g.max_open_zones = max_active;
            drop(ziob::backends::create_device(&spec, &g).await.unwrap());
        })
        .unwrap();
        f
    }

    /// A copy of this device file under a fresh name (a crash image of it).
    pub fn copy(&self, tag: &str) -> EmuFile {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let f = EmuFile(PathBuf::from(format!(
            "/var/tmp/i15-zonefs-{tag}-copy-{}-{n}.zns",
            std::process::id()
        )));
        std::fs::copy(&self.0, &f.0).unwrap();
        f
    }

    /// The device spec.
    pub fn spec(&self) -> String {
        format!("emu:{}", self.0.display())
    }

    /// Byte offset of zone `zone`'s data in the file (docs/format.md, "Regions").
    pub fn zone_offset(&self, zones: u64, zone_bytes: u64, zone: u64) -> u64 {
        let slot = (24 + 16 * zones + 4).div_ceil(4096) * 4096;
        (4096 + 2 * slot).div_ceil(4096) * 4096 + zone * zone_bytes
    }

    /// Overwrites bytes of the file at `at`.
    pub fn poke(&self, at: u64, bytes: &[u8]) {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.0)
            .unwrap();
        f.seek(SeekFrom::Start(at)).unwrap();
        f.write_all(bytes).unwrap();
    }
}

impl Drop for EmuFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A ZIOB runtime with `cores` cores.
pub fn runtime(cores: usize) -> Runtime {
    Runtime::builder().cores(cores).build().unwrap()
}

/// Opens `spec` on `rt`, buffered or not. An abandoned instance's device lives until its
/// last write in flight ends, and a read-write reopen meanwhile is `Busy` (after the emu's
/// own 250 ms of retrying): on a loaded machine that takes longer, so this retries for 20 s.
pub fn open(rt: &Runtime, spec: &str, buffered: bool) -> Client {
    let config = ZiobConfig {
        buffered,
        ..ZiobConfig::default()
    };
    let mut tries = 0;
    loop {
        match futures::executor::block_on(Client::open(rt.handle(), spec, config.clone())) {
            Ok(c) => return c,
            Err(ziob::ZiobError::Device(ziob::backends::DeviceError::Busy { .. }))
                if tries < 80 =>
            {
                tries += 1;
                std::thread::sleep(Duration::from_millis(250));
            }
            Err(e) => panic!("open {spec}: {e}"),
        }
    }
}

/// Opens `spec` on `rt` (as [`open`]), formats it with the default options and mounts it.
pub fn formatted(rt: &Runtime, spec: &str, buffered: bool) -> (Client, ZoneFs) {
    let client = open(rt, spec, buffered);
    b(ZoneFs::mkfs(&client, MkfsOptions::default())).unwrap();
    let fs = b(ZoneFs::mount(client.clone())).unwrap();
    (client, fs)
}

/// Ends the instance: a clean close, or an abandon (a crash: buffered data is lost).
pub fn end(client: Client, crash: bool) {
    futures::executor::block_on(async move {
        if crash {
            client
                .with_ziob(|z| async move { z.abandon().await })
                .await
                .unwrap();
        } else {
            client.close().await.unwrap();
        }
    })
}

/// Blocks on `f` (the zonefs futures are `Send` and run on any executor).
pub fn b<F: std::future::Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

/// A small deterministic generator (xorshift64) for seeded test runs.
pub struct Rng(pub u64);

impl Rng {
    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
