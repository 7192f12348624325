//! Each runtime core's I/O qpair of a controller, allocated the first time the core issues a
//! command, with the runtime poller that drives it while commands are in flight and the
//! core's pool of bounce buffers.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use ziob_runtime::PollerGuard;

use super::allocator::{DmaChunk, DMA_MIN_BYTES};
use super::env::Attached;
use super::ffi;
use crate::model::error::{DeviceError, Result};

/// Free bounce buffers kept per size class and core.
const POOL_PER_CLASS_MAX: usize = 64;

/// One core's qpair of one controller.
pub(super) struct CoreQ {
    /// The controller.
    pub(super) h: *mut ffi::Ctrlr,
    /// This core's I/O qpair.
    pub(super) qp: *mut ffi::Qpair,
    /// Commands submitted and not completed.
    pub(super) inflight: Cell<usize>,
    /// The poller, registered while commands are in flight.
    guard: RefCell<Option<PollerGuard>>,
    /// Free bounce buffers by size.
    pool: RefCell<HashMap<usize, Vec<DmaChunk>>>,
}

impl CoreQ {
    pub(super) fn get_buf(&self, len: usize) -> Result<DmaChunk> {
        let class = len.max(DMA_MIN_BYTES).next_power_of_two();
        if let Some(c) = self.pool.borrow_mut().get_mut(&class).and_then(|v| v.pop()) {
            return Ok(c);
        }
        DmaChunk::alloc(len).ok_or_else(|| {
            DeviceError::io(
                "spdk: spdk_dma_zmalloc",
                std::io::Error::other(format!(
                    "out of SPDK DMA memory for {class} bytes (raise mem=)"
                )),
            )
        })
    }

    pub(super) fn put_buf(&self, c: DmaChunk) {
        let mut pool = self.pool.borrow_mut();
        let v = pool.entry(c.cap).or_default();
        if v.len() < POOL_PER_CLASS_MAX {
            v.push(c);
        }
    }

    /// Makes sure the core polls this qpair (called on submit).
    pub(super) fn start_polling(&self) {
        let mut g = self.guard.borrow_mut();
        if g.is_none() {
            let qp = self.qp;
            *g = Some(ziob_runtime::register_poller(move || {
                // SAFETY: the qpair lives as long as this core's CoreQ, and the poller is
                // unregistered (or the core stopped) before CoreQ is dropped.
                let n = unsafe { ffi::ziob_spdk_qpair_poll(qp) };
                if n < 0 {
                    tracing::error!(rc = n, "spdk_nvme_qpair_process_completions failed");
                    0
                } else {
                    n as usize
                }
            }));
        }
    }

    /// Stops busy polling once nothing is in flight (called by the task a command completes
    /// for, or by the completion callback of a command whose future was dropped).
    pub(super) fn maybe_stop_polling(&self) {
        if self.inflight.get() == 0 {
            self.guard.borrow_mut().take();
        }
    }
}

impl Drop for CoreQ {
    fn drop(&mut self) {
        // At thread exit the runtime core may already be gone: never touch it from here.
        if let Some(g) = self.guard.get_mut().take() {
            std::mem::forget(g);
        }
        self.pool.get_mut().clear();
        // SAFETY: allocated by ziob_spdk_qpair_alloc on this thread; freed once.
        unsafe { ffi::ziob_spdk_qpair_free(self.qp) }
    }
}

thread_local! {
    static CORES: RefCell<HashMap<usize, Rc<CoreQ>>> = RefCell::new(HashMap::new());
}

/// Whether the current core busy-polls for SPDK right now: one of its qpairs has (or had
/// until the current loop turn) a command in flight. An idle `spdk:` device must leave this
/// false, or the core burns a whole CPU for nothing. `false` off-core.
pub fn core_is_polling() -> bool {
    CORES.with(|c| c.borrow().values().any(|q| q.guard.borrow().is_some()))
}

/// The current core's qpair of `a` (allocated on first use).
pub(super) fn core_q(a: &Attached) -> Result<Rc<CoreQ>> {
    if !ziob_runtime::on_core() {
        return Err(DeviceError::InvalidArgument(
            "spdk devices are used from runtime cores only".into(),
        ));
    }
    CORES.with(|c| {
        if let Some(q) = c.borrow().get(&a.id) {
            return Ok(q.clone());
        }
        // SAFETY: valid controller handle; SPDK allows allocating qpairs from any thread.
        let qp = unsafe { ffi::ziob_spdk_qpair_alloc(a.h.0, a.queue_depth) };
        if qp.is_null() {
            return Err(DeviceError::io(
                "spdk: spdk_nvme_ctrlr_alloc_io_qpair",
                std::io::Error::other("no I/O queue pair left on the controller"),
            ));
        }
        let q = Rc::new(CoreQ {
            h: a.h.0,
            qp,
            inflight: Cell::new(0),
            guard: RefCell::new(None),
            pool: RefCell::new(HashMap::new()),
        });
        c.borrow_mut().insert(a.id, q.clone());
        Ok(q)
    })
}
