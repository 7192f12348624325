//! Tasks on the current core, and calls to other cores.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use async_task::Runnable;

use crate::core::{current, with_core, CoreRemote, Message};
use crate::error::{Error, Result};
use crate::registry::on_ring;

/// A handle to a spawned task: await it for the output; dropping it cancels the task
/// (call [`Task::detach`] to let it run on).
pub type Task<T> = async_task::Task<T, TaskHome>;

/// The core a task belongs to, kept in the task itself (async-task metadata) rather than in its
/// schedule function: a schedule function without captures is zero-sized, and async-task then
/// skips a waker clone and drop (two atomic read-modify-writes) each time it reschedules a
/// task that woke itself while running (a yield), and consumes the waker in `Waker::wake`
/// instead of waking by reference and dropping it.
pub struct TaskHome {
    remote: Arc<CoreRemote>,
    /// Spawned with [`spawn_background`]: queued apart and run after ordinary tasks (see
    /// there).
    background: bool,
}

impl TaskHome {
    /// Whether the task was spawned with [`spawn_background`].
    pub(crate) fn is_background(&self) -> bool {
        self.background
    }
}

/// Queues a woken task: on its own core's thread in its run queue (ordinary or background),
/// from anywhere else through the core's mailbox. The core is compared by identity, not index: core 0 of another runtime
/// in the same process is not this task's core.
fn schedule(runnable: Runnable<TaskHome>) {
    let home = Arc::as_ptr(&runnable.metadata().remote);
    let mut r = Some(runnable);
    with_core(|c| {
        if Arc::as_ptr(&c.remote) == home {
            c.schedule_local(r.take().expect("runnable taken once"));
        }
    });
    if let Some(r) = r {
        let remote = r.metadata().remote.clone();
        if let Err(msg) = remote.send(Message::Runnable(r)) {
            // The core is gone. Dropping the runnable here would drop the task's future off
            // its thread (async-task panics on that): leak it.
            std::mem::forget(msg);
            tracing::debug!(core = remote.id, "task woken after its core stopped");
        }
    }
}

/// Spawns `future` on the current core. The future need not be `Send`: it never leaves the
/// core. Panics off-core.
pub fn spawn<F>(future: F) -> Task<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    spawn_with(future, false, "spawn")
}

/// Spawns `future` on the current core as a background task. A ready background task is
/// polled only at the end of a turn of the core's loop, after the turn submitted and reaped:
/// when no ordinary task is ready then, when the turn's ordinary
/// tasks used the whole task budget, when background tasks had less than their share of
/// the core's recent task time (about the last 8 ms of polling while background tasks waited)
/// ([`Builder::background_share_percent`](crate::Builder::background_share_percent), default
/// half), or when the background queue was passed over 7 turns in a row (the count is per
/// core; a turn of ordinary tasks that ended early because a message or a completion waited
/// did not use the whole budget, so beside an always-ready task that is what lets it in);
/// more than one per turn only while background tasks are behind their share (for a
/// 200 µs slice, or the turn's ordinary time if longer), and a turn's ordinary tasks stop
/// after that slice while they are behind. So ordinary tasks wait for background work only up to that share, and background
/// work keeps up beside a foreground that is always ready (an LSM store's compactions,
/// which its reads get slower without). For work whose delay costs nothing directly, like
/// flushes and compactions; it should yield ([`yield_now`]) often, since a poll is not
/// interrupted. Ordinary tasks that wait for it (a writer waiting for a flush) wait that
/// long too. What it spawns with [`spawn`] runs as ordinary tasks; its calls to cores
/// ([`Handle::call`](crate::Handle::call), [`call_on`]) run as background tasks there.
/// Panics off-core.
pub fn spawn_background<F>(future: F) -> Task<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    spawn_with(future, true, "spawn_background")
}

/// Whether the task being polled on this thread is a background task (off-core: no).
pub(crate) fn in_background_task() -> bool {
    with_core(|c| c.running_background.get()).unwrap_or(false)
}

/// Spawns `future` on the current core, as a background task if `background` (the task of a
/// call is spawned in its caller's class: a background task's calls give way to ordinary
/// tasks on the core they go to). `what` names the caller in the off-core panic.
pub(crate) fn spawn_with<F>(future: F, background: bool, what: &'static str) -> Task<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let core = current(what);
    let home = TaskHome {
        remote: core.remote.clone(),
        background,
    };
    let task_id = core.tasks.borrow_mut().insert();
    drop(core);
    let (runnable, task) = async_task::Builder::new().metadata(home).spawn_local(
        move |_| Tracked {
            id: task_id,
            registered: false,
            future,
        },
        schedule,
    );
    runnable.schedule();
    task
}

