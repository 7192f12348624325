//! Dropping in-flight reads at random points never lets the kernel write into memory that
//! was given back: buffers reused after the drops keep their checksums.

use std::os::fd::{FromRawFd, OwnedFd};
use std::time::Duration;

use futures::FutureExt;
use ziob_runtime::{core_stats, spawn, yield_now, DmaBuf, File, OpenOptions, Runtime};

const BUF_BYTES: usize = 4096;

/// A tiny deterministic generator (the seed is printed on failure by the assertion text).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn pipe() -> (File, std::fs::File) {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors are fresh and owned by us from here on.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    (File::from_fd(r), std::fs::File::from(w))
}

/// Fills pool buffers with a seeded pattern, lets the reactor run, and checks that no byte
/// changed: a late kernel write into a recycled buffer would show up here.
async fn reuse_and_verify(seed: u64, count: usize) {
    let mut held = Vec::with_capacity(count);
    for i in 0..count {
        let mut b = DmaBuf::with_capacity(BUF_BYTES);
        let fill: Vec<u8> = (0..BUF_BYTES)
            .map(|j| (seed as usize ^ i ^ j) as u8)
            .collect();
        b.extend_from_slice(&fill);
        held.push((crc32c::crc32c(&b), b));
    }
    for _ in 0..50 {
        yield_now().await;
    }
    ziob_runtime::sleep(Duration::from_millis(2)).await.unwrap();
    for (i, (crc, b)) in held.iter().enumerate() {
        assert_eq!(
            *crc,
            crc32c::crc32c(b),
            "buffer {i} was written after it was given back (seed {seed})"
        );
    }
}

#[test]
fn dropped_pipe_reads_never_write_into_recycled_buffers() {
    let rt = Runtime::builder().cores(1).build().unwrap();
    rt.block_on(|| async {
        let (reader, mut writer) = pipe();
        let mut rng = Rng(0x5EED_0001);
        for round in 0..20u64 {
            // Thousands of reads on an empty pipe: all stay in flight until dropped.
            let mut tasks = Vec::new();
            for _ in 0..200 {
                let r = reader.clone();
                tasks.push(spawn(async move {
                    let (res, _buf) = r.read_at(DmaBuf::with_capacity(BUF_BYTES), 0).await;
                    res
                }));
            }
            // Let some of them get submitted, then drop all at random points.
            for _ in 0..(rng.next() % 4) {
                yield_now().await;
            }
            drop(tasks);
            reuse_and_verify(round, 200).await;
            // Bytes written now must go to a live read or stay in the pipe, never into the
            // recycled buffers checked above.
            use std::io::Write;
            writer.write_all(&[0xAB; 512]).unwrap();
            reuse_and_verify(round + 1000, 200).await;
            // Drain what nobody read.
            let (res, _) = reader
                .read_at(DmaBuf::with_capacity(BUF_BYTES), 0)
                .now_or_never()
                .unwrap_or((Ok(0), DmaBuf::with_capacity(1)));
            let _ = res;
        }
        // Every abandoned op completed (cancelled) and released its memory.
        for _ in 0..100 {
            if core_stats().ops_in_flight <= 1 {
                break;
            }
            ziob_runtime::sleep(Duration::from_millis(5)).await.unwrap();
        }
        let stats = core_stats();
        assert!(stats.ops_abandoned >= 1000, "{stats:?}");
        assert!(stats.ops_in_flight <= 1, "{stats:?}");
    })
    .unwrap();
}

#[test]
fn dropped_file_reads_at_random_points_keep_checksums() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    let content: Vec<u8> = (0..(8 << 20))
        .map(|i: usize| (i / 4096) as u8 ^ 0x5A)
        .collect();
    std::fs::write(&path, &content).unwrap();
    let rt = Runtime::builder().cores(1).build().unwrap();
    rt.block_on(move || async move {
        let f = match OpenOptions::new().read(true).direct(true).open(&path).await {
            Ok(f) => f,
            Err(_) => OpenOptions::new().read(true).open(&path).await.unwrap(),
        };
        let mut rng = Rng(0x5EED_0002);
        for round in 0..30u64 {
            let mut tasks = Vec::new();
            for _ in 0..100 {
                let f = f.clone();
                let off = (rng.next() % 2048) * 4096;
                tasks.push(spawn(async move {
                    let (res, buf) = f.read_at(DmaBuf::with_capacity(BUF_BYTES), off).await;
                    // Completed reads must carry the file's bytes.
                    let n = res.unwrap();
                    assert_eq!(n, BUF_BYTES);
                    assert!(buf.iter().all(|&b| b == (off / 4096) as u8 ^ 0x5A));
                }));
            }
            // Drop a random subset at a random point.
            for _ in 0..(rng.next() % 3) {
                yield_now().await;
            }
            let keep = rng.next() % 100;
            for (i, t) in tasks.into_iter().enumerate() {
                if (i as u64) < keep {
                    t.await;
                } else {
                    drop(t);
                }
            }
            reuse_and_verify(round, 100).await;
        }
    })
    .unwrap();
}

#[test]
fn runtime_shutdown_with_reads_in_flight_is_clean() {
    let rt = Runtime::builder().cores(2).build().unwrap();
    let (reader, _writer) = pipe();
    rt.run_on_all(move |_| {
        let r = reader.clone();
        async move {
            for _ in 0..100 {
                let r = r.clone();
                spawn(async move {
                    let _ = r.read_at(DmaBuf::with_capacity(BUF_BYTES), 0).await;
                })
                .detach();
            }
            yield_now().await;
        }
    })
    .unwrap();
    // Dropping the runtime cancels the 200 reads and waits for their completions.
    drop(rt);
}
