//! Dropping futures at random points: a poll budget, or a race against a short timer.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::FutureExt;

use super::ops::Cancel;

/// Polls the inner future at most `left` times; if it is still pending after the last of
/// them, completes with `None` (and the caller drops the inner future).
pub struct PollBudget<F> {
    fut: Pin<Box<F>>,
    left: u32,
}

impl<F: Future> Future for PollBudget<F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        self.left -= 1;
        match self.fut.as_mut().poll(cx) {
            Poll::Ready(v) => Poll::Ready(Some(v)),
            Poll::Pending if self.left == 0 => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Runs `fut` under `cancel`: `Some(output)` if it completed, `None` if it was dropped.
pub async fn run<F: Future>(fut: F, cancel: Cancel) -> Option<F::Output> {
    match cancel {
        Cancel::Never => Some(fut.await),
        Cancel::AfterPolls(k) => {
            PollBudget {
                fut: Box::pin(fut),
                left: k,
            }
            .await
        }
        Cancel::AfterTimer(d) => {
            let mut fut = Box::pin(fut.fuse());
            let mut timer = Box::pin(ziob::runtime::sleep(d).fuse());
            futures::select! {
                v = fut => Some(v),
                _ = timer => None,
            }
        }
    }
}
