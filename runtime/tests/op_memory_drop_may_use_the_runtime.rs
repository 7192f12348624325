//! The memory an op owned is dropped outside the op table's borrow: a buffer whose `Drop`
//! submits ops (here: makes and drops a timer) works whether it is freed by a cancelled op's
//! completion or by dropping a future whose op already completed.

use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::mpsc;
use std::time::Duration;

use ziob_runtime::{yield_now, File, IoBuf, IoBufMut, Runtime};

/// A `Vec<u8>` buffer that submits (and cancels) a timer when dropped.
struct NoisyBuf(Vec<u8>);

impl Drop for NoisyBuf {
    fn drop(&mut self) {
        drop(ziob_runtime::sleep(Duration::from_secs(1)));
    }
}

// SAFETY: delegates to Vec<u8>, whose heap memory is stable and `len` bytes initialised.
unsafe impl IoBuf for NoisyBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.0.stable_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.0.bytes_init()
    }
}

// SAFETY: delegates to Vec<u8>.
unsafe impl IoBufMut for NoisyBuf {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.0.stable_mut_ptr()
    }
    fn bytes_total(&self) -> usize {
        self.0.bytes_total()
    }
    unsafe fn set_init(&mut self, n: usize) {
        // SAFETY: forwarded from the caller.
        unsafe { self.0.set_init(n) }
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

#[test]
fn a_buffer_whose_drop_submits_ops_is_freed_safely() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let rt = Runtime::builder().cores(1).build().unwrap();
        let ok = rt.block_on(|| async {
            for round in 0..50 {
                let (rd, mut wr) = pipe();
                let mut read = Box::pin(rd.read_at(NoisyBuf(Vec::with_capacity(64)), 0));
                assert!(futures::poll!(read.as_mut()).is_pending());
                if round % 2 == 0 {
                    // Cancelled: the buffer is freed when the cancelled read completes.
                    drop(read);
                } else {
                    // Completed but never picked up: freed when the future is dropped.
                    wr.write_all(b"x").unwrap();
                    for _ in 0..5 {
                        yield_now().await;
                    }
                    ziob_runtime::nop().await.unwrap();
                    drop(read);
                }
                ziob_runtime::sleep(Duration::from_millis(1)).await.unwrap();
            }
            true
        });
        let _ = tx.send(ok.is_ok());
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(30))
            .expect("hung: the core died"),
        "the runtime failed"
    );
}
