//! Registered files and buffers belong to one ring: two runtimes in one process both have a
//! core 0, and a registration of one must never be used, or undone, on the other.

use std::sync::mpsc;
use std::time::Duration;

use ziob_runtime::{DmaBuf, File, Runtime};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Runs `f` on a thread, failing after 30 s instead of hanging.
fn bounded(f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => t.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("hung"),
    }
}

fn temp_file(dir: &tempfile::TempDir, name: &str) -> (std::path::PathBuf, File) {
    let path = dir.path().join(name);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    (path, File::from_std(f))
}

/// Files registered on runtime A are written from runtime B's core 0 (where B has its own
/// registrations in the same slot numbers): every write lands in its own file.
#[test]
fn a_write_from_another_runtimes_core_lands_in_its_own_file() {
    bounded(|| {
        let a = Runtime::builder().cores(1).build().unwrap();
        let b = Runtime::builder().cores(1).build().unwrap();
        let dir = tempfile::tempdir().unwrap();
        for seed in 1..=20u64 {
            let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
            let n_a = 1 + rng.below(4);
            let n_b = 1 + rng.below(4);
            let files_a: Vec<_> = (0..n_a)
                .map(|i| temp_file(&dir, &format!("a{seed}-{i}")))
                .collect();
            let files_b: Vec<_> = (0..n_b)
                .map(|i| temp_file(&dir, &format!("b{seed}-{i}")))
                .collect();
            let handles_a: Vec<File> = files_a.iter().map(|(_, f)| f.clone()).collect();
            let handles_b: Vec<File> = files_b.iter().map(|(_, f)| f.clone()).collect();
            let ha = handles_a.clone();
            a.block_on(move || async move {
                for f in &ha {
                    assert!(f.register().unwrap());
                }
            })
            .unwrap();
            let hb = handles_b.clone();
            b.block_on(move || async move {
                for f in &hb {
                    assert!(f.register().unwrap());
                }
            })
            .unwrap();
            // Write every file of A from B's core 0, and every file of B from A's core 0.
            let (ha, hb) = (handles_a.clone(), handles_b.clone());
            b.block_on(move || async move {
                for (i, f) in ha.iter().enumerate() {
                    let (r, _) = f
                        .write_at(DmaBuf::from_slice(format!("A{i}").as_bytes()), 0)
                        .await;
                    r.unwrap();
                }
            })
            .unwrap();
            a.block_on(move || async move {
                for (i, f) in hb.iter().enumerate() {
                    let (r, _) = f
                        .write_at(DmaBuf::from_slice(format!("B{i}").as_bytes()), 0)
                        .await;
                    r.unwrap();
                }
            })
            .unwrap();
            for (i, (p, _)) in files_a.iter().enumerate() {
                assert_eq!(
                    std::fs::read(p).unwrap(),
                    format!("A{i}").as_bytes(),
                    "seed {seed}"
                );
            }
            for (i, (p, _)) in files_b.iter().enumerate() {
                assert_eq!(
                    std::fs::read(p).unwrap(),
                    format!("B{i}").as_bytes(),
                    "seed {seed}"
                );
            }
            // Drop A's files on B's core 0: B's registrations must survive.
            drop(files_a);
            b.block_on(move || async move { drop(handles_a) }).unwrap();
            let hb = handles_b.clone();
            b.block_on(move || async move {
                for (i, f) in hb.iter().enumerate() {
                    let (r, _) = f
                        .write_at(DmaBuf::from_slice(format!("b{i}").as_bytes()), 0)
                        .await;
                    r.unwrap_or_else(|e| panic!("B's file {i} lost its slot: {e} (seed {seed})"));
                }
            })
            .unwrap();
            drop(handles_b);
            drop(files_b);
        }
    });
}

