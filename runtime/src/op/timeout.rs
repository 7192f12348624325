//! Timers as io_uring `TIMEOUT` ops: a sleeping core wakes when one fires.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use io_uring::types::Timespec;

use super::Op;
use crate::error::{Error, Result};
use crate::ring::Sqe;

/// A future that completes after a duration (see [`sleep`]).
pub struct Sleep {
    op: std::result::Result<Op<Box<Timespec>>, Option<Error>>,
}

/// Completes after `duration`. Dropping it cancels the timer.
pub fn sleep(duration: Duration) -> Sleep {
    let ts = Box::new(
        Timespec::new()
            .sec(duration.as_secs())
            .nsec(duration.subsec_nanos()),
    );
    let sqe = io_uring::opcode::Timeout::new(&*ts as *const Timespec).build();
    // SAFETY: the timespec is boxed and owned by the op until its completion.
    let op = unsafe { Op::submit("timeout", Sqe::Normal(sqe), ts) };
    Sleep {
        op: op.map_err(|(e, _)| Some(e)),
    }
}

impl Future for Sleep {
    type Output = Result<()>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        match &mut self.op {
            Ok(op) => match Pin::new(op).poll(cx) {
                Poll::Ready((c, _)) if c.result == -libc::ETIME || c.result >= 0 => {
                    Poll::Ready(Ok(()))
                }
                Poll::Ready((c, _)) => Poll::Ready(Err(Error::from_errno("timeout", c.result))),
                Poll::Pending => Poll::Pending,
            },
            Err(e) => Poll::Ready(Err(e.take().expect("Sleep polled after completion"))),
        }
    }
}
