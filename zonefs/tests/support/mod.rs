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

/// The byte at `offset` of file `name` in the crash tests (a function of both, so a file
/// holding another file's bytes or bytes shifted in place is caught).
pub fn byte_at(name: &str, offset: u64) -> u8 {
    let h = name
        .bytes()
        .fold(7u8, |a, c| a.wrapping_mul(31).wrapping_add(c));
    h.wrapping_add((offset % 251) as u8)
}

/// The bytes `from..from + len` of file `name` in the crash tests.
pub fn content(name: &str, from: u64, len: u64) -> Vec<u8> {
    (from..from + len).map(|o| byte_at(name, o)).collect()
}

/// What a crash test's writer was told about a file.
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// Create acknowledged (else in flight at the crash).
    pub created: bool,
    /// Delete acknowledged / in flight.
    pub deleted: Option<bool>,
    /// Bytes appended (acknowledged or in flight), as `content` gives them.
    pub appended: u64,
    /// Size at the last acknowledged sync.
    pub synced: u64,
}

/// Checks a file system remounted after a crash against what its writers were told: every
/// acknowledged create and delete holds, every file has at least its acknowledged synced
/// size and at most what was appended, and its content is a prefix of what was appended.
/// Then makes `known` what the device holds (files gone are dropped). `at` names the round
/// in messages.
pub fn check_after_crash(
    fs: &ZoneFs,
    known: &mut std::collections::BTreeMap<String, Known>,
    at: &str,
) {
    let mut gone = Vec::new();
    for (name, k) in known.iter_mut() {
        let exists = b(fs.exists(name)).unwrap();
        match k.deleted {
            Some(true) => assert!(!exists, "{at}: {name} deleted, yet there"),
            Some(false) => {}
            None if k.created => assert!(exists, "{at}: {name} created, yet gone"),
            None => {}
        }
        if !exists {
            gone.push(name.clone());
            continue;
        }
        let size = b(fs.size(name)).unwrap();
        assert!(
            size >= k.synced,
            "{at}: {name}: {size} < synced {}",
            k.synced
        );
        assert!(
            size <= k.appended,
            "{at}: {name}: {size} > appended {}",
            k.appended
        );
        let data = b(fs.read_at(name, 0, size as usize)).unwrap();
        assert!(
            data[..] == content(name, 0, size)[..],
            "{at}: {name}: content is not a prefix of what was appended"
        );
        *k = Known {
            created: true,
            deleted: None,
            appended: size,
            synced: size,
        };
    }
    for n in gone {
        known.remove(&n);
    }
}
