//! Reads racing deletes and garbage collection: reader threads read files while a writer
//! creates, fills, syncs and deletes files and runs GC on a small device whose zones are
//! reset and reused all the time. A read returns the file's bytes (a prefix of what was
//! appended, as far as the file's size went) or `NotFound` once the file is gone — never
//! zeros, never another file's bytes, never a device error from a reset zone. The same
//! holds for reads through [`FileReader`]s kept open across many reads while their files
//! grow, move and go (at once into the caller's memory, or by the file's id). Seeded;
//! `ZONEFS_RACE_ITERS` sets the writer's files (default 800).

mod support;

use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use support::{b, bounded, runtime, Rng};
use ziob::{Client, ZiobConfig};
use ziob_zonefs::{BlockingZoneFs, FileReader, FsError, MkfsOptions, WriteLifetime, ZoneFs};

/// The content of file `n` at `offset`: differs between files at every offset.
fn content(n: u64, from: u64, len: usize) -> Vec<u8> {
    (from..from + len as u64)
        .map(|o| (n.wrapping_mul(37).wrapping_add(o / 7) % 251 + 1) as u8)
        .collect()
}

fn name(n: u64) -> String {
    format!("f{n:06}")
}

/// How the reader threads read.
#[derive(Clone, Copy, Debug)]
enum Reads {
    /// [`ZoneFs::read_at`] by path.
    ByPath,
    /// Through [`FileReader`]s each thread keeps open (up to 4, dropped at random).
    ByReader,
}

/// One reader's open [`FileReader`]s by file number.
#[derive(Default)]
struct OpenReaders(BTreeMap<u64, FileReader>);

impl OpenReaders {
    /// Reads `len` bytes at `from` of file `n` through a reader kept open (opened now if
    /// none is): at once into memory of our own when it can be, else by the file's id.
    fn read(
        &mut self,
        fs: &BlockingZoneFs,
        rng: &mut Rng,
        n: u64,
        from: u64,
        len: usize,
        at_once: &AtomicU64,
    ) -> Result<Vec<u8>, FsError> {
        if self.0.len() > 4 || rng.next().is_multiple_of(50) {
            let k = *self
                .0
                .keys()
                .nth((rng.next() % self.0.len().max(1) as u64) as usize)
                .unwrap_or(&n);
            self.0.remove(&k);
        }
        if let std::collections::btree_map::Entry::Vacant(e) = self.0.entry(n) {
            e.insert(fs.open_reader(&name(n))?);
        }
        let r = &self.0[&n];
        let mut out = vec![MaybeUninit::<u8>::uninit(); len];
        if let Some(res) = r.read_now_into(from, &mut out) {
            at_once.fetch_add(1, Ordering::Relaxed);
            return Ok(res?.to_vec());
        }
        let got = fs.read_with(r, from, len);
        if matches!(got, Err(FsError::NotFound(_))) {
            self.0.remove(&n);
        }
        Ok(got?.to_vec())
    }
}

#[test]
fn reads_racing_deletes_and_gc_never_see_foreign_bytes() {
    race(Reads::ByPath);
}

#[test]
fn file_readers_racing_deletes_and_gc_never_see_foreign_bytes() {
    race(Reads::ByReader);
}

fn race(mode: Reads) {
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
            let at_once = Arc::new(AtomicU64::new(0));
            let readers: Vec<_> = (0..3u64)
                .map(|r| {
                    let (fs, high, low, stop, reads, at_once) = (
                        fs.clone(),
                        high.clone(),
                        low.clone(),
                        stop.clone(),
                        reads.clone(),
                        at_once.clone(),
                    );
                    std::thread::spawn(move || {
                        let mut rng = Rng(r * 1_000_003 + 17);
                        let mut open = OpenReaders::default();
                        while !stop.load(Ordering::Relaxed) {
                            let (lo, hi) = (low.load(Ordering::SeqCst), high.load(Ordering::SeqCst));
                            if hi == lo {
                                std::thread::yield_now();
                                continue;
                            }
                            let n = lo + rng.next() % (hi - lo);
                            let from = rng.next() % 20_000;
                            // Through readers, half of the reads block-sized (most lie in
                            // one extent, which a reader reads at once).
                            let max = match mode {
                                Reads::ByReader if rng.next().is_multiple_of(2) => 4096,
                                _ => 40_000,
                            };
                            let len = 1 + (rng.next() % max) as usize;
                            let got = match mode {
                                Reads::ByPath => fs.read_at(&name(n), from, len).map(|d| d.to_vec()),
                                Reads::ByReader => open.read(&fs, &mut rng, n, from, len, &at_once),
                            };
                            match got {
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
            let at_once = at_once.load(Ordering::Relaxed);
            println!(
                "{mode:?}, buffered={buffered}: {} reads checked ({at_once} at once), GC reclaimed {} zones",
                reads.load(Ordering::Relaxed),
                stats.gc_zones
            );
            assert!(stats.gc_zones > 0);
            // (A pass-through instance reads whole blocks: never at once.)
            if matches!(mode, Reads::ByReader) && buffered {
                assert!(at_once > 0, "no read was served at once");
            }
            drop(fs);
            b(client.close()).unwrap();
        });
    }
}
