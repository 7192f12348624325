//! One core: its thread-local state (ring, run queue, op table, buffer pool) and its loop.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use async_task::Runnable;

use crate::background::{
    background_continues, background_runs, ordinary_turn_ends, outside_clock_starts,
    outside_turn_ends, poll_sample_verdict, TaskTime, Turn, OUTSIDE_LOOK_EVERY,
};
use crate::buf::pool::BufPool;
use crate::config::{Config, SubmitPolicy};
use crate::error::{Error, Result};
use crate::op::table::OpTable;
use crate::op::table::Waiter;
use crate::ring::{Completion, Ring, RingId, RingInfo, Sqe};
use crate::spin::{SpinGate, CONTENDED_GAP};
use crate::task::{TaskHome, TaskWakers};

/// A message from another thread to a core.
pub(crate) enum Message {
    /// A task woken from another thread.
    Runnable(Runnable<TaskHome>),
    /// A closure to run on the core (it usually spawns a task).
    Job(Box<dyn FnOnce() + Send>),
    /// A fixed buffer slot freed on another thread.
    ReturnFixed(u16),
    /// A fixed file slot whose file was dropped on another thread: empty it and free it.
    ReleaseFileSlot(u32),
    /// Stop the loop: cancel in-flight ops, wait for their completions, exit.
    Shutdown,
}

/// The part of a core other threads may touch: its mailbox and wake-up eventfd.
pub(crate) struct CoreRemote {
    pub(crate) id: usize,
    /// The process-unique identity of this core's ring (registrations are matched by it).
    pub(crate) ring_id: RingId,
    /// Set once the core stopped after a fatal error (see [`Core::die`]): every later message
    /// is refused. SeqCst, see [`CoreRemote::send`].
    dead: AtomicBool,
    /// Why the core died.
    dead_reason: OnceLock<String>,
    /// Set once the core's loop returned (shut down or dead).
    stopped: AtomicBool,
    sender: mpsc::Sender<Message>,
    /// Set by every sender after its message is in the channel, cleared by the core before it
    /// drains the channel: the core's loop reads this flag instead of calling `try_recv` on
    /// an empty channel every turn.
    mail: AtomicBool,
    sleeping: AtomicBool,
    eventfd: std::os::fd::OwnedFd,
}

impl CoreRemote {
    /// Delivers `msg` and wakes the core if it is blocked in the kernel. Fails if the core
    /// is gone or dead, handing `msg` back when it was not delivered.
    ///
    /// A message that races with the core's death is either refused here or dropped by the
    /// dying core (which drains its mailbox after it marks itself dead): the dead flag is
    /// checked again after the send, and a SeqCst fence on each side (here between the send
    /// and the check, in [`Core::die`] between the flag and the drain) makes the dying core's
    /// drain see every message whose sender saw the flag still clear.
    pub(crate) fn send(&self, msg: Message) -> std::result::Result<(), Option<Message>> {
        if self.is_dead() {
            return Err(Some(msg));
        }
        self.sender.send(msg).map_err(|e| Some(e.0))?;
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.is_dead() {
            return Err(None);
        }
        // A read-modify-write, not a store: every sender's update of the flag then belongs to
        // the release sequence the core's clearing swap reads from, so that swap makes the
        // messages of all of them visible, not only the last one's. SeqCst: see `Core::run`.
        self.mail.swap(true, Ordering::SeqCst);
        if self.sleeping.swap(false, Ordering::SeqCst) {
            self.kick();
        }
        Ok(())
    }

    /// Whether the core stopped after a fatal error.
    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    /// Marks the core's loop as returned.
    pub(crate) fn mark_stopped(&self) {
        self.stopped.store(true, Ordering::SeqCst);
    }

    /// Whether the core still runs its loop (not shut down, not dead).
    pub(crate) fn is_running(&self) -> bool {
        !self.stopped.load(Ordering::SeqCst) && !self.is_dead()
    }

    /// Marks the core dead (first reason wins).
    pub(crate) fn mark_dead(&self, reason: String) {
        let _ = self.dead_reason.set(reason);
        self.dead.store(true, Ordering::SeqCst);
    }

    /// The error for a call this core can no longer answer: [`Error::CoreDead`] if it died,
    /// else [`Error::CoreGone`] (shut down).
    pub(crate) fn gone_error(&self) -> Error {
        if self.is_dead() {
            Error::CoreDead {
                core: self.id,
                reason: self
                    .dead_reason
                    .get()
                    .cloned()
                    .unwrap_or_else(|| "unknown".into()),
            }
        } else {
            Error::CoreGone(self.id)
        }
    }

