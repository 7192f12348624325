//! tokio-uring 0.5: QD tasks on its current-thread runtime, `File::read_at` into a 4 KiB
//! aligned buffer that each task reuses, or `tokio_uring::no_op` for the NOP workload.

use std::os::unix::fs::OpenOptionsExt;
use std::rc::Rc;

use super::{nop_loop, read_loop, ring_entries};
use crate::meter::{Meter, Sample};
use crate::spec::{RunSpec, Workload, BLOCK_SIZE_BYTES};
use crate::testfile::AlignedBuf;

// SAFETY: the allocation never moves while the AlignedBuf lives, and all `len` bytes are
// initialised (zeroed at allocation).
unsafe impl tokio_uring::buf::IoBuf for AlignedBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
    fn bytes_total(&self) -> usize {
        self.len()
    }
}

// SAFETY: as above; every byte is always initialised, so set_init has nothing to record.
unsafe impl tokio_uring::buf::IoBufMut for AlignedBuf {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    unsafe fn set_init(&mut self, _pos: usize) {}
}

pub(super) fn run(spec: &RunSpec) -> Result<Sample, String> {
    let spec = spec.clone();
    let mut builder = tokio_uring::builder();
    builder.entries(ring_entries(spec.qd));
    builder.start(async move {
        let meter = Rc::new(Meter::new(spec.warmup, spec.duration, None));
        let tasks: Vec<_> = if spec.workload == Workload::Nop {
            (0..spec.qd)
                .map(|_| {
                    let meter = meter.clone();
                    tokio_uring::spawn(async move { nop_loop(&meter, tokio_uring::no_op).await })
                })
                .collect()
        } else {
            let file = tokio_uring::fs::OpenOptions::new()
                .read(true)
                .custom_flags(spec.open_flags() & libc::O_DIRECT)
                .open(&spec.path)
                .await
                .map_err(|e| format!("open {}: {e}", spec.path.display()))?;
            let file = Rc::new(file);
            let blocks = spec.blocks_count();
            (0..spec.qd)
                .map(|i| {
                    let (file, meter) = (file.clone(), meter.clone());
                    tokio_uring::spawn(async move {
                        let buf = AlignedBuf::new(BLOCK_SIZE_BYTES as usize);
                        read_loop(i, blocks, &meter, buf, |b, off| file.read_at(b, off)).await
                    })
                })
                .collect()
        };
        for t in tasks {
            t.await.map_err(|e| format!("task: {e}"))??;
        }
        meter.sample()
    })
}
