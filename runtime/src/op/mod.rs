//! Ops as futures. An `Op` owns everything the kernel may touch (buffers, iovecs,
//! timespecs) until the completion arrives; dropping it early parks that memory in the op
//! table and cancels the op, so the kernel never writes into freed memory.

pub(crate) mod fs;
pub(crate) mod nop;
pub(crate) mod rw;
pub(crate) mod table;
pub(crate) mod timeout;
pub(crate) mod uring_cmd;

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use crate::core::Core;
use crate::error::{Error, Result};

use crate::ring::{Completion, Sqe};

pub use nop::nop;
pub use timeout::{sleep, Sleep};
pub use uring_cmd::{uring_cmd, UringCmdOutput};

/// A submitted op: resolves to its completion and the memory it owned.
pub(crate) struct Op<T: 'static> {
    key: table::OpKey,
    data: Option<T>,
    core: Rc<Core>,
}

impl<T: 'static> Op<T> {
    /// Submits `sqe` on the current core; `data` owns whatever the entry points to.
    ///
    /// # Safety
    /// Every pointer in `sqe` must point into heap memory owned by `data` (which does not
    /// move when `data` moves) or into memory that outlives the op.
    /// On failure (off-core, or a big entry on a normal ring) `data` comes back with the error.
    #[inline]
    pub(crate) unsafe fn submit(
        op: &'static str,
        sqe: Sqe,
        data: T,
    ) -> std::result::Result<Op<T>, (Error, T)> {
        // SAFETY: forwarded from the caller's contract.
        unsafe { Self::submit_with(op, sqe, data, false) }
    }

    /// [`Op::submit`] for an op that waits on a device (see [`SubmitPolicy::Adaptive`](crate::SubmitPolicy)).
    ///
    /// # Safety
    /// As [`Op::submit`].
    #[inline]
    pub(crate) unsafe fn submit_device(
        op: &'static str,
        sqe: Sqe,
        data: T,
    ) -> std::result::Result<Op<T>, (Error, T)> {
        // SAFETY: forwarded from the caller's contract.
        unsafe { Self::submit_with(op, sqe, data, true) }
    }

    #[inline(always)]
    unsafe fn submit_with(
        op: &'static str,
        sqe: Sqe,
        data: T,
        device: bool,
    ) -> std::result::Result<Op<T>, (Error, T)> {
        let Some(core) = crate::core::with_core(|c| c.clone()) else {
            return Err((Error::NotOnCore(op), data));
        };
        if matches!(sqe, Sqe::Big(_)) && !core.ring.borrow().is_big() {
            return Err((Error::NeedsBigRing { op }, data));
        }
        let key = core.ops.borrow_mut().insert();
        let sqe = match sqe {
            Sqe::Normal(e) => Sqe::Normal(e.user_data(key.user_data())),
            Sqe::Big(e) => Sqe::Big(Box::new(e.user_data(key.user_data()))),
        };
        tracing::trace!(op, ?key, core = core.id, "submit");
        // SAFETY: forwarded from the caller's contract; `data` stays alive in this Op or in
        // the op table until the completion for `key` is reaped.
        unsafe {
            if device {
                core.push_sqe_device(sqe)
            } else {
                core.push_sqe(sqe)
            }
        };
        Ok(Op {
            key,
            data: Some(data),
            core,
        })
    }
}

impl<T: 'static + Unpin> Future for Op<T> {
    type Output = (Completion, T);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        // Its slot was retired with the completion: never look the key up again.
        assert!(
            this.data.is_some(),
            "an io_uring op future was polled after it completed"
        );
        let waker = cx.waker();
        let core = &this.core;
        // Polled by its task with the task's own waker: record the task id, not a waker clone.
        // Looked up only while the op still waits (not on the poll that picks up the result).
        let task =
            || crate::task::current_task().filter(|&id| core.tasks.borrow().is_waker_of(id, waker));
        let polled = core.ops.borrow_mut().poll(this.key, waker, task);
        match polled {
            Some(c) => {
                let data = this.data.take().expect("checked above");
                tracing::trace!(key = ?this.key, result = c.result, "complete");
                Poll::Ready((c, data))
            }
            None => Poll::Pending,
        }
    }
}

impl<T: 'static> Drop for Op<T> {
    fn drop(&mut self) {
        if let Some(data) = self.data.take() {
            let abandoned = self.core.ops.borrow_mut().abandon(self.key, Box::new(data));
            match abandoned {
                table::Abandon::Parked => {
                    tracing::trace!(key = ?self.key, "cancel");
                    table::push_cancel(&self.core, self.key);
                }
                // Dropped here, outside the table's borrow.
                table::Abandon::Free(memory) => drop(memory),
                table::Abandon::Leaked => {}
            }
        }
    }
}

/// Turns a completion result into a byte count or a typed error.
pub(crate) fn result_len(op: &'static str, c: &Completion) -> Result<usize> {
    if c.result < 0 {
        Err(Error::from_errno(op, c.result))
    } else {
        Ok(c.result as usize)
    }
}
