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
///
/// Once it has completed it stays completed: polling it again returns the same result at
/// once (and [`FusedFuture::is_terminated`](futures::future::FusedFuture::is_terminated) says
/// so), so `select!` over `&mut sleep` in a loop is fine.
#[derive(Debug)]
pub struct Sleep {
    state: State,
    /// Whether a poll has returned `Ready`.
    terminated: bool,
}

/// Where a [`Sleep`] is.
enum State {
    /// The timer is in the ring.
    Waiting(Op<Box<Timespec>>),
    /// It fired (`Ok`) or failed with this error, which every later poll repeats.
    Done(std::result::Result<(), Failure>),
}

/// Why a sleep failed, kept so that a repeated poll returns the same error.
#[derive(Debug, Clone, Copy)]
enum Failure {
    /// Created off a runtime core.
    NotOnCore,
    /// The timeout op completed with this negative errno.
    Errno(i32),
}

impl Failure {
    fn to_error(self) -> Error {
        match self {
            Failure::NotOnCore => Error::NotOnCore("timeout"),
            Failure::Errno(e) => Error::from_errno("timeout", e),
        }
    }
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            State::Waiting(_) => f.write_str("Waiting"),
            State::Done(r) => f.debug_tuple("Done").field(r).finish(),
        }
    }
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
    let state = match unsafe { Op::submit("timeout", Sqe::Normal(sqe), ts) } {
        Ok(op) => State::Waiting(op),
        Err((Error::NotOnCore(_), _)) => State::Done(Err(Failure::NotOnCore)),
        Err((e, _)) => unreachable!("a timeout needs no big ring: {e}"),
    };
    Sleep {
        state,
        terminated: false,
    }
}

impl Future for Sleep {
    type Output = Result<()>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let done = match &mut self.state {
            State::Waiting(op) => match Pin::new(op).poll(cx) {
                Poll::Ready((c, _)) if c.result == -libc::ETIME || c.result >= 0 => Ok(()),
                Poll::Ready((c, _)) => Err(Failure::Errno(c.result)),
                Poll::Pending => return Poll::Pending,
            },
            State::Done(r) => *r,
        };
        // The finished op is dropped here: its slot is gone, and no later poll reaches it.
        self.state = State::Done(done);
        self.terminated = true;
        Poll::Ready(done.map_err(Failure::to_error))
    }
}

impl futures::future::FusedFuture for Sleep {
    fn is_terminated(&self) -> bool {
        self.terminated
    }
}
