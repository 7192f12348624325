//! [`Runtime`]: starts the cores and hands work to them from ordinary threads.

use std::future::Future;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use crate::config::{Builder, Config};
use crate::core::{self, Core, CoreRemote, Message};
use crate::error::{Error, Result};
use crate::ring::RingInfo;

/// A running set of cores: one thread, one io_uring ring, one run queue each.
///
/// Dropping the runtime stops every core: queued tasks are dropped, in-flight ops are
/// cancelled and their completions awaited before the rings close.
pub struct Runtime {
    remotes: Arc<Vec<Arc<CoreRemote>>>,
    threads: Vec<JoinHandle<()>>,
    ring_infos: Vec<RingInfo>,
    config: Config,
}

/// Runs `fut`, catching a panic so it can be re-raised on the thread that waits for it.
async fn catch_panic<T>(fut: impl Future<Output = T>) -> std::thread::Result<T> {
    use futures::FutureExt;
    std::panic::AssertUnwindSafe(fut).catch_unwind().await
}

/// The CPUs of the calling thread's affinity mask, in increasing order (empty if unknown).
fn affinity_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data (all-zero is an empty set); sched_getaffinity writes at
    // most `size_of::<cpu_set_t>()` bytes into it; CPU_ISSET reads inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            tracing::warn!(error = %std::io::Error::last_os_error(), "sched_getaffinity failed");
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// The CPU core `core` is pinned to: the `core`-th CPU of `allowed` (the builder's affinity
/// mask), wrapping around when there are more cores than CPUs.
fn cpu_for_core(core: usize, allowed: &[usize]) -> Option<usize> {
    (!allowed.is_empty()).then(|| allowed[core % allowed.len()])
}

fn pin_to_cpu(core: usize, cpu: usize) {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it (cpu < CPU_SETSIZE, it came
    // from sched_getaffinity); sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            tracing::warn!(core, cpu, error = %std::io::Error::last_os_error(), "pinning failed");
        }
    }
}

/// Runs core `core`'s loop; if the loop itself panics, the core is stopped as dead
/// ([`Core::die`]) so that callers get [`Error::CoreDead`] instead of waiting forever.
fn run_core(core: &std::rc::Rc<Core>) {
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| core.run()));
    if let Err(panic) = res {
        let reason = format!("panic in the core loop: {}", core::panic_message(&*panic));
        core.remote.mark_dead(reason.clone());
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| core.die(reason))).is_err() {
            // Cleaning up failed too: keep everything (the kernel may still use it).
            std::mem::forget(core.clone());
        }
    }
    core.remote.mark_stopped();
}

impl Runtime {
    /// A builder with default settings.
    pub fn builder() -> Builder {
        Builder::new()
    }