/// Id of the task being polled on this thread ([`NO_TASK`] outside a task's poll).
const NO_TASK: usize = usize::MAX;

thread_local! {
    static CURRENT_TASK: Cell<usize> = const { Cell::new(NO_TASK) };
}

/// The id of the task this thread is polling right now, if any.
#[inline]
pub(crate) fn current_task() -> Option<usize> {
    match CURRENT_TASK.with(|t| t.get()) {
        NO_TASK => None,
        id => Some(id),
    }
}

/// Restores the previous current task when a poll ends (also when it unwinds).
struct CurrentTaskGuard(usize);

impl Drop for CurrentTaskGuard {
    fn drop(&mut self) {
        CURRENT_TASK.with(|t| t.set(self.0));
    }
}

/// The wakers of a core's live tasks, by task id.
///
/// A task's entry gets a clone of its waker on the task's first poll and loses it when the
/// task's future is dropped: one clone per task instead of one per op. An op polled directly
/// by its task's waker records only the task id, and its completion wakes the task through
/// this table, which saves a waker clone and a waker drop (two atomic read-modify-writes with
/// async-task) per op.
///
/// The entry's waker keeps the task alive until its future is dropped. A detached task that
/// nothing else can wake any more therefore stays (future and all) until the core shuts down,
/// which wakes and drops every task left; without this table async-task would drop it as soon
/// as its last waker went. That is the price of the saved atomics.
///
/// An id is reused after its task ends; a stale id (an op whose future was leaked with
/// `mem::forget`) can at worst wake an unrelated task spuriously, which futures tolerate.
#[derive(Default)]
pub(crate) struct TaskWakers {
    wakers: slab::Slab<Option<Waker>>,
}

impl TaskWakers {
    fn insert(&mut self) -> usize {
        self.wakers.insert(None)
    }

    /// Whether `waker` wakes task `id` (so an op may record the id instead of the waker).
    #[inline]
    pub(crate) fn is_waker_of(&self, id: usize, waker: &Waker) -> bool {
        matches!(self.wakers.get(id), Some(Some(w)) if w.will_wake(waker))
    }

    /// Wakes task `id` if it is still alive.
    #[inline]
    pub(crate) fn wake(&self, id: usize) {
        if let Some(Some(w)) = self.wakers.get(id) {
            w.wake_by_ref();
        }
    }

    /// Wakes every live task (at shutdown, so that each is scheduled and then dropped).
    pub(crate) fn wake_all(&self) {
        for (_, w) in self.wakers.iter() {
            if let Some(w) = w {
                w.wake_by_ref();
            }
        }
    }
}

/// The future of a spawned task: keeps the task's entry in [`TaskWakers`] and marks the task
/// current while it is polled.
struct Tracked<F> {
    id: usize,
    registered: bool,
    future: F,
}

impl<F: Future> Future for Tracked<F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is structurally pinned: it is never moved out of `self` (not by
        // this poll, not by `Drop`, which only reads `id`), and `Tracked` is `Unpin` only when
        // `F` is (the auto impl; there is no manual one), so a pinned `!Unpin` future never
        // moves.
        let this = unsafe { self.get_unchecked_mut() };
        if !this.registered {
            // async-task polls a task always with the same waker: keep one clone.
            let waker = cx.waker().clone();
            with_core(|c| {
                if let Some(slot) = c.tasks.borrow_mut().wakers.get_mut(this.id) {
                    *slot = Some(waker);
                }
            });
            this.registered = true;
        }
        let _guard = CurrentTaskGuard(CURRENT_TASK.with(|t| t.replace(this.id)));
        // SAFETY: see above; `future` is pinned with `self`.
        unsafe { Pin::new_unchecked(&mut this.future) }.poll(cx)
    }
}

impl<F> Drop for Tracked<F> {
    fn drop(&mut self) {
        // async-task drops a task's future on its own thread (spawn_local checks), which is
        // this core's thread; off-core (after the core stopped) the table is gone already.
        let waker = with_core(|c| c.tasks.borrow_mut().wakers.try_remove(self.id)).flatten();
        // Dropped outside the borrow: dropping a waker may schedule its task.
        drop(waker);
    }
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
///
/// A panic in `f` or its future continues in the caller (as it would inline). Fails with
/// [`Error::CoreDead`] if the target core stopped after a fatal error (also while this call
/// waits), and with [`Error::CoreGone`] if it was shut down. Called from a background task,
/// the future runs as a background task on `core` (as with [`Handle::call`](crate::Handle::call)).
///
/// # Cancel safety
/// Unlike [`Handle::call`](crate::Handle::call), dropping the returned future does not stop
/// the work: once sent, `f`'s future runs to its end on `core` (its output is dropped). On
/// the current core it runs inline, so it stops where the caller drops it.
/// Callers rely on this for work that must not stop half-way (closing a shard).
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
    let background = me.running_background.get();
    drop(me);
    send_call(&target, move |tx| {
        let call = async move {
            use futures::FutureExt;
            let out = std::panic::AssertUnwindSafe(async move { f().await })
                .catch_unwind()
                .await;
            let _ = tx.send(out);
        };
        spawn_with(call, background, "call_on").detach();
    })
    .await
}

