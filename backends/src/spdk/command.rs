//! One NVMe command: the slot its completion lands in, the completion callback, and the
//! future that waits for it. The slot owns the command's memory until the completion, so
//! dropping the future never lets the device write into freed memory.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use ziob_runtime::DmaBuf;

use super::allocator::DmaChunk;
use super::ffi;
use super::qpair::CoreQ;
use crate::model::error::{DeviceError, Result};

/// The memory a command's data moves through.
pub(super) enum Held {
    /// The caller's buffer, SPDK memory used in place.
    Caller(DmaBuf),
    /// A bounce buffer from the core's pool.
    Bounce(DmaChunk),
}

impl Held {
    pub(super) fn into_chunk(self) -> Option<DmaChunk> {
        match self {
            Held::Bounce(c) => Some(c),
            Held::Caller(_) => None,
        }
    }
}

struct Slot {
    core: Rc<CoreQ>,
    done: Cell<Option<(u32, u64)>>,
    waker: Cell<Option<Waker>>,
    /// The memory the device reads/writes; owned here until the completion, so a dropped
    /// future can never let the device write into freed memory.
    buf: Cell<Option<Held>>,
    /// The waiting future was dropped: nobody else will stop the core's polling.
    abandoned: Cell<bool>,
}

pub(super) unsafe extern "C" fn on_complete(arg: *mut c_void, cpl: *const c_void) {
    // SAFETY: `arg` is the `Rc<Slot>` leaked at submission, reclaimed exactly once here;
    // `cpl` is SPDK's completion, valid during the callback.
    let slot = unsafe { Rc::from_raw(arg as *const Slot) };
    let (status, result) = unsafe {
        (
            ffi::ziob_spdk_cpl_status(cpl),
            ffi::ziob_spdk_cpl_result(cpl),
        )
    };
    slot.done.set(Some((status, result)));
    slot.core.inflight.set(slot.core.inflight.get() - 1);
    if let Some(w) = slot.waker.take() {
        w.wake();
    }
    if slot.abandoned.get() {
        // Its future is gone; if it was the core's last command, stop busy polling (the
        // runtime allows removing a poller from inside a poller).
        slot.core.maybe_stop_polling();
    }
}

struct Cmd {
    slot: Rc<Slot>,
}

impl Drop for Cmd {
    fn drop(&mut self) {
        if self.slot.done.get().is_none() {
            // Still in flight: its completion stops the polling if it is the core's last.
            self.slot.abandoned.set(true);
        } else {
            // Completed, but its future ended without seeing it (dropped after the
            // completion woke it): stop the polling here if nothing else is in flight, or the
            // core busy-polls until some later command completes. Harmless after `poll`
            // already did it. Runs on the command's core (`Cmd` is not `Send`).
            self.slot.core.maybe_stop_polling();
        }
    }
}

impl Future for Cmd {
    type Output = (u32, u64, Option<Held>);
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.slot.done.get() {
            Some((status, result)) => {
                self.slot.core.maybe_stop_polling();
                Poll::Ready((status, result, self.slot.buf.take()))
            }
            None => {
                self.slot.waker.set(Some(cx.waker().clone()));
                Poll::Pending
            }
        }
    }
}

pub(super) type SubmitFn<'a> =
    dyn Fn(*mut ffi::Ctrlr, *mut ffi::Qpair, *mut c_void, *mut c_void) -> c_int + 'a;

/// Submits one command (retrying while the qpair is out of request slots) and waits for it.
/// `submit(h, qpair, data, arg)` issues it with `on_complete`/`arg`; `data` points into `buf`,
/// which the command owns until its completion. Returns the NVMe status and the
/// command-specific result, and the buffer in every case.
pub(super) async fn run_cmd(
    core: &Rc<CoreQ>,
    mut buf: Option<Held>,
    data: *mut c_void,
    what: &str,
    submit: &SubmitFn<'_>,
) -> (Result<(u32, u64)>, Option<Held>) {
    loop {
        let slot = Rc::new(Slot {
            core: core.clone(),
            done: Cell::new(None),
            waker: Cell::new(None),
            buf: Cell::new(buf.take()),
            abandoned: Cell::new(false),
        });
        let arg = Rc::into_raw(slot.clone()) as *mut c_void;
        let rc = submit(core.h, core.qp, data, arg);
        if rc == 0 {
            core.inflight.set(core.inflight.get() + 1);
            core.start_polling();
            let (status, result, held) = Cmd { slot }.await;
            return (Ok((status, result)), held);
        }
        // SAFETY: not submitted, so the callback will never reclaim `arg`: do it here.
        drop(unsafe { Rc::from_raw(arg as *const Slot) });
        buf = slot.buf.take();
        if rc == -libc::ENOMEM {
            // Every request slot of the qpair is taken: let completions drain, then retry.
            core.start_polling();
            ziob_runtime::yield_now().await;
            continue;
        }
        return (
            Err(DeviceError::io(
                format!("spdk: submit {what}"),
                std::io::Error::from_raw_os_error(-rc),
            )),
            buf,
        );
    }
}
