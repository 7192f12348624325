//! Helpers the emu tests share: a seeded generator and a one-core runtime.
// Each test binary uses only some of them.
#![allow(dead_code)]

/// xorshift64*: deterministic from the seed.
#[derive(Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The seeds a seeded test runs: `ZIOB_SEED=N` replays one, `ZIOB_SEEDS=N` runs N (else
/// `default_count`), drawn from the clock (odd, so that [`Rng`] never starts at 0).
pub fn seeds(default_count: u64) -> Vec<u64> {
    if let Ok(s) = std::env::var("ZIOB_SEED") {
        return vec![s.parse().expect("ZIOB_SEED is a number")];
    }
    let n = std::env::var("ZIOB_SEEDS")
        .ok()
        .map(|s| s.parse().expect("ZIOB_SEEDS is a number"))
        .unwrap_or(default_count);
    let base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    (0..n)
        .map(|i| base.wrapping_add(i * 0x9E37_79B9) | 1)
        .collect()
}

/// Runs `f` on a fresh one-core runtime and returns its output.
pub fn on_core<T: Send + 'static, F: std::future::Future<Output = T> + 'static>(
    f: impl FnOnce() -> F + Send + 'static,
) -> T {
    let rt = ziob_runtime::Runtime::builder().cores(1).build().unwrap();
    rt.block_on(f).unwrap()
}

/// Opens an emu device, through the page cache unless `direct`. A reopen right after the
/// device was dropped may find it still held by its tasks (zeros being written ahead, see
/// `emu::lock`): `Busy` is retried for up to 30 s.
pub async fn open_emu(path: &std::path::Path, direct: bool) -> ziob_backends::EmuDevice {
    use ziob_backends::{EmuDevice, ErrorKind, LatencyModel};
    let start = std::time::Instant::now();
    loop {
        let latency = LatencyModel::default();
        let res = if direct {
            EmuDevice::open(path, latency).await
        } else {
            EmuDevice::open_through_page_cache(path, latency).await
        };
        match res {
            Ok(dev) => {
                assert_eq!(dev.is_direct(), direct, "this file system refuses O_DIRECT");
                return dev;
            }
            Err(e) if e.kind() == ErrorKind::Busy && start.elapsed().as_secs() < 30 => {
                // Let the tasks holding it (on this core too) finish, without spinning.
                ziob_runtime::sleep(std::time::Duration::from_millis(10))
                    .await
                    .unwrap();
            }
            Err(e) => panic!("open: {e}"),
        }
    }
}

/// `len` bytes no two writes share (the write's number `id` in every 8-byte word, and the
/// word's index).
pub fn payload(id: u64, len: u64) -> Vec<u8> {
    (0..len / 8)
        .flat_map(|i| (id.rotate_left(17) ^ i).to_le_bytes())
        .collect()
}
