//! monoio 0.2 with its io_uring driver: QD tasks, `File::read_at` into a 4 KiB aligned
//! buffer that each task reuses.

use std::os::unix::fs::OpenOptionsExt;
use std::rc::Rc;

use super::{read_loop, ring_entries};
use crate::meter::{Meter, Sample};
use crate::spec::{RunSpec, BLOCK_SIZE_BYTES};
use crate::testfile::AlignedBuf;

// SAFETY: the allocation never moves while the AlignedBuf lives, and all `len` bytes are
// initialised (zeroed at allocation).
unsafe impl monoio::buf::IoBuf for AlignedBuf {
    fn read_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
}

// SAFETY: as above; every byte is always initialised, so set_init has nothing to record.
unsafe impl monoio::buf::IoBufMut for AlignedBuf {
    fn write_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn bytes_total(&mut self) -> usize {
        self.len()
    }
    unsafe fn set_init(&mut self, _pos: usize) {}
}

pub(super) fn run(spec: &RunSpec) -> Result<Sample, String> {
    let spec = spec.clone();
    let mut rt = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
        .with_entries(ring_entries(spec.qd))
        .build()
        .map_err(|e| format!("monoio runtime: {e}"))?;
    rt.block_on(async move {
        let file = monoio::fs::OpenOptions::new()
            .read(true)
            .custom_flags(spec.open_flags() & libc::O_DIRECT)
            .open(&spec.path)
            .await
            .map_err(|e| format!("open {}: {e}", spec.path.display()))?;
        let file = Rc::new(file);
        let meter = Rc::new(Meter::new(spec.warmup, spec.duration, None));
        let blocks = spec.blocks_count();
        let tasks: Vec<_> = (0..spec.qd)
            .map(|i| {
                let (file, meter) = (file.clone(), meter.clone());
                monoio::spawn(async move {
                    let buf = AlignedBuf::new(BLOCK_SIZE_BYTES as usize);
                    read_loop(i, blocks, &meter, buf, |b, off| file.read_at(b, off)).await
                })
            })
            .collect();
        for t in tasks {
            t.await?;
        }
        meter.sample()
    })
}