/// Sends `job` to `target` with the sending end of a oneshot and waits for the answer it
/// sends there (the output of a call, or its panic, which continues in the caller as if the
/// call had run inline). Fails with `target`'s gone error if the job cannot be sent or the
/// answer never comes.
///
/// Polled on `target` itself, it runs `job` at once instead: through the mailbox the job
/// would wait for the loop's next turn, after the ring's submit and reap and, with the run
/// queue empty meanwhile, a background task's slice — a wait on every call a core makes to
/// itself (e.g. a zone read by a task on the zone's own core).
pub(crate) async fn send_call<T, J>(target: &CoreRemote, job: J) -> Result<T>
where
    J: FnOnce(futures::channel::oneshot::Sender<std::thread::Result<T>>) + Send + 'static,
    T: Send + 'static,
{
    let (tx, rx) = futures::channel::oneshot::channel();
    if with_core(|c| c.remote.ring_id == target.ring_id).unwrap_or(false) {
        job(tx);
    } else {
        target
            .send(Message::Job(Box::new(move || job(tx))))
            .map_err(|_| target.gone_error())?;
    }
    match rx.await.map_err(|_| target.gone_error())? {
        Ok(v) => Ok(v),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Sends a job to `target` that spawns `f()` as a detached task.
pub(crate) fn send_spawn<F, Fut>(target: &CoreRemote, f: F) -> Result<()>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    target
        .send(Message::Job(Box::new(move || spawn(f()).detach())))
        .map_err(|_| target.gone_error())
}

/// Sends `f` to core `core` to run there without waiting for an answer (see
/// [`Handle::spawn_on`](crate::Handle::spawn_on): panics are contained, a dead core is an
/// error).
pub fn spawn_on<F, Fut>(core: usize, f: F) -> Result<()>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let me = current("spawn_on");
    let target = me.peers.get(core).cloned().ok_or(Error::CoreGone(core))?;
    drop(me);
    send_spawn(&target, f)
}

/// Counts one unit of work against the running task's cooperative budget and yields once the
/// budget (`COOP_BUDGET`, 64 units per scheduling) is spent. Call it from operations
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
///
/// Dropped on another thread (another core, another runtime's core, a plain thread), it sends
/// the removal to the core that registered the function.
pub struct PollerGuard {
    id: usize,
    ring: crate::ring::RingId,
    owner: std::sync::Weak<CoreRemote>,
}

/// Registers `f` to be called every loop turn of the current core; it returns how many
/// completions it found. While a poller is registered the core busy-polls (never blocks in the
/// kernel), costing a full CPU: this is how userspace drivers such as SPDK are driven.
pub fn register_poller(f: impl FnMut() -> usize + 'static) -> PollerGuard {
    let core = current("register_poller");
    let id = core.add_poller(Box::new(f));
    PollerGuard {
        id,
        ring: core.remote.ring_id,
        owner: Arc::downgrade(&core.remote),
    }
}