/// Registered files dropped on a thread that is not their core give their slot back: more
/// registrations than the table has slots keep succeeding.
#[test]
fn files_dropped_off_core_give_their_slot_back() {
    bounded(|| {
        let rt = Runtime::builder().cores(1).build().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (_, base) = temp_file(&dir, "f");
        let std_file = std::fs::File::open(dir.path().join("f")).unwrap();
        drop(base);
        for i in 0..(ziob_runtime::fs::FIXED_FILE_SLOTS as usize + 100) {
            let f = File::from_std(std_file.try_clone().unwrap());
            let back = rt
                .block_on(move || async move {
                    let ok = f.register().unwrap();
                    (ok, f)
                })
                .unwrap();
            assert!(back.0, "registration {i} found no free slot: slots leak");
            drop(back.1); // off-core
        }
    });
}

/// A registered buffer of runtime A used for I/O on runtime B's core 0 works (as a plain
/// buffer) and goes back to A's arena when dropped.
#[test]
fn a_fixed_buffer_of_another_runtime_is_used_as_a_plain_buffer() {
    bounded(|| {
        let a = Runtime::builder()
            .cores(1)
            .fixed_buffers(2, 4096)
            .build()
            .unwrap();
        let b = Runtime::builder()
            .cores(1)
            .fixed_buffers(2, 4096)
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        for round in 0..5u8 {
            let (path, file) = temp_file(&dir, &format!("x{round}"));
            let bufs = a
                .block_on(move || async move {
                    (0..2)
                        .map(|i| {
                            let mut b = DmaBuf::fixed(4096);
                            assert!(b.is_fixed());
                            b.resize(4096, round * 2 + i);
                            b
                        })
                        .collect::<Vec<_>>()
                })
                .unwrap();
            b.block_on(move || async move {
                for (i, buf) in bufs.into_iter().enumerate() {
                    let (r, buf) = file.write_at(buf, i as u64 * 4096).await;
                    assert_eq!(r.unwrap(), 4096);
                    drop(buf); // on B: goes back to A's arena
                }
            })
            .unwrap();
            let data = std::fs::read(&path).unwrap();
            assert_eq!(data.len(), 8192);
            assert!(data[..4096].iter().all(|&x| x == round * 2));
            assert!(data[4096..].iter().all(|&x| x == round * 2 + 1));
            a.block_on(|| async {
                let b: Vec<_> = (0..2).map(|_| DmaBuf::fixed(4096)).collect();
                assert!(
                    b.iter().all(|b| b.is_fixed()),
                    "A's arena slots did not come back"
                );
            })
            .unwrap();
        }
    });
}

/// A poller guard dropped on another runtime's core 0 leaves that core's pollers alone and
/// removes its own poller on its own core.
#[test]
fn a_poller_guard_dropped_elsewhere_removes_only_its_own_poller() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    bounded(|| {
        let a = Runtime::builder().cores(1).build().unwrap();
        let b = Runtime::builder().cores(1).build().unwrap();
        let calls_a = Arc::new(AtomicU64::new(0));
        let calls_b = Arc::new(AtomicU64::new(0));
        let (ca, cb) = (calls_a.clone(), calls_b.clone());
        let guard_a = a
            .block_on(move || async move {
                ziob_runtime::register_poller(move || {
                    ca.fetch_add(1, Ordering::Relaxed);
                    0
                })
            })
            .unwrap();
        let guard_b = b
            .block_on(move || async move {
                ziob_runtime::register_poller(move || {
                    cb.fetch_add(1, Ordering::Relaxed);
                    0
                })
            })
            .unwrap();
        // Drop A's guard on B's core 0.
        b.block_on(move || async move { drop(guard_a) }).unwrap();
        // A's removal reaches A (FIFO mailbox: before this job).
        a.block_on(|| async {}).unwrap();
        a.block_on(|| async { ziob_runtime::yield_now().await })
            .unwrap();
        let after_a = calls_a.load(Ordering::Relaxed);
        let before_b = calls_b.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            calls_b.load(Ordering::Relaxed) > before_b,
            "B's poller was removed by A's guard"
        );
        assert_eq!(
            calls_a.load(Ordering::Relaxed),
            after_a,
            "A's poller still runs after its guard was dropped"
        );
        drop(guard_b);
    });
}