    /// Wakes the core if it blocks in `io_uring_enter` (a write to its eventfd).
    pub(crate) fn kick(&self) {
        use std::os::fd::AsRawFd;
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an eventfd this struct owns.
        let _ = unsafe {
            libc::write(
                self.eventfd.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
    }
}

/// A busy-poll function registered by a backend; returns the completions it found.
type Poller = Box<dyn FnMut() -> usize>;

/// Operations a task may complete without yielding before [`crate::consume_budget`] makes it
/// yield (operations that finish without waiting, e.g. appends absorbed by a buffer, would
/// otherwise let one task hold the core and starve its mailbox).
pub(crate) const COOP_BUDGET: u32 = 64;

/// [`SubmitPolicy::Adaptive`]: device I/O is submitted at once while the kernel has fewer
/// ops than this in progress.
const ADAPTIVE_LOW_WATER: usize = 4;
/// [`SubmitPolicy::Adaptive`]: queued entries that trigger a submission while the device is
/// busy.
const ADAPTIVE_BATCH: usize = 8;

/// Spin iterations of [`Core::spin_idle`] between two looks at the clock (each iteration
/// reads the mail flag, the ring's SQ flags and the CQ, and gives a `spin_loop` hint: tens
/// of ns, so the clock is read every µs or so).
const SPIN_CLOCK_EVERY: u32 = 32;

/// User data of the eventfd read that wakes a sleeping core.
pub(crate) const WAKE_USER_DATA: u64 = u64::MAX;
/// User data of entries whose completion nobody waits for (cancellations).
pub(crate) const IGNORE_USER_DATA: u64 = u64::MAX - 1;

/// A core's thread-local state.
pub(crate) struct Core {
    pub(crate) id: usize,
    pub(crate) cores: usize,
    pub(crate) remote: Arc<CoreRemote>,
    pub(crate) peers: Arc<Vec<Arc<CoreRemote>>>,
    pub(crate) ring: RefCell<Ring>,
    pub(crate) ring_info: RingInfo,
    pub(crate) ops: RefCell<OpTable>,
    pub(crate) pool: RefCell<BufPool>,
    pub(crate) file_slots: RefCell<Vec<u32>>,
    run_queue: RefCell<VecDeque<Runnable<TaskHome>>>,
    /// Ready tasks spawned with [`crate::spawn_background`]: at most one runs per turn of the
    /// loop, after the turn's submit and reap (see [`Core::run_background_task`]).
    background_queue: RefCell<VecDeque<Runnable<TaskHome>>>,
    /// Turns since a background task last ran while one was ready.
    background_waited_turns: Cell<u32>,
    /// A background task is being polled (its calls spawn background tasks, see
    /// `crate::task::spawn_with`).
    pub(crate) running_background: Cell<bool>,
    /// Recent time spent polling ordinary and background tasks, counted while background
    /// tasks wait (see `Core::run_background_task`).
    task_time: Cell<TaskTime>,
    /// The ordinary polls last measured were long (`crate::background::polls_are_long`):
    /// turns read the clock at their start and look after every poll (see
    /// `Core::run_tasks`).
    long_polls: Cell<bool>,
    /// Ordinary poll time measured (nanoseconds, polls) and not yet enough to decide
    /// `long_polls` on (see `Core::add_poll_sample`).
    poll_sample: Cell<(u64, usize)>,
    inbox: mpsc::Receiver<Message>,
    policy: SubmitPolicy,
    busy_poll: bool,
    /// See [`Config::idle_spin`].
    idle_spin: Duration,
    /// Whether the core may spin now (not for a while after a contended spin).
    spin_gate: SpinGate,
    task_budget: usize,
    /// `Config::background_share_percent`.
    background_share_percent: u64,
    wake_buf: RefCell<Box<u64>>,
    wake_armed: Cell<bool>,
    pollers: RefCell<Vec<(usize, Poller)>>,
    /// Pollers removed since the last turn (see `run_pollers`).
    removed_pollers: RefCell<Vec<usize>>,
    next_poller: Cell<usize>,
    shutting_down: Cell<bool>,
    /// The core is dying or dead: entries are no longer pushed (see [`Core::die`]).
    dead: Cell<bool>,
    /// A fatal error seen where the core could not stop at once (inside a task's poll): the
    /// loop stops the core at its next turn.
    fatal: RefCell<Option<String>>,
    /// An errno the next `io_uring_enter` returns instead of entering (tests only, see
    /// [`crate::testing::inject_enter_error`]).
    pub(crate) injected_enter_error: Cell<Option<i32>>,
    /// Panic at the top of the next loop turn (tests only, see
    /// [`crate::testing::panic_in_core_loop`]).
    pub(crate) injected_loop_panic: Cell<bool>,
    /// Statistics: io_uring_enter calls made.
    pub(crate) enters: Cell<u64>,
    /// Statistics: times the core blocked in the kernel with nothing to do.
    pub(crate) sleeps: Cell<u64>,
    /// Statistics: idle spins started.
    pub(crate) spins: Cell<u64>,
    /// Statistics: idle spins ended by a message or completion (a sleep saved).
    pub(crate) spin_wakes: Cell<u64>,
    /// Statistics: idle spins given up because another thread ran on the core's CPU.
    pub(crate) spins_contended: Cell<u64>,
    /// Statistics: io_uring_enter calls that failed (other than EINTR).
    pub(crate) enter_errors: Cell<u64>,
    /// Statistics: tasks that panicked.
    pub(crate) task_panics: Cell<u64>,
    /// Statistics: panics in jobs, pollers and wakers the core ran.
    pub(crate) callback_panics: Cell<u64>,
    /// What the running task may still do before [`crate::consume_budget`] makes it yield.
    pub(crate) coop_budget: Cell<u32>,
    /// The live tasks of this core, by id (see [`crate::task::TaskWakers`]): lets an op wake
    /// the task that polled it without cloning (and later dropping) its waker.
    pub(crate) tasks: RefCell<TaskWakers>,
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<Core>>> = const { RefCell::new(None) };
}

/// Runs `f` with the current core, or returns `None` off-core.
pub(crate) fn with_core<R>(f: impl FnOnce(&Rc<Core>) -> R) -> Option<R> {
    CURRENT.with(|c| c.borrow().as_ref().map(f))
}

/// The current core; panics with a clear message off-core.
pub(crate) fn current(what: &'static str) -> Rc<Core> {
    CURRENT
        .with(|c| c.borrow().clone())
        .unwrap_or_else(|| panic!("{what} must be called from a ZIOB runtime core"))
}

/// Creates the channel and eventfd of a core, before its thread starts.
pub(crate) fn remote(id: usize) -> std::io::Result<(Arc<CoreRemote>, mpsc::Receiver<Message>)> {
    use std::os::fd::FromRawFd;
    // SAFETY: eventfd has no pointer arguments; the returned fd is checked below.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor we own.
    let eventfd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let (sender, inbox) = mpsc::channel();
    Ok((
        Arc::new(CoreRemote {
            id,
            ring_id: RingId::new(),
            dead: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            dead_reason: OnceLock::new(),
            sender,
            mail: AtomicBool::new(false),
            sleeping: AtomicBool::new(false),
            eventfd,
        }),
        inbox,
    ))
}

/// `d` in nanoseconds, saturating (the loop's time accounts are `u64` nanoseconds).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Core {
    /// Sets up the ring and pool of a core on its own thread.
    pub(crate) fn new(
        config: &Config,
        remote: Arc<CoreRemote>,
        inbox: mpsc::Receiver<Message>,
        peers: Arc<Vec<Arc<CoreRemote>>>,
    ) -> Result<Rc<Core>> {
        let (ring, ring_info) = Ring::new(config)?;
        let mut pool = BufPool::new(
            remote.ring_id,
            &ring,
            config.fixed_buffers,
            config.buffer_cache_bytes,
        )?;
        pool.set_remote(&remote);
        let files_ok = match ring.register_files_sparse(crate::fs::FIXED_FILE_SLOTS) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(error = %e, "no registered file table; files use plain descriptors");
                false
            }
        };
        let core = Rc::new(Core {
            id: remote.id,
            cores: config.cores,
            remote,
            peers,
            ring: RefCell::new(ring),
            ring_info,
            ops: RefCell::new(OpTable::default()),
            pool: RefCell::new(pool),
            file_slots: RefCell::new(if files_ok {
                (0..crate::fs::FIXED_FILE_SLOTS).rev().collect()
            } else {
                Vec::new()
            }),
            run_queue: RefCell::new(VecDeque::with_capacity(1024)),
            background_queue: RefCell::new(VecDeque::new()),
            background_waited_turns: Cell::new(0),
            running_background: Cell::new(false),
            task_time: Cell::new(TaskTime::default()),
            long_polls: Cell::new(false),
            poll_sample: Cell::new((0, 0)),
            inbox,
            policy: config.submit_policy,
            busy_poll: config.busy_poll,
            idle_spin: config.idle_spin,
            spin_gate: SpinGate::default(),
            task_budget: config.task_budget,
            background_share_percent: u64::from(config.background_share_percent),
            wake_buf: RefCell::new(Box::new(0)),
            wake_armed: Cell::new(false),
            pollers: RefCell::new(Vec::new()),
            removed_pollers: RefCell::new(Vec::new()),
            next_poller: Cell::new(0),
            shutting_down: Cell::new(false),
            dead: Cell::new(false),
            fatal: RefCell::new(None),
            injected_enter_error: Cell::new(None),
            injected_loop_panic: Cell::new(false),
            enters: Cell::new(0),
            sleeps: Cell::new(0),
            spins: Cell::new(0),
            spin_wakes: Cell::new(0),
            spins_contended: Cell::new(0),
            enter_errors: Cell::new(0),
            task_panics: Cell::new(0),
            callback_panics: Cell::new(0),
            coop_budget: Cell::new(COOP_BUDGET),
            tasks: RefCell::new(TaskWakers::default()),
        });
        Ok(core)
    }

    /// Installs this core as the thread's current core.
    pub(crate) fn enter_thread(self: &Rc<Self>) {
        CURRENT.with(|c| *c.borrow_mut() = Some(self.clone()));
    }

    /// Queues a task to run on this core (called on this core's thread).
    #[inline]
    pub(crate) fn schedule_local(&self, runnable: Runnable<TaskHome>) {
        if runnable.metadata().is_background() {
            self.background_queue.borrow_mut().push_back(runnable);
        } else {
            self.run_queue.borrow_mut().push_back(runnable);
        }
    }

    /// Whether any task, ordinary or background, is ready to run.
    fn has_ready_tasks(&self) -> bool {
        !self.run_queue.borrow().is_empty() || !self.background_queue.borrow().is_empty()
    }

    /// Pushes an entry, submitting first if the queue is full. Under the eager policy the
    /// entry is submitted at once.
    ///
    /// # Safety
    /// Everything the entry points to must live until its completion is reaped.
    #[inline(always)]
    pub(crate) unsafe fn push_sqe(&self, sqe: Sqe) {
        if self.dead.get() {
            // A dead core's ring is never entered again: the entry's memory is leaked with
            // the op table (see `Core::die`).
            return;
        }
        // SAFETY: forwarded from the caller's contract.
        let pushed = unsafe { self.ring.borrow_mut().push(sqe) };
        if let Err(back) = pushed {
            // SAFETY: forwarded from the caller's contract.
            unsafe { self.push_sqe_full(back) };
        }
        if self.policy == SubmitPolicy::Eager {
            self.enter(false, false);
        }
    }

    /// The slow path of [`Core::push_sqe`]: the submission queue is full.
    ///
    /// # Safety
    /// As [`Core::push_sqe`].
    #[cold]
    #[inline(never)]
    unsafe fn push_sqe_full(&self, sqe: Sqe) {
        let mut sqe = sqe;
        loop {
            self.enter(false, false);
            if self.fatal.borrow().is_some() {
                // The ring is broken: the core stops at its next turn, and the entry's memory
                // stays with its op (and is leaked with it, see `Core::die`).
                return;
            }
            // Make room in the CQ too, in case the kernel stalls on overflow.
            self.reap();
            // SAFETY: forwarded from the caller's contract.
            match unsafe { self.ring.borrow_mut().push(sqe) } {
                Ok(()) => return,
                Err(back) => sqe = back,
            }
        }
    }

    /// Pushes an entry for an op whose latency is the device's (O_DIRECT I/O, passthrough
    /// commands): under [`SubmitPolicy::Adaptive`] it is submitted early when the device may
    /// otherwise wait for it (see [`Core::device_needs_submit`]).
    ///
    /// # Safety
    /// As [`Core::push_sqe`].
    #[inline]
    pub(crate) unsafe fn push_sqe_device(&self, sqe: Sqe) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { self.push_sqe(sqe) };
        if self.policy == SubmitPolicy::Adaptive && self.device_needs_submit() {
            self.enter(false, false);
        }
    }

    /// `io_uring_enter` (see [`Ring::enter`]), counted. An error other than EINTR is counted
    /// too; a transient one (EAGAIN, EBUSY: the kernel is short of memory or the CQ is full)
    /// is retried by the next turn after the loop reaped, any other (e.g. EBADR: completions
    /// were dropped) is fatal for the core: it is recorded and the loop stops the core at its
    /// next turn instead of spinning on a broken ring while a task waits for a lost
    /// completion.
    pub(crate) fn enter(&self, wait: bool, getevents: bool) {
        self.enters.set(self.enters.get() + 1);
        let res = match self.injected_enter_error.take() {
            Some(errno) => Err(std::io::Error::from_raw_os_error(errno)),
            None => self.ring.borrow_mut().enter(wait, getevents),
        };
        let Err(e) = res else { return };
        self.enter_errors.set(self.enter_errors.get() + 1);
        if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EBUSY)) {
            tracing::debug!(core = self.id, error = %e, "io_uring_enter: transient error");
            return;
        }
        tracing::error!(core = self.id, error = %e, "io_uring_enter failed: stopping the core");
        self.fatal
            .borrow_mut()
            .get_or_insert_with(|| format!("io_uring_enter failed: {e}"));
    }

    /// Runs `f`, a callback the core runs for someone else (a job, a poller, a waker): a panic
    /// is logged and counted, and the core goes on. `None` if it panicked.
    fn catch<R>(&self, what: &'static str, f: impl FnOnce() -> R) -> Option<R> {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(r) => Some(r),
            Err(panic) => {
                let msg = panic_message(&*panic);
                tracing::error!(core = self.id, panic = %msg, "a {what} panicked");
                self.callback_panics.set(self.callback_panics.get() + 1);
                None
            }
        }
    }

    /// Whether queued device I/O should be submitted now rather than at the end of the turn.
    ///
    /// Only while other tasks still run before the loop submits anyway (with an empty run
    /// queue the blocking enter right after this task submits in the same syscall). Then at
    /// once if the kernel has fewer than [`ADAPTIVE_LOW_WATER`] ops left to work on (the
    /// device may be idle: the latency case), else once [`ADAPTIVE_BATCH`] entries are
    /// queued, so a burst of completions at depth costs one syscall per batch instead of one
    /// per op while the device stays busy with what it already has.
    #[inline]
    fn device_needs_submit(&self) -> bool {
        // Background tasks run only after the loop's own submit: they do not count here.
        if self.run_queue.borrow().is_empty() {
            return false;
        }
        let mut ring = self.ring.borrow_mut();
        let queued = ring.sq_pending();
        if queued >= ADAPTIVE_BATCH {
            return true;
        }
        // Ops handed to the kernel whose completions are not posted yet.
        let in_kernel = self
            .ops
            .borrow()
            .len()
            .saturating_sub(queued + ring.cq_ready());
        in_kernel < ADAPTIVE_LOW_WATER
    }

    /// Registers a poller called every loop turn; while any is registered the core never
    /// blocks in the kernel. The closure returns how many completions it found.
    pub(crate) fn add_poller(&self, f: Box<dyn FnMut() -> usize>) -> usize {
        let id = self.next_poller.get();
        self.next_poller.set(id + 1);
        self.pollers.borrow_mut().push((id, f));
        id
    }

    /// Removes a poller by id.
    pub(crate) fn remove_poller(&self, id: usize) {
        self.pollers.borrow_mut().retain(|(i, _)| *i != id);
        // If the pollers are running right now they are out of the list: remember the id.
        self.removed_pollers.borrow_mut().push(id);
    }

    fn arm_wake(&self) {
        if self.wake_armed.get() {
            return;
        }
        use std::os::fd::AsRawFd;
        let ptr = self.wake_buf.borrow_mut().as_mut() as *mut u64 as *mut u8;
        let sqe = io_uring::opcode::Read::new(
            io_uring::types::Fd(self.remote.eventfd.as_raw_fd()),
            ptr,
            8,
        )
        .build()
        .user_data(WAKE_USER_DATA);
        // SAFETY: `wake_buf` is a boxed u64 owned by the core, which outlives the ring's use
        // of it (the loop drains every op before the core is dropped).
        unsafe { self.push_sqe(Sqe::Normal(sqe)) };
        self.wake_armed.set(true);
    }

    /// Empties fixed file slot `slot` of this core's ring and makes it free (see
    /// `registry::FixedFile`).
    pub(crate) fn release_file_slot(&self, slot: u32) {
        if let Err(e) = self.ring.borrow().unregister_file_at(slot) {
            // The slot keeps a reference to the file; better to lose the slot than to let the
            // next registration find it in use.
            tracing::warn!(core = self.id, slot, error = %e, "could not empty a fixed file slot");
            return;
        }
        self.file_slots.borrow_mut().push(slot);
    }

    /// Drains the mailbox if the mail flag says it may hold messages. Relaxed: a flag set a
    /// moment ago and not seen yet only delays its messages to a later drain, at the latest the
    /// one before the core sleeps ([`Core::drain_inbox_before_sleep`]).
    #[inline]
    fn drain_inbox(&self) -> bool {
        if !self.remote.mail.load(Ordering::Relaxed) {
            return false;
        }
        self.drain_inbox_now()
    }

    /// [`Core::drain_inbox`] after `sleeping` was set: SeqCst, so that either this load sees the
    /// flag of a message sent concurrently or its sender sees `sleeping` and kicks the core.
    #[inline]
    fn drain_inbox_before_sleep(&self) -> bool {
        if !self.remote.mail.load(Ordering::SeqCst) {
            return false;
        }
        self.drain_inbox_now()
    }

    #[cold]
    fn drain_inbox_now(&self) -> bool {
        // Cleared before the channel is read: a message whose sender sets the flag after this
        // leaves it set for the next drain. Acquire pairs with the senders' swaps (see
        // `CoreRemote::send`): their messages are visible to `try_recv` below.
        self.remote.mail.swap(false, Ordering::Acquire);
        let mut got = false;
        while let Ok(msg) = self.inbox.try_recv() {
            got = true;
            match msg {
                Message::Runnable(r) => self.schedule_local(r),
                Message::Job(job) => {
                    let _ = self.catch("job sent to the core", job);
                }
                Message::ReturnFixed(slot) => self.pool.borrow_mut().return_fixed(slot),
                Message::ReleaseFileSlot(slot) => self.release_file_slot(slot),
                Message::Shutdown => self.shutting_down.set(true),
            }
        }
        got
    }

    /// Runs ready ordinary tasks, up to the task budget; returns whether they used all of it,
    /// and their time since background tasks were first seen waiting in this turn (0 if
    /// none waited: the clock is read only then). While background tasks wait it also stops,
    /// as if the budget were used, once they fall behind their share
    /// ([`ordinary_turn_ends`]). And once a turn may be long ([`outside_clock_starts`],
    /// looked at every [`OUTSIDE_LOOK_EVERY`] polls), it stops (budget not used) at the first
    /// look that finds a slice passed since then ([`outside_turn_ends`]) while work outside
    /// the run queue waits for the loop: a message in the mailbox, ops in flight whose
    /// completions only the loop reaps, or pollers. So a task that is always ready (its
    /// operations all complete at once) delays another core's calls and other tasks'
    /// completions by about one slice plus 8 polls after the turn was found long (16 polls,
    /// or 8 of a task that spends its budget), not by the whole budget. Each look after the
    /// clock started that finds such work waiting adds the polls since the last one to a
    /// sample of poll times kept across turns ([`Core::add_poll_sample`]), and so does the
    /// end of the turn while such work waits, or always while polls are long
    /// ([`Core::end_poll_sample`]); while polls are long, turns start their
    /// clock with their first poll and look after every poll, so such work waits about a
    /// slice or one poll, whichever is longer.
    fn run_tasks(&self) -> (bool, u64) {
        let mut waiting_since: Option<Instant> = None;
        // When the turn was found possibly long (its slice counts from there), and where the
        // poll-time sample of this turn starts (time, polls made by then; no time once a
        // look found the polls short).
        let mut long_since: Option<Instant> = None;
        let mut sample_at: Option<Instant> = None;
        let mut sample_from: usize = 0;
        let long_mode = self.long_polls.get();
        let mut next_look = if long_mode { 1 } else { OUTSIDE_LOOK_EVERY };
        // Budget units (operations that completed at once) the turn's polls used.
        let mut units: u32 = 0;
        let spent = |since: Option<Instant>| since.map_or(0, |t| nanos(t.elapsed()));
        for polled in 1..=self.task_budget {
            let next = self.run_queue.borrow_mut().pop_front();
            let Some(r) = next else {
                if let Some(at) = sample_at {
                    self.end_poll_sample(long_mode, at, sample_from, polled - 1);
                }
                return (false, spent(waiting_since));
            };
            if polled == 1 && long_mode {
                let now = Instant::now();
                long_since = Some(now);
                sample_at = Some(now);
            }
            if waiting_since.is_none() && !self.background_queue.borrow().is_empty() {
                // The first poll of a turn whose clock started with it reuses that read.
                waiting_since = Some(match long_since {
                    Some(t) if polled == 1 => t,
                    _ => Instant::now(),
                });
            }
            self.run_task(r);
            units = units.saturating_add(COOP_BUDGET - self.coop_budget.get());
            if waiting_since.is_some() {
                let ns = spent(waiting_since);
                if ordinary_turn_ends(ns, self.task_time.get(), self.background_share_percent) {
                    if let Some(at) = sample_at {
                        self.end_poll_sample(long_mode, at, sample_from, polled);
                    }
                    return (true, ns);
                }
            }
            // Looks while the turn goes on (a turn that ends anyway needs none); a turn of a
            // few cheap polls reads the clock once at most (unless the core's polls were
            // found long: then at its first poll, at each look and at its end).
            if polled == next_look
                && polled < self.task_budget
                && !self.run_queue.borrow().is_empty()
            {
                match long_since {
                    // The clock is read only while work outside the run queue waits (the
                    // slice and the poll times matter only then).
                    Some(since) if self.outside_work_waits() => {
                        let now = Instant::now();
                        if let Some(at) = sample_at {
                            let verdict = self.add_poll_sample(now - at, polled - sample_from);
                            // Polls found short: the turn samples no more.
                            sample_at = (verdict != Some(false)).then_some(now);
                            sample_from = polled;
                        }
                        let ns = nanos(now - since);
                        if outside_turn_ends(ns) {
                            return (false, spent(waiting_since));
                        }
                    }
                    Some(_) => {}
                    None if outside_clock_starts(polled, units) => {
                        let now = Instant::now();
                        long_since = Some(now);
                        (sample_at, sample_from) = (Some(now), polled);
                    }
                    None => {}
                }
                next_look = polled
                    + if self.long_polls.get() {
                        1
                    } else {
                        OUTSIDE_LOOK_EVERY
                    };
            }
        }
        if let Some(at) = sample_at {
            self.end_poll_sample(long_mode, at, sample_from, self.task_budget);
        }
        (true, spent(waiting_since))
    }

    /// Adds `ns` spent in `polls` ordinary polls to the poll-time sample (carried over from
    /// earlier turns) and, once it says ([`poll_sample_verdict`]: long at once, short only
    /// after [`OUTSIDE_LOOK_EVERY`] polls), sets whether polls are long and starts a new
    /// sample. Returns the verdict, if any.
    fn add_poll_sample(&self, ns: Duration, polls: usize) -> Option<bool> {
        let (base_ns, base_polls) = self.poll_sample.get();
        let ns = base_ns.saturating_add(nanos(ns));
        let polls = base_polls.saturating_add(polls);
        let verdict = poll_sample_verdict(ns, polls);
        match verdict {
            Some(long) => {
                self.long_polls.set(long);
                self.poll_sample.set((0, 0));
            }
            None => self.poll_sample.set((ns, polls)),
        }
        verdict
    }

    /// At the end of a turn whose sample runs (its clock started and no look found its polls
    /// short): the polls since the sample's last look go into the sample, for the next turns
    /// to decide on (one clock read) — if the turn began with polls long (so that a core
    /// whose turns became a cheap poll or two stops reading the clock after a few of them),
    /// or if work outside waits now (so that turns of 17–23 long polls, 9–15 for a task
    /// that spends its budget, each ending before a look could time them, still find their
    /// polls long; shorter turns start no clock and are never timed).
    #[cold]
    #[inline(never)]
    fn end_poll_sample(&self, long_mode: bool, at: Instant, sample_from: usize, polled: usize) {
        if polled > sample_from && (long_mode || self.outside_work_waits()) {
            let _ = self.add_poll_sample(at.elapsed(), polled - sample_from);
        }
    }

    /// Whether work outside the run queue may be waiting for the loop's next turn: a
    /// message (the mail flag, relaxed: a late look only delays the cut), an op in flight
    /// (its completion is reaped only between turns) or a poller (called once per turn).
    /// An op that stays in flight for long (a timer, an accept) makes every long turn end
    /// after its slice: one more `io_uring_enter` per 200 µs at most.
    fn outside_work_waits(&self) -> bool {
        self.remote.mail.load(Ordering::Relaxed)
            || !self.ops.borrow().is_empty()
            || !self.pollers.borrow().is_empty()
    }

    /// Runs a background task if no ordinary task is ready, if ordinary tasks used the
    /// whole budget of this turn, if background tasks had less than their share of the
    /// recent task time (`Config::background_share_percent`; see `crate::background`), or
    /// on the
    /// [`BACKGROUND_TURNS_MAX`](crate::background::BACKGROUND_TURNS_MAX)th turn in a row that
    /// skipped the queue (so it never starves, even beside an ordinary task whose ops always
    /// complete at once; the count is per core, so with k background tasks queued one may
    /// wait k times as long). Called after the turn submitted and reaped: an ordinary task
    /// whose read completed at once (a page-cache hit completes in the submitting syscall)
    /// runs before the background task, not after it. More background tasks follow in the
    /// same turn only while background tasks are behind their share, for at most a slice
    /// ([`background_continues`]): the next turn's completions and messages may make
    /// ordinary tasks ready.
    fn run_background_task(&self, saturated: bool, ordinary_ns: u64) {
        if self.background_queue.borrow().is_empty() {
            return;
        }
        let turn = Turn {
            saturated,
            waited: self.background_waited_turns.get() + 1,
            run_queue_empty: self.run_queue.borrow().is_empty(),
        };
        if !background_runs(turn, self.task_time.get(), self.background_share_percent) {
            self.background_waited_turns.set(turn.waited);
            return;
        }
        self.background_waited_turns.set(0);
        let turn_started = Instant::now();
        let mut ran = 0;
        loop {
            let next = self.background_queue.borrow_mut().pop_front();
            let Some(r) = next else { return };
            let started = Instant::now();
            self.running_background.set(true);
            self.run_task(r);
            self.running_background.set(false);
            self.account_task_time(started.elapsed(), true);
            ran += 1;
            let spent = nanos(turn_started.elapsed());
            if !background_continues(
                ran,
                spent,
                ordinary_ns,
                self.task_time.get(),
                self.background_share_percent,
            ) {
                return;
            }
        }
    }

    /// Adds `spent` to the ordinary or background side of the recent task-time account.
    fn account_task_time(&self, spent: Duration, background: bool) {
        self.task_time
            .set(self.task_time.get().add(nanos(spent), background));
    }

    fn run_task(&self, r: Runnable<TaskHome>) {
        self.coop_budget.set(COOP_BUDGET);
        // A panicking task must not take the core (and every other task) down: async-task
        // closes the task; we report the panic and go on.
        if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| r.run())) {
            let msg = panic_message(&*panic);
            tracing::error!(core = self.id, panic = %msg, "a task panicked");
            self.task_panics.set(self.task_panics.get() + 1);
        }
    }

    fn run_pollers(&self) -> usize {
        // The pollers run outside the borrow (a poller may add or remove pollers).
        let mut pollers = std::mem::take(&mut *self.pollers.borrow_mut());
        let mut found = 0;
        let mut panicked = Vec::new();
        for (id, p) in pollers.iter_mut() {
            match self.catch("poller", p) {
                Some(n) => found += n,
                // A poller that panicked is in an unknown state: it is not called again.
                None => panicked.push(*id),
            }
        }
        let mut removed = std::mem::take(&mut *self.removed_pollers.borrow_mut());
        removed.extend(panicked);
        pollers.retain(|(id, _)| !removed.contains(id));
        let mut slot = self.pollers.borrow_mut();
        pollers.append(&mut slot); // added while running
        *slot = pollers;
        found
    }

    /// Moves completions from the CQ to the op table, waking their tasks. One completion at a
    /// time: the ring is not borrowed while a completion is dispatched (waking may run code
    /// that reaps too), and no batch buffer is filled and drained per turn.
    pub(crate) fn reap(&self) -> usize {
        let mut n = 0;
        loop {
            let next = self.ring.borrow_mut().pop();
            let Some((user_data, completion)) = next else {
                return n;
            };
            n += 1;
            self.complete(user_data, completion);
        }
    }

    fn complete(&self, user_data: u64, completion: Completion) {
        match user_data {
            WAKE_USER_DATA => self.wake_armed.set(false),
            IGNORE_USER_DATA => {}
            key => {
                let key = crate::op::table::OpKey::from_user_data(key);
                let retired = self.ops.borrow_mut().complete(key, completion);
                // The memory of an abandoned op: its drop may run any code.
                drop(retired.memory);
                match retired.waiter {
                    Waiter::Task(id) => self.tasks.borrow().wake(id),
                    // Another executor's waker runs its code here.
                    Waiter::Waker(w) => {
                        let _ = self.catch("waker", || w.wake());
                    }
                    Waiter::None => {}
                }
            }
        }
    }

    /// The loop: run until shut down, then drain in-flight ops.
    pub(crate) fn run(self: &Rc<Self>) {
        let need_getevents = self.ring_info.granted.defer_taskrun;
        // Whether the inbox may hold messages the loop has not seen (see the end of the loop).
        let mut check_inbox = true;
        loop {
            if check_inbox {
                self.drain_inbox();
            }
            check_inbox = true;
            if self.shutting_down.get() {
                break;
            }
            let fatal = self.fatal.borrow_mut().take();
            if let Some(reason) = fatal {
                self.die(reason);
                return;
            }
            assert!(
                !self.injected_loop_panic.take(),
                "injected panic in the core loop"
            );
            // Ordinary time counts only while background tasks wait: it decides when they run.
            let (saturated, ordinary_ns) = self.run_tasks();
            if ordinary_ns > 0 {
                self.account_task_time(Duration::from_nanos(ordinary_ns), false);
            }
            let polled = if self.pollers.borrow().is_empty() {
                0
            } else {
                self.run_pollers()
            };
            // Tasks that ran and queued entries do not count as work left: the blocking
            // enter below submits them and waits in one syscall.
            let has_work = self.has_ready_tasks() || polled > 0;
            let spinning = self.busy_poll || !self.pollers.borrow().is_empty();
            if has_work || spinning {
                // Hand queued entries to the kernel and pick up what completed.
                let pending = self.ring.borrow_mut().sq_pending();
                let inflight = !self.ops.borrow().is_empty();
                if pending > 0 || (need_getevents && inflight) {
                    self.enter(false, need_getevents);
                }
                self.reap();
                // A failed enter left a fatal reason: the next turn dies, no task runs first.
                if self.fatal.borrow().is_none() {
                    self.run_background_task(saturated, ordinary_ns);
                }
                continue;
            }
            // Completions already posted need no syscall.
            if self.ring.borrow_mut().sq_pending() == 0 && !need_getevents && self.reap() > 0 {
                continue;
            }
            // Keep polling for a while before blocking: what arrives in the window costs no
            // wake-up through the kernel. The sleep below then runs the protocol as before.
            if !self.idle_spin.is_zero()
                && self.spin_gate.allows()
                && self.spin_idle(need_getevents)
            {
                continue;
            }
            // Nothing runnable: block in the kernel until a completion or a message arrives.
            self.arm_wake();
            self.remote.sleeping.store(true, Ordering::SeqCst);
            if self.drain_inbox_before_sleep() {
                self.remote.sleeping.store(false, Ordering::SeqCst);
                continue;
            }
            self.sleeps.set(self.sleeps.get() + 1);
            self.enter(true, false);
            // Relaxed is enough: a stale `true` only costs a sender a needless kick, and the
            // next sleep stores `true` with SeqCst again.
            self.remote.sleeping.store(false, Ordering::Relaxed);
            self.reap();
            // The inbox was empty when the core went to sleep, and every message sent while
            // it slept kicked the eventfd, whose read then completed (clearing `wake_armed`).
            // Without a kick the next drain can wait one turn: messages sent since the wake-up
            // are picked up by the next drain, at the latest before the core sleeps again.
            check_inbox = !self.wake_armed.get();
        }
        self.shutdown();
    }

    /// Polls the mailbox flag and the completion queue for up to [`Config::idle_spin`] after
    /// the core ran out of work, before it blocks in the kernel. Returns `true` as soon as a
    /// message may be waiting or completions were reaped (the loop then runs another turn),
    /// `false` when the window passed with nothing (the core then goes to sleep).
    ///
    /// The sleep protocol is untouched: `sleeping` stays clear while the core spins (senders
    /// only raise `mail`, no syscall), and after the window the loop sets `sleeping` and
    /// drains the mailbox once more before it blocks, as without a spin.
    ///
    /// Every look at the clock (about every µs) the core yields its CPU to any other runnable
    /// thread (the core it waits for, a thread of the application). If the clock then shows
    /// a long gap ([`CONTENDED_GAP`]), another thread did run there: the CPU is contended, a
    /// yield costs the core a scheduler slice during which it sees no message (only a
    /// sleeping thread is woken with priority), so the core stops spinning for a while (see
    /// [`crate::spin`]) and sleeps.
    ///
    /// Completions that wait for task work the kernel runs when the core enters it
    /// (cooperative or deferred task running; the ring reports them with `IORING_SQ_TASKRUN`)
    /// are posted by a non-blocking `io_uring_enter` with `GETEVENTS` when the flag is seen:
    /// while nothing completes, the spin's only syscalls are its `sched_yield`s.
    #[cold]
    #[inline(never)]
    fn spin_idle(&self, need_getevents: bool) -> bool {
        // Entries tasks queued this turn would go with the blocking enter: hand them to the
        // kernel now so that their completions can arrive while the core spins.
        if self.ring.borrow_mut().sq_pending() > 0 {
            self.enter(false, need_getevents);
            if self.fatal.borrow().is_some() {
                return true; // the loop stops the core
            }
            if self.reap() > 0 {
                return true;
            }
        }
        self.spins.set(self.spins.get() + 1);
        let start = Instant::now();
        let mut last_look = start;
        let mut spins = 0u32;
        loop {
            if self.remote.mail.load(Ordering::Relaxed) {
                self.spin_wakes.set(self.spin_wakes.get() + 1);
                self.spin_gate.clean();
                return true;
            }
            let kernel_work = self.ring.borrow_mut().kernel_work_pending();
            if kernel_work {
                self.enter(false, true);
                if self.fatal.borrow().is_some() {
                    return true;
                }
            }
            if self.reap() > 0 {
                self.spin_wakes.set(self.spin_wakes.get() + 1);
                self.spin_gate.clean();
                return true;
            }
            spins += 1;
            if spins.is_multiple_of(SPIN_CLOCK_EVERY) {
                let now = Instant::now();
                if now.duration_since(last_look) >= CONTENDED_GAP {
                    // Preempted while spinning.
                    return self.contended_spin(now);
                }
                if now.duration_since(start) >= self.idle_spin {
                    self.spin_gate.clean();
                    return false;
                }
                // Another thread runnable on this CPU (the core this one waits for, a thread
                // of the application) runs first: the spin only uses a CPU nobody else wants.
                // SAFETY: sched_yield has no arguments.
                unsafe { libc::sched_yield() };
                last_look = Instant::now();
                if last_look.duration_since(now) >= CONTENDED_GAP {
                    // The yield let another thread run: checked before the mail flag, which
                    // may have been raised meanwhile.
                    return self.contended_spin(last_look);
                }
            }
            std::hint::spin_loop();
        }
    }

    /// Ends a spin that saw another thread run on the core's CPU: spinning pauses for a while
    /// (see [`crate::spin`]). Returns `true`: the loop runs another turn, for what may have
    /// arrived meanwhile, and then sleeps.
    #[cold]
    fn contended_spin(&self, now: Instant) -> bool {
        self.spins_contended.set(self.spins_contended.get() + 1);
        self.spin_gate.contended(now);
        true
    }

    /// Drops every queued task instead of running it: its future drops, and its in-flight ops
    /// turn into cancels.
    fn drop_queued(&self) {
        for queue in [&self.run_queue, &self.background_queue] {
            loop {
                let next = queue.borrow_mut().pop_front();
                match next {
                    Some(r) => drop(r),
                    None => break,
                }
            }
        }
    }

    fn shutdown(self: &Rc<Self>) {
        self.pollers.borrow_mut().clear();
        // Queue every live task (the op table wakes tasks by id, so nothing else may; a task
        // already queued stays queued once) and drop them all.
        self.tasks.borrow().wake_all();
        self.drop_queued();
        // Wait for every op the kernel still owns memory of.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !self.ops.borrow().is_empty() || self.wake_armed.get() {
            if self.wake_armed.get() {
                self.remote.kick();
            }
            // Collected first: pushing may reap when the SQ is full, which needs the table.
            let keys = self.ops.borrow().in_kernel_keys();
            for key in keys {
                crate::op::table::push_cancel(self, key);
            }
            self.enter(true, false);
            let fatal = self.fatal.borrow_mut().take();
            if let Some(reason) = fatal {
                tracing::error!(core = self.id, %reason, "leaking the buffers of in-flight ops");
                self.ops.borrow_mut().leak_all();
                std::mem::forget(Rc::clone(self)); // the eventfd read may still target wake_buf
                break;
            }
            self.reap();
            // Tasks woken by cancelled completions are dropped, not run.
            self.drop_queued();
            // Drain messages so runnables sent during shutdown are dropped, not leaked.
            while let Ok(m) = self.inbox.try_recv() {
                drop(m);
            }
            if std::time::Instant::now() > deadline {
                tracing::error!(
                    inflight = self.ops.borrow().len(),
                    "in-flight ops did not complete within 10 s of shutdown; leaking their buffers"
                );
                self.ops.borrow_mut().leak_all();
                break;
            }
        }
        CURRENT.with(|c| *c.borrow_mut() = None);
    }
}

