//! # ziob-runtime: a thread-per-core io_uring executor
//!
//! Each core is one OS thread that owns one io_uring ring, a local run queue of tasks, the
//! table of its in-flight ops and a pool of aligned buffers. Cores never share locks on the
//! I/O path; they talk by message passing ([`call_on`], [`spawn_on`]): a closure travels to
//! the target core's mailbox and an eventfd wakes it if it sleeps in `io_uring_enter` (a
//! [`Handle::call`] made on its target core skips the mailbox).
//!
//! ## The loop of a core
//! 1. Drain the mailbox (remote wake-ups, jobs).
//! 2. Poll up to `task_budget` runnable tasks (stopping after a 200 µs slice when background
//!    tasks wait and are behind their share, below; and, in a turn found long — 16 polls, or
//!    four that used their whole cooperative budget — at the first look, every 8 polls,
//!    after a further 200 µs while a message, an op in flight or a poller waits for the loop;
//!    while polls average 25 µs or more — timed at such looks and at the end of such turns,
//!    in a sample kept across turns — the core looks after every poll, from the turn's
//!    start).
//! 3. Call registered pollers (busy-polled drivers such as SPDK).
//! 4. Hand queued SQEs to the kernel (one `io_uring_enter` per turn under
//!    [`SubmitPolicy::Batched`]) and reap completions, waking exactly the task each belongs to.
//! 5. Poll a background task ([`spawn_background`]) if no ordinary task is ready now, if
//!    step 2 used the whole budget, if background tasks had less than their share of the
//!    core's recent task time ([`Builder::background_share_percent`], default half), or if
//!    they were passed over 7 turns in a row; then more of them while they are behind their
//!    share, for at most the slice (or step 2's time, if longer) and 64 polls.
//!
//! With nothing to do, the core blocks in `io_uring_enter` until a completion, a timer or a
//! message arrives (a sender wakes it with an eventfd write). With [`Builder::idle_spin`] set
//! (default [`IDLE_SPIN_DEFAULT`]: zero, opt-in) it first keeps polling its mailbox and
//! completion queue that long, so that a message from another core or thread, or a
//! completion, that arrives soon after costs no wake-up through the kernel. The window
//! restarts after each burst of work only: an idle runtime sleeps. The spin yields its CPU to
//! any other runnable thread, and pauses for a while when its CPU turns out to be wanted by
//! other threads.
//!
//! ## Buffers and cancellation
//! Ops take their buffer by value and give it back with the result ([`IoBuf`], [`IoBufMut`],
//! [`DmaBuf`]). If an op's future is dropped before the completion, the buffer is parked in
//! the op table and an `ASYNC_CANCEL` is sent; the memory is released only when the kernel
//! reports the op finished. Memory the kernel may write into is therefore never freed early.
//!
//! ## Memory
//! Registered (fixed) buffers ([`Builder::fixed_buffers`]) are locked memory and count against
//! `RLIMIT_MEMLOCK` for unprivileged users; a too-small limit gives
//! [`Error::MemlockTooSmall`].
//!
//! ```
//! use ziob_runtime::{fs::OpenOptions, DmaBuf, Runtime};
//! let rt = Runtime::builder().cores(2).build().unwrap();
//! let path = std::env::temp_dir().join(format!("ziob-doc-{}", std::process::id()));
//! let p = path.clone();
//! let n = rt.run_on(1, move || async move {
//!     let f = OpenOptions::new().read(true).write(true).create(true).open(&p).await.unwrap();
//!     let (res, _buf) = f.write_at(DmaBuf::from_slice(b"hello"), 0).await;
//!     res.unwrap()
//! }).unwrap();
//! assert_eq!(n, 5);
//! std::fs::remove_file(path).unwrap();
//! ```
#![warn(missing_docs)]

mod background;
pub mod buf;
mod config;
mod core;
mod error;
pub mod fs;
pub mod op;
pub mod prefault;
mod registry;
mod ring;
mod runtime;
mod spin;
mod task;
#[doc(hidden)]
pub mod testing;

pub use buf::{
    dma_allocator_name, set_dma_allocator, DmaAllocator, DmaBuf, IoBuf, IoBufMut, Limited,
    PoolStats, DMA_ALIGN_BYTES, WINDOW_ALIGN_BYTES,
};
pub use config::{
    Builder, Config, FixedBufferConfig, RingFlags, SubmitPolicy, BACKGROUND_SHARE_PERCENT_DEFAULT,
    BACKGROUND_SHARE_PERCENT_MAX, BUFFER_CACHE_BYTES_DEFAULT, FIXED_BUFFERS_MAX, IDLE_SPIN_DEFAULT,
    IDLE_SPIN_MAX, RING_ENTRIES_DEFAULT, RING_ENTRIES_MAX, RING_ENTRIES_MIN,
};
pub use error::{Error, Result};
pub use fs::{File, OpenOptions};
pub use op::{nop, sleep, uring_cmd, Sleep, UringCmdOutput};
pub use ring::{Completion, RingInfo};
pub use runtime::{Handle, Runtime};
pub use task::{
    call_on, consume_budget, core_id, core_stats, handle, num_cores, on_core, register_poller,
    ring_info, spawn, spawn_background, spawn_on, yield_now, CoreStats, PollerGuard, Task,
    TaskHome, YieldNow,
};