impl Drop for PollerGuard {
    fn drop(&mut self) {
        // Only on the core that registered it (not core N of another runtime).
        if on_ring(self.ring, |c| c.remove_poller(self.id)).is_none() {
            if let Some(owner) = self.owner.upgrade() {
                let (id, ring) = (self.id, self.ring);
                let remove = move || {
                    on_ring(ring, |c| c.remove_poller(id));
                };
                // A core that is gone took its pollers with it.
                let _ = owner.send(Message::Job(Box::new(remove)));
            }
        }
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
    /// Jobs, pollers and wakers run by the core that panicked (logged and survived; a
    /// poller that panicked is removed).
    pub callback_panics: u64,
    /// `io_uring_enter` calls that failed (EINTR aside). Transient ones (EAGAIN, EBUSY) are
    /// retried; any other stops the core ([`Error::CoreDead`]).
    pub enter_errors: u64,
    /// Times the core blocked in the kernel because it had nothing to do.
    pub sleeps: u64,
    /// Idle spins ([`Builder::idle_spin`](crate::Builder::idle_spin)) started.
    pub spins: u64,
    /// Idle spins that a message or a completion ended before the core would have blocked
    /// in the kernel.
    pub spin_wakes: u64,
    /// Idle spins given up because another thread ran on the core's CPU meanwhile (after
    /// one the core does not spin for a while).
    pub spins_contended: u64,
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
            callback_panics: c.callback_panics.get(),
            enter_errors: c.enter_errors.get(),
            sleeps: c.sleeps.get(),
            spins: c.spins.get(),
            spin_wakes: c.spin_wakes.get(),
            spins_contended: c.spins_contended.get(),
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    use futures::StreamExt;

    use crate::Runtime;

    /// Runs `f` on a one-core runtime, failing (instead of hanging) after 20 s.
    fn run_bounded<T: Send + 'static>(f: impl FnOnce(Runtime) -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let rt = Runtime::builder().cores(1).build().unwrap();
            let _ = tx.send(f(rt));
        });
        rx.recv_timeout(Duration::from_secs(20))
            .expect("the runtime did not finish in time (a lost wake-up?)")
    }

    /// Runs the future `f` makes on a one-core runtime, failing after 20 s (see
    /// [`run_bounded`]).
    fn block_on_bounded<F, Fut>(f: F)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + 'static,
    {
        run_bounded(|rt| rt.block_on(f).unwrap())
    }

    #[test]
    fn ops_polled_through_combinators_wake_their_task() {
        block_on_bounded(|| async {
            for _ in 0..50 {
                // FuturesUnordered polls each op with its own waker, not the task's.
                let mut set: futures::stream::FuturesUnordered<_> = (0..8)
                    .map(|i| async move {
                        crate::sleep(Duration::from_micros(50 * i)).await.unwrap();
                        crate::nop().await.unwrap();
                    })
                    .collect();
                while set.next().await.is_some() {}
                // join polls with the task's waker; select drops the loser mid-flight.
                let (a, b) = futures::join!(crate::nop(), crate::nop());
                a.unwrap();
                b.unwrap();
                let slow = Box::pin(crate::sleep(Duration::from_secs(10)));
                let fast = Box::pin(crate::nop());
                match futures::future::select(slow, fast).await {
                    futures::future::Either::Right((r, _)) => r.unwrap(),
                    futures::future::Either::Left(_) => panic!("the 10 s sleep won"),
                }
            }
        });
    }

    #[test]
    fn ops_of_a_task_that_moved_on_still_complete() {
        // An op first polled by one task and finished by another wakes the second one.
        block_on_bounded(|| async {
            for _ in 0..20 {
                let mut op = Box::pin(crate::sleep(Duration::from_millis(1)));
                assert!(futures::poll!(op.as_mut()).is_pending());
                crate::spawn(async move { op.await.unwrap() }).await;
            }
        });
    }

    #[test]
    fn a_forgotten_op_does_not_disturb_later_tasks() {
        // The leaked op keeps the id of a task that has ended; its completion may wake a
        // newer task with the same id (spuriously), never anything freed.
        block_on_bounded(|| async {
            for _ in 0..20 {
                crate::spawn(async {
                    let mut op = Box::pin(crate::sleep(Duration::from_millis(1)));
                    assert!(futures::poll!(op.as_mut()).is_pending());
                    std::mem::forget(op);
                })
                .await;
                crate::spawn(async {
                    crate::sleep(Duration::from_millis(2)).await.unwrap();
                })
                .await;
            }
        });
    }

    #[test]
    fn a_wake_from_another_runtimes_core_reaches_the_tasks_own_core() {
        // Both runtimes have a core 0: the waker must not confuse them.
        let got = run_bounded(|a| {
            let b = Runtime::builder().cores(1).build().unwrap();
            let (tx, rx) = futures::channel::oneshot::channel::<u32>();
            let waiter = std::thread::spawn(move || a.block_on(|| async { rx.await.unwrap() }));
            std::thread::sleep(Duration::from_millis(20));
            b.block_on(move || async move {
                crate::sleep(Duration::from_millis(1)).await.unwrap();
                tx.send(7).unwrap();
            })
            .unwrap();
            waiter.join().unwrap().unwrap()
        });
        assert_eq!(got, 7);
    }

    #[test]
    fn shutdown_drops_a_detached_task_nothing_can_wake() {
        struct SetOnDrop(Arc<AtomicBool>);
        impl Drop for SetOnDrop {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = dropped.clone();
        run_bounded(move |rt| {
            rt.block_on(move || async move {
                crate::spawn(async move {
                    let _guard = SetOnDrop(flag);
                    // Keeps no waker: only the runtime still knows this task.
                    futures::future::pending::<()>().await;
                })
                .detach();
                crate::yield_now().await;
            })
            .unwrap();
            drop(rt);
        });
        assert!(
            dropped.load(Ordering::SeqCst),
            "the task's future was never dropped"
        );
    }
}