impl Core {
    /// Stops the core after a fatal error (a failed `io_uring_enter`, a panic in the loop):
    /// marks it dead so that every later call to it fails with [`Error::CoreDead`], drops its
    /// tasks (callers waiting for them get that error instead of hanging), and leaks what the
    /// kernel may still write to: the memory of in-flight ops and the core itself (its ring,
    /// the eventfd read's buffer). The ring is never entered again.
    pub(crate) fn die(self: &Rc<Self>, reason: String) {
        tracing::error!(core = self.id, %reason, "core stopped after a fatal error");
        self.remote.mark_dead(reason);
        self.dead.set(true);
        // Kept alive for good: the kernel may still write into memory the core owns.
        std::mem::forget(Rc::clone(self));
        let _ = self.catch("task dropped by a dead core", || {
            if let Ok(mut p) = self.pollers.try_borrow_mut() {
                p.clear();
            }
            // Every task's future is dropped: its ops are parked in the table, and whoever
            // awaits its output (call_on, run_on) gets an error.
            self.tasks.borrow().wake_all();
            self.drop_queued();
        });
        // Messages that arrived before senders could see the flag: a job is dropped (its
        // caller gets an error); a task woken from elsewhere is leaked like at shutdown. The
        // fence pairs with the one in `CoreRemote::send`.
        std::sync::atomic::fence(Ordering::SeqCst);
        while let Ok(msg) = self.inbox.try_recv() {
            match msg {
                Message::Runnable(r) => std::mem::forget(r),
                other => {
                    let _ = self.catch("message dropped by a dead core", || drop(other));
                }
            }
        }
        if let Ok(mut ops) = self.ops.try_borrow_mut() {
            ops.leak_all();
        }
        CURRENT.with(|c| *c.borrow_mut() = None);
    }
}

