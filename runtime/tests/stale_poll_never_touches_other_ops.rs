//! Polling a finished op future again (the `select!` over `&mut sleep` pattern) must never
//! touch another op: each op's key carries a generation, and a finished `Sleep` answers by
//! itself. Seeded rounds: finished sleeps are re-polled while pipe reads that reuse their
//! table slots are in flight; every read must land in its own buffer with its own pipe's
//! data, and nothing may hang (a watchdog turns a lost wake-up into a failure).

use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::mpsc;
use std::task::Poll;
use std::time::Duration;

use ziob_runtime::{sleep, spawn, yield_now, DmaBuf, File, Runtime, Sleep};

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

fn pipe() -> (File, std::fs::File) {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors are fresh and owned by us from here on.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    (File::from_fd(r), std::fs::File::from(w))
}

/// Re-polls every finished sleep with the current task's waker; each must answer `Ready(Ok)`.
async fn repoll_all(sleeps: &mut [Sleep], rng: &mut Rng, seed: u64) {
    for _ in 0..sleeps.len() {
        let i = rng.below(sleeps.len());
        match futures::poll!(&mut sleeps[i]) {
            Poll::Ready(Ok(())) => {}
            other => panic!("a finished sleep answered {other:?} on a re-poll (seed {seed})"),
        }
    }
}

async fn round(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    // Finished sleeps: their table slots are free for the reads below.
    let mut sleeps: Vec<Sleep> = (0..1 + rng.below(8))
        .map(|_| sleep(Duration::ZERO))
        .collect();
    for s in sleeps.iter_mut() {
        s.await.unwrap();
    }
    let readers = 1 + rng.below(8);
    let mut writers = Vec::new();
    let mut tasks = Vec::new();
    for r in 0..readers {
        let (rd, wr) = pipe();
        writers.push((r, wr));
        tasks.push(spawn(async move {
            let (res, buf) = rd.read_at(DmaBuf::with_capacity(4096), 0).await;
            (r, res.map(|n| buf[..n].to_vec()))
        }));
    }
    // Let the readers submit: their ops now sit in the slots the sleeps used.
    for _ in 0..1 + rng.below(3) {
        yield_now().await;
    }
    repoll_all(&mut sleeps, &mut rng, seed).await;
    // Answer the pipes in a random order, re-polling the finished sleeps in between (a read
    // may have completed and not been picked up yet by its task).
    while !writers.is_empty() {
        let (r, mut wr) = writers.swap_remove(rng.below(writers.len()));
        let data = vec![(seed as u8) ^ (r as u8 + 1); 1 + rng.below(4096)];
        wr.write_all(&data).unwrap();
        for _ in 0..rng.below(3) {
            yield_now().await;
        }
        repoll_all(&mut sleeps, &mut rng, seed).await;
    }
    for (i, t) in tasks.into_iter().enumerate() {
        let (r, got) = t.await;
        assert_eq!(r, i);
        let got = got.unwrap_or_else(|e| panic!("read {r} failed: {e} (seed {seed})"));
        assert!(!got.is_empty(), "read {r} got no data (seed {seed})");
        let want = (seed as u8) ^ (r as u8 + 1);
        assert!(
            got.iter().all(|&b| b == want),
            "read {r} got another pipe's data (seed {seed})"
        );
    }
    // A finished sleep still answers once everything else is gone.
    repoll_all(&mut sleeps, &mut rng, seed).await;
}

#[test]
fn repolled_finished_sleeps_never_disturb_reads_in_flight() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let rt = Runtime::builder().cores(1).build().unwrap();
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.block_on(|| async {
                for seed in 1..=300u64 {
                    round(seed).await;
                }
            })
            .unwrap()
        }));
        let _ = tx.send(res.is_ok());
    });
    let ok = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("hung: a read was never woken (its slot was taken by a stale poll?)");
    assert!(ok, "a round failed (see the panic above)");
}

#[test]
fn a_sleep_in_a_select_loop_can_be_polled_after_it_fired() {
    let rt = Runtime::builder().cores(1).build().unwrap();
    rt.block_on(|| async {
        let mut timer = sleep(Duration::from_millis(1));
        let mut fired = 0;
        let mut turns = 0;
        // `select!` over `&mut timer`, going on after the timer fired: it stays fired.
        while fired < 20 {
            turns += 1;
            assert!(turns < 1_000_000, "the timer never fired");
            let tick = ziob_runtime::nop();
            futures::pin_mut!(tick);
            match futures::future::select(&mut timer, tick).await {
                futures::future::Either::Left((r, _)) => {
                    r.unwrap();
                    fired += 1;
                }
                futures::future::Either::Right((r, _)) => {
                    r.unwrap();
                    assert_eq!(fired, 0, "a fired timer answered Pending");
                }
            }
        }
        assert!(futures::future::FusedFuture::is_terminated(&timer));
    })
    .unwrap();
}