    pub(crate) fn start(config: Config) -> Result<Runtime> {
        let mut remotes = Vec::with_capacity(config.cores);
        let mut inboxes = Vec::with_capacity(config.cores);
        for id in 0..config.cores {
            let (r, inbox) =
                core::remote(id).map_err(|source| Error::Spawn { core: id, source })?;
            remotes.push(r);
            inboxes.push(inbox);
        }
        let remotes = Arc::new(remotes);
        let allowed_cpus = if config.pin_cores {
            affinity_cpus()
        } else {
            Vec::new()
        };
        let (ready_tx, ready_rx) = mpsc::channel::<(usize, Result<RingInfo>)>();
        let mut threads = Vec::with_capacity(config.cores);
        for (id, inbox) in inboxes.into_iter().enumerate() {
            let core_config = config.clone();
            let remote = remotes[id].clone();
            let peers = remotes.clone();
            let ready = ready_tx.clone();
            let cpu = if core_config.pin_cores {
                cpu_for_core(id, &allowed_cpus)
            } else {
                None
            };
            let spawned = std::thread::Builder::new()
                .name(format!("ziob-core-{id}"))
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        pin_to_cpu(id, cpu);
                    }
                    match Core::new(&core_config, remote, inbox, peers) {
                        Ok(core) => {
                            core.enter_thread();
                            let _ = ready.send((id, Ok(core.ring_info)));
                            drop(ready);
                            run_core(&core);
                        }
                        Err(e) => {
                            let _ = ready.send((id, Err(e)));
                        }
                    }
                });
            match spawned {
                Ok(t) => threads.push(t),
                Err(source) => {
                    let rt = Runtime {
                        remotes,
                        threads,
                        ring_infos: Vec::new(),
                        config,
                    };
                    drop(rt);
                    return Err(Error::Spawn { core: id, source });
                }
            }
        }
        drop(ready_tx);
        let mut infos: Vec<Option<RingInfo>> = vec![None; config.cores];
        let mut first_err = None;
        for _ in 0..config.cores {
            match ready_rx.recv() {
                Ok((id, Ok(info))) => infos[id] = Some(info),
                Ok((_, Err(e))) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => break,
            }
        }
        let rt = Runtime {
            remotes,
            threads,
            ring_infos: infos.iter().flatten().copied().collect(),
            config,
        };
        match first_err {
            Some(e) => Err(e), // dropping `rt` stops the cores that did start
            None => Ok(rt),
        }
    }

    /// Number of cores.
    pub fn cores(&self) -> usize {
        self.remotes.len()
    }

    /// The configuration the runtime was built with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// What core `core`'s ring was set up with (flags granted and degraded).
    pub fn ring_info(&self, core: usize) -> Option<RingInfo> {
        self.ring_infos.get(core).copied()
    }

    /// Runs the future made by `f` on core `core` and blocks the calling thread until it
    /// finishes. Call it from outside the runtime (e.g. `main`). A panic in the future is
    /// re-raised here; a core that stopped after a fatal error gives [`Error::CoreDead`].
    pub fn run_on<F, Fut, T>(&self, core: usize, f: F) -> Result<T>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        assert!(
            !crate::task::on_core(),
            "Runtime::run_on blocks; from a core, use call_on instead"
        );
        let target = self.remotes.get(core).ok_or(Error::CoreGone(core))?;
        let (tx, rx) = futures::channel::oneshot::channel();
        let job = move || {
            crate::task::spawn(async move {
                let _ = tx.send(catch_panic(f()).await);
            })
            .detach();
        };
        target
            .send(Message::Job(Box::new(job)))
            .map_err(|_| target.gone_error())?;
        match futures::executor::block_on(rx).map_err(|_| target.gone_error())? {
            Ok(v) => Ok(v),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    /// Runs `f(core)` on core 0 (convenience for single-core programs).
    pub fn block_on<F, Fut, T>(&self, f: F) -> Result<T>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        self.run_on(0, f)
    }

    /// Runs `f(core)` on every core at once and returns the outputs in core order.
    pub fn run_on_all<F, Fut, T>(&self, f: F) -> Result<Vec<T>>
    where
        F: Fn(usize) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        let f = Arc::new(f);
        let mut rxs = Vec::with_capacity(self.cores());
        for (core, target) in self.remotes.iter().enumerate() {
            let (tx, rx) = futures::channel::oneshot::channel();
            let f = f.clone();
            let job = move || {
                crate::task::spawn(async move {
                    let _ = tx.send(catch_panic(f(core)).await);
                })
                .detach();
            };
            target
                .send(Message::Job(Box::new(job)))
                .map_err(|_| target.gone_error())?;
            rxs.push(rx);
        }
        let mut out = Vec::with_capacity(rxs.len());
        for (rx, target) in rxs.into_iter().zip(self.remotes.iter()) {
            match futures::executor::block_on(rx).map_err(|_| target.gone_error())? {
                Ok(v) => out.push(v),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        Ok(out)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        for r in self.remotes.iter() {
            let _ = r.send(Message::Shutdown);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A cheap, thread-safe handle to a runtime's cores: send work to a core from any thread
/// without blocking. Get one with [`Runtime::handle`] or, on a core, [`crate::handle`].
#[derive(Clone)]
pub struct Handle {
    remotes: Arc<Vec<Arc<CoreRemote>>>,
}

impl Handle {
    pub(crate) fn new(remotes: Arc<Vec<Arc<CoreRemote>>>) -> Handle {
        Handle { remotes }
    }

    /// Number of cores.
    pub fn cores(&self) -> usize {
        self.remotes.len()
    }

    /// The index of the core of this runtime the calling thread is, or `None` on any other
    /// thread (another runtime's core included).
    pub fn local_core(&self) -> Option<usize> {
        crate::core::with_core(|c| {
            self.remotes
                .get(c.remote.id)
                .filter(|r| r.ring_id == c.remote.ring_id)
                .map(|_| c.remote.id)
        })
        .flatten()
    }

    /// Whether core `core` still runs (its runtime was not stopped and it did not die).
    pub fn core_running(&self, core: usize) -> bool {
        self.remotes.get(core).is_some_and(|r| r.is_running())
    }

    /// Runs the future made by `f` on core `core` as a detached task; returns without waiting.
    ///
    /// A panic in `f` or in its future is logged and counted on that core, which goes on.
    /// Fails with [`Error::CoreDead`] if the core stopped after a fatal error, and with
    /// [`Error::CoreGone`] if it was shut down.
    pub fn spawn_on<F, Fut>(&self, core: usize, f: F) -> Result<()>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let target = self.remotes.get(core).ok_or(Error::CoreGone(core))?;
        crate::task::send_spawn(target, f)
    }
}

impl Handle {
    /// Runs the future made by `f` on core `core` and answers with its output: the
    /// cross-thread form of [`call_on`](crate::call_on). The returned future is `Send` and
    /// executor-agnostic: it may be awaited on any thread and any executor (tokio, a plain
    /// thread with `futures::executor::block_on`, a ZIOB core), completes through a oneshot
    /// channel and, on the caller's side, only reads which core (if any) it is polled on:
    /// polled on `core` itself, it spawns the task there at once instead of posting it to
    /// the core's mailbox, where it would wait for the loop's next turn; polled by a
    /// background task ([`spawn_background`](crate::spawn_background)), the task on `core`
    /// is a background task too, so background work gives way to ordinary tasks on every
    /// core it calls. `Fut` need not be `Send`: it is made and polled on `core` only.
    ///
    /// Nothing is sent until the returned future is first polled. A panic in `f` or its
    /// future continues in the caller. Fails with [`Error::CoreDead`] if the core stopped
    /// after a fatal error and with [`Error::CoreGone`] if the runtime was stopped (also while
    /// the call waits: a call in flight when the runtime stops is answered with that error,
    /// never left hanging), and with [`Error::CoreGone`] at once for a core index out of range.
    ///
    /// # Cancel safety
    /// Dropping the returned future drops the future running on `core` at its next await
    /// point (or never starts it, if it had not started yet); what that left done is up to
    /// that future's own cancel safety. Nothing leaks: the job, the task and the channel are
    /// freed whichever side finishes first.
    pub fn call<F, Fut, T>(
        &self,
        core: usize,
        f: F,
    ) -> impl Future<Output = Result<T>> + Send + 'static
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        let target = self.remotes.get(core).cloned();
        async move {
            let target = target.ok_or(Error::CoreGone(core))?;
            let background = crate::task::in_background_task();
            crate::task::send_call(&target, move |tx| {
                let call = run_unless_abandoned(tx, f);
                crate::task::spawn_with(call, background, "Handle::call").detach();
            })
            .await
        }
    }
}

/// The task of a [`Handle::call`]: runs `f()`'s future and sends its output (or its panic)
/// to `tx`; stops early, dropping the future, once the caller dropped the receiving end.
async fn run_unless_abandoned<F, Fut, T>(
    mut tx: futures::channel::oneshot::Sender<std::thread::Result<T>>,
    f: F,
) where
    F: FnOnce() -> Fut,
    Fut: Future<Output = T>,
{
    use futures::future::{select, Either};
    if tx.is_canceled() {
        return;
    }
    let work = std::pin::pin!(catch_panic(async move { f().await }));
    let abandoned = std::pin::pin!(tx.cancellation());
    match select(work, abandoned).await {
        Either::Left((out, _)) => {
            let _ = tx.send(out);
        }
        Either::Right(((), _)) => {}
    }
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("cores", &self.cores())
            .finish()
    }
}

impl Runtime {
    /// A handle to this runtime's cores.
    pub fn handle(&self) -> Handle {
        Handle::new(self.remotes.clone())
    }
}
