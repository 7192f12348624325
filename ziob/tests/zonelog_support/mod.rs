//! Shared pieces of the zone log tests: a ZIOB runtime plus a tokio runtime, a hang
//! watchdog, unique emu files, and record contents that name themselves.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use ziob::zonelog::{LogSpace, LogSpaceOptions};
use ziob::{Client, Runtime, ZiobConfig};

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

/// A multi-thread tokio runtime.
pub fn tokio_rt(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_time()
        .build()
        .unwrap()
}

/// A ZIOB runtime with `cores` cores.
pub fn ziob_rt(cores: usize) -> Runtime {
    Runtime::builder().cores(cores).build().unwrap()
}

/// A fresh emu file path under /var/tmp, removed when the guard drops.
pub struct EmuFile(pub PathBuf);

impl EmuFile {
    pub fn new(tag: &str) -> EmuFile {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        EmuFile(PathBuf::from(format!(
            "/var/tmp/i13-zonelog-{tag}-{}-{n}.zns",
            std::process::id()
        )))
    }

    /// Creates the device with `zones` zones of `zone_bytes`.
    pub fn create(tag: &str, zones: u32, zone_bytes: u64) -> EmuFile {
        let f = EmuFile::new(tag);
        let _ = std::fs::remove_file(&f.0);
        let spec = f.spec();
        let rt = ziob_rt(1);
        rt.block_on(move || async move {
            let g = ziob::Geometry::new(zones, zone_bytes);
            drop(ziob::backends::create_device(&spec, &g).await.unwrap());
        })
        .unwrap();
        f
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

/// Opens a client and a space over every zone.
pub async fn open_space(rt: &Runtime, spec: &str, config: ZiobConfig) -> (Client, LogSpace) {
    let client = Client::open(rt.handle(), spec, config).await.unwrap();
    let space = LogSpace::open(client.clone(), LogSpaceOptions::default())
        .await
        .unwrap();
    (client, space)
}

/// splitmix64.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// `len` bytes derived from `id` (any byte values, zeros included).
pub fn record(id: u64, len: usize) -> Vec<u8> {
    let mut x = mix(id);
    (0..len)
        .map(|i| {
            if i % 8 == 0 {
                x = mix(x);
            }
            (x >> ((i % 8) * 8)) as u8
        })
        .collect()
}
