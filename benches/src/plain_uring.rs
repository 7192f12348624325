//! The floor: a hand-written `io-uring` loop on the calling thread, no runtime.
//!
//! QD entries are kept in flight: one `submit_and_wait(1)` per turn submits the refills of
//! the previous turn and waits for at least one completion; every completion is refilled at
//! once with a new random offset. The ring has the same setup flags as a ZIOB core
//! (`SINGLE_ISSUER`, `COOP_TASKRUN`). Two variants: plain (`READ` on a descriptor) and fixed
//! (`READ_FIXED` from registered buffers on a registered file). The `eager` flag submits each
//! refill with its own `io_uring_enter` as soon as it is queued (what fio does with its
//! default `iodepth_batch_submit=1`), to tell a device-level effect of eager submission from
//! a runtime one.

use std::cell::Cell;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::rc::Rc;

use io_uring::{opcode, squeue, types, IoUring};

use crate::meter::{Meter, Sample};
use crate::rng::XorShift;
use crate::spec::{RunSpec, Workload, BLOCK_SIZE_BYTES};
use crate::testfile::AlignedBuf;

fn build_ring(entries: u32) -> std::io::Result<IoUring> {
    let mut b = IoUring::builder();
    b.setup_single_issuer().setup_coop_taskrun();
    match b.build(entries) {
        Ok(r) => Ok(r),
        // Older kernels: fall back to no flags, like the runtime does.
        Err(_) => IoUring::new(entries),
    }
}

/// Runs `spec` on the calling thread; `fixed` selects registered buffers and file, `eager`
/// one submission per refill.
pub fn run(spec: &RunSpec, fixed: bool, eager: bool) -> Result<Sample, String> {
    if spec.workload == Workload::Yield {
        return Err("the plain loop has no tasks to yield".into());
    }
    let qd = spec.qd;
    let entries = (qd as u32).next_power_of_two().max(8);
    let mut ring = build_ring(entries).map_err(|e| format!("io_uring setup: {e}"))?;
    let file = match spec.workload {
        Workload::Nop | Workload::Yield => None,
        Workload::Randread => Some(
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(spec.open_flags() & libc::O_DIRECT)
                .open(&spec.path)
                .map_err(|e| format!("open {}: {e}", spec.path.display()))?,
        ),
    };
    let mut bufs: Vec<AlignedBuf> = (0..qd)
        .map(|_| AlignedBuf::new(BLOCK_SIZE_BYTES as usize))
        .collect();
    if fixed {
        let iovecs: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            })
            .collect();
        // SAFETY: the buffers live in `bufs` until the end of this function, after the ring
        // is dropped (declared before `ring` is dropped: `ring` is dropped explicitly below).
        unsafe { ring.submitter().register_buffers(&iovecs) }
            .map_err(|e| format!("register_buffers: {e} (RLIMIT_MEMLOCK too small?)"))?;
        if let Some(f) = &file {
            ring.submitter()
                .register_files(&[f.as_raw_fd()])
                .map_err(|e| format!("register_files: {e}"))?;
        }
    }
    let fd = file.as_ref().map(|f| f.as_raw_fd()).unwrap_or(-1);
    let blocks = spec.blocks_count();
    let mut rng = XorShift::new(0);
    let ptrs: Vec<*mut u8> = bufs.iter_mut().map(|b| b.as_mut_ptr()).collect();
    let mut entry = |slot: usize| -> squeue::Entry {
        let e = match spec.workload {
            Workload::Nop | Workload::Yield => opcode::Nop::new().build(),
            Workload::Randread => {
                let off = rng.block_index(blocks) * BLOCK_SIZE_BYTES;
                let len = BLOCK_SIZE_BYTES as u32;
                if fixed {
                    opcode::ReadFixed::new(types::Fixed(0), ptrs[slot], len, slot as u16)
                        .offset(off)
                        .build()
                } else {
                    opcode::Read::new(types::Fd(fd), ptrs[slot], len)
                        .offset(off)
                        .build()
                }
            }
        };
        e.user_data(slot as u64)
    };

    let enters = Rc::new(Cell::new(0u64));
    let counted = enters.clone();
    let meter = Meter::new(
        spec.warmup,
        spec.duration,
        Some(Box::new(move || counted.get())),
    );
    for slot in 0..qd {
        let e = entry(slot);
        // SAFETY: the entry points into `bufs[slot]`, which outlives the ring's use of it
        // (every in-flight entry is reaped before this function returns).
        unsafe { ring.submission().push(&e) }.expect("SQ has room for QD entries");
    }
    let mut inflight = qd;
    let mut done: Vec<usize> = Vec::with_capacity(entries as usize * 2);
    let mut failure = None;
    while inflight > 0 {
        enters.set(enters.get() + 1);
        if let Err(e) = ring.submit_and_wait(1) {
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(format!("io_uring_enter: {e}"));
            }
        }
        done.clear();
        for cqe in ring.completion() {
            let res = cqe.result();
            let want = match spec.workload {
                Workload::Nop | Workload::Yield => 0,
                Workload::Randread => BLOCK_SIZE_BYTES as i32,
            };
            if res != want && failure.is_none() {
                failure = Some(format!("op returned {res}, expected {want}"));
            }
            done.push(cqe.user_data() as usize);
        }
        for &slot in &done {
            if meter.tick() && failure.is_none() {
                let e = entry(slot);
                // SAFETY: as above; the slot's buffer is free again (its op completed).
                unsafe { ring.submission().push(&e) }.expect("a completed slot frees an SQE");
                if eager {
                    enters.set(enters.get() + 1);
                    ring.submit().map_err(|e| format!("io_uring_enter: {e}"))?;
                }
            } else {
                inflight -= 1;
            }
        }
    }
    drop(ring);
    drop(bufs);
    if let Some(f) = failure {
        return Err(f);
    }
    meter.sample()
}
