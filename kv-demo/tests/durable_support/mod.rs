//! Shared pieces of kv-demo's durability tests (WAL, manifest, store): emu device files under
//! /var/tmp, a ZIOB runtime, opening, closing and abandoning a client (a crash: buffered data
//! is lost), poking device bytes, a hang watchdog.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use ziob::backends::mem::MemDevice;
use ziob::backends::AnyDevice;
use ziob::{Client, Geometry, Runtime, ZiobConfig};

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

/// Blocks on `f`.
pub fn b<F: std::future::Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

/// A ZIOB runtime with `cores` cores.
pub fn runtime(cores: usize) -> Runtime {
    Runtime::builder().cores(cores).build().unwrap()
}

/// A fresh path for an emu device file under /var/tmp (nothing created), removed when
/// dropped.
pub struct EmuPath(pub PathBuf);

impl EmuPath {
    /// A unique path tagged `tag`.
    pub fn new(tag: &str) -> EmuPath {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = EmuPath(PathBuf::from(format!(
            "/var/tmp/kv-durable-{tag}-{}-{n}.zns",
            std::process::id()
        )));
        let _ = std::fs::remove_file(&p.0);
        p
    }

    /// A device of `zones` zones of `zone_bytes` at a unique path.
    pub fn create(tag: &str, zones: u32, zone_bytes: u64) -> EmuPath {
        let p = EmuPath::new(tag);
        let spec = p.spec();
        let rt = runtime(1);
        rt.block_on(move || async move {
            let g = Geometry::new(zones, zone_bytes);
            drop(ziob::backends::create_device(&spec, &g).await.unwrap());
        })
        .unwrap();
        p
    }

    /// The device spec.
    pub fn spec(&self) -> String {
        format!("emu:{}", self.0.display())
    }

    /// Byte offset of zone `zone`'s data in the file of a device of `zones` × `zone_bytes`.
    pub fn zone_offset(&self, zones: u32, zone_bytes: u64, zone: u32) -> u64 {
        let g = Geometry::new(zones, zone_bytes);
        ziob::backends::emu::format::Layout::for_geometry(&g).data_offset_bytes
            + zone as u64 * zone_bytes
    }

    /// Overwrites bytes of the file at `at`.
    pub fn poke(&self, at: u64, data: &[u8]) {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.0)
            .unwrap();
        f.write_all_at(data, at).unwrap();
    }

    /// Reads `len` bytes of the file at `at`.
    pub fn peek(&self, at: u64, len: usize) -> Vec<u8> {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::open(&self.0).unwrap();
        let mut buf = vec![0; len];
        f.read_exact_at(&mut buf, at).unwrap();
        buf
    }

    /// The whole file.
    pub fn bytes(&self) -> Vec<u8> {
        std::fs::read(&self.0).unwrap()
    }
}

impl Drop for EmuPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Opens `spec` on `rt`, buffered or not. An abandoned instance's device lives until its
/// last write in flight ends, and a reopen meanwhile is `Busy`: retried for 20 s.
pub fn open(rt: &Runtime, spec: &str, buffered: bool) -> Client {
    let config = ZiobConfig {
        buffered,
        ..ZiobConfig::default()
    };
    let mut tries = 0;
    loop {
        match b(Client::open(rt.handle(), spec, config.clone())) {
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

/// A ZIOB instance over the mem device `dev` (the test keeps the device: fault injection,
/// power loss).
pub fn client_on(rt: &Runtime, dev: &MemDevice, buffered: bool) -> Client {
    let config = ZiobConfig {
        buffered,
        ..ZiobConfig::default()
    };
    b(Client::with_device(
        rt.handle(),
        AnyDevice::Mem(dev.clone()),
        config,
    ))
    .unwrap()
}

/// Ends the instance: a clean close, or an abandon (a crash: buffered data is lost).
pub fn end(client: Client, crash: bool) {
    b(async move {
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

    /// A value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