/// The text of a panic payload.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".into())
}

#[cfg(test)]
mod tests {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::time::Duration;

    use crate::{DmaBuf, File, Runtime, RING_ENTRIES_MIN};

    #[test]
    fn shutdown_with_more_ops_in_flight_than_sq_entries() {
        // Cancelling every op at shutdown overflows the SQ, which makes the core reap while
        // it walks the op table: this must neither panic nor free a buffer early.
        let mut fds = [0i32; 2];
        // SAFETY: pipe2 writes two descriptors into the array.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both descriptors are fresh and owned from here on.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let reader = File::from_fd(r);
        let rt = Runtime::builder()
            .cores(1)
            .ring_entries(RING_ENTRIES_MIN)
            .build()
            .unwrap();
        let ops = 4 * RING_ENTRIES_MIN as usize;
        let in_flight = rt
            .block_on(move || async move {
                for _ in 0..ops {
                    let f = reader.clone();
                    // Reads of an empty pipe: in flight until cancelled.
                    crate::spawn(async move {
                        let _ = f.read_at(DmaBuf::with_capacity(64), 0).await;
                    })
                    .detach();
                }
                while crate::core_stats().ops_in_flight < ops {
                    crate::sleep(Duration::from_millis(1)).await.unwrap();
                }
                crate::core_stats().ops_in_flight
            })
            .unwrap();
        assert!(in_flight >= ops);
        drop(rt);
        drop(w);
    }
}
