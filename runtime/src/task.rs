//! Tasks on the current core, and calls to other cores.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use async_task::Runnable;

use crate::core::{current, with_core, Message};
use crate::error::{Error, Result};

/// A handle to a spawned task: await it for the output; dropping it cancels the task
/// (call [`Task::detach`] to let it run on).
pub use async_task::Task;

/// Spawns `future` on the current core. The future need not be `Send`: it never leaves the
/// core. Panics off-core.
pub fn spawn<F>(future: F) -> Task<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let core = current("spawn");
    let id = core.id;
    let remote = core.remote.clone();
    let schedule = move |r: Runnable| {
        let local = with_core(|c| c.id == id).unwrap_or(false);
        if local {
            with_core(|c| c.schedule_local(r));
        } else if let Err(()) = remote.send(Message::Runnable(r)) {
            // The core is gone; the runnable cannot be dropped off its thread, so it is leaked.
            tracing::debug!(core = id, "task woken after its core stopped");
        }
    };
    let (runnable, task) = async_task::spawn_local(future, schedule);
    runnable.schedule();
    task
}

/// Index of the current core (0-based). Panics off-core.
pub fn core_id() -> usize {
    current("core_id").id
}

/// Number of cores of the runtime the current thread belongs to. Panics off-core.
pub fn num_cores() -> usize {
    current("num_cores").cores
}

/// Whether the current thread is a runtime core.
pub fn on_core() -> bool {
    with_core(|_| ()).is_some()
}

/// Runs `f` on core `core` and returns its output. Runs inline if `core` is the current core.
/// Cores talk only through their mailboxes: the closure travels to the target, which spawns
/// the future; the answer comes back through a oneshot channel.
pub async fn call_on<F, Fut, T>(core: usize, f: F) -> Result<T>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + 'static,
    T: Send + 'static,
{
    let me = current("call_on");
    if core == me.id {
        return Ok(f().await);
    }
    let target = me.peers.get(core).cloned().ok_or(Error::CoreGone(core))?;
    let (tx, rx) = futures::channel::oneshot::channel();
    let job = move || {
        spawn(async move {
            let _ = tx.send(f().await);
        })
        .detach();
    };
    target
        .send(Message::Job(Box::new(job)))
        .map_err(|()| Error::CoreGone(core))?;
    rx.await.map_err(|_| Error::CoreGone(core))
}

/// Sends `f` to core `core` to run there without waiting for an answer.
pub fn spawn_on<F, Fut>(core: usize, f: F) -> Result<()>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let me = current("spawn_on");
    let target = me.peers.get(core).cloned().ok_or(Error::CoreGone(core))?;
    target
        .send(Message::Job(Box::new(move || spawn(f()).detach())))
        .map_err(|()| Error::CoreGone(core))
}

/// Counts one unit of work against the running task's cooperative budget and yields once the
/// budget ([`COOP_BUDGET`](crate::core) units per scheduling) is spent. Call it from operations
/// that may complete without ever waiting, so a task looping on them cannot monopolise the
/// core. Off-core it does nothing.
pub async fn consume_budget() {
    let exhausted = with_core(|c| {
        let left = c.coop_budget.get();
        if left == 0 {
            true
        } else {
            c.coop_budget.set(left - 1);
            false
        }
    })
    .unwrap_or(false);
    if exhausted {
        yield_now().await;
    }
}

/// Yields once to the other tasks of the core.
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// Future of [`yield_now`].
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            Poll::Ready(())
        } else {
            self.yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// A poll function registered with the current core (see [`register_poller`]); dropping it
/// unregisters the function.
pub struct PollerGuard {
    id: usize,
    core: usize,
}

/// Registers `f` to be called every loop turn of the current core; it returns how many
/// completions it found. While a poller is registered the core busy-polls (never blocks in the
/// kernel), costing a full CPU: this is how userspace drivers such as SPDK are driven.
pub fn register_poller(f: impl FnMut() -> usize + 'static) -> PollerGuard {
    let core = current("register_poller");
    let id = core.add_poller(Box::new(f));
    PollerGuard { id, core: core.id }
}

impl Drop for PollerGuard {
    fn drop(&mut self) {
        with_core(|c| {
            if c.id == self.core {
                c.remove_poller(self.id);
            }
        });
    }
}

/// Counters of the current core's reactor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoreStats {
    /// `io_uring_enter` calls made.
    pub enters: u64,
    /// Ops whose futures were dropped before completion (cancelled).
    pub ops_abandoned: u64,
    /// Ops submitted and not yet completed.
    pub ops_in_flight: usize,
    /// Tasks that panicked (the core logs and survives them).
    pub task_panics: u64,
}

/// Counters of the current core (zeros off-core).
pub fn core_stats() -> CoreStats {
    with_core(|c| {
        let ops = c.ops.borrow();
        CoreStats {
            enters: c.enters.get(),
            ops_abandoned: ops.abandoned_total,
            ops_in_flight: ops.len(),
            task_panics: c.task_panics.get(),
        }
    })
    .unwrap_or_default()
}

/// What the current core's ring was set up with. Panics off-core.
pub fn ring_info() -> crate::RingInfo {
    current("ring_info").ring_info
}

/// A handle to the runtime the current core belongs to. Panics off-core.
pub fn handle() -> crate::runtime::Handle {
    crate::runtime::Handle::new(current("handle").peers.clone())
}
