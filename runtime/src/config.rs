//! Runtime configuration: the builder and the knobs it sets.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::runtime::Runtime;

/// Smallest ring a core may have (entries).
pub const RING_ENTRIES_MIN: u32 = 8;
/// Largest ring a core may have (entries); the kernel's own limit is 32768.
pub const RING_ENTRIES_MAX: u32 = 32768;
/// Default ring size per core (entries).
pub const RING_ENTRIES_DEFAULT: u32 = 256;
/// Largest number of registered (fixed) buffers per core; the kernel's limit is 16384.
pub const FIXED_BUFFERS_MAX: u32 = 16384;
/// Default of [`Config::buffer_cache_bytes`]: free [`DmaBuf`](crate::DmaBuf) memory each
/// core's pool keeps for reuse, 64 MiB (e.g. 128 buffers of 512 KiB). It matches the `ziob`
/// buffer's default shard budget, so a shard's chunks are reused instead of being returned to
/// the allocator and faulted in again (at 32 MiB, 16 KiB appends to one emu zone ran at about
/// half the rate).
pub const BUFFER_CACHE_BYTES_DEFAULT: usize = 64 << 20;

/// Default of [`Config::background_share_percent`]: background tasks may take half of a
/// busy core's task time.
pub const BACKGROUND_SHARE_PERCENT_DEFAULT: u8 = 50;

/// Largest [`Config::background_share_percent`]: ordinary tasks always keep some.
pub const BACKGROUND_SHARE_PERCENT_MAX: u8 = 90;

/// Default of [`Config::idle_spin`]: how long a core that ran out of work keeps polling before
/// it blocks in the kernel — zero, it blocks at once. On a shared 2-CPU VM 50 µs made a
/// core-to-core round trip 5.1 → 2.2 µs p50 and RocksDB-on-ZIOB fillrandom 1.3× faster
/// (`benches/results/2026-12-02-rt-spin/`), but kv-demo with its shard on core 0 and the
/// readwhilewriting writer on core 1 (its default on 2 CPUs) about 10× slower on
/// readwhilewriting and seekrandom (`benches/results/2026-12-02-idle-spin-kv/`). So the
/// spin is opt-in until that is understood.
pub const IDLE_SPIN_DEFAULT: Duration = Duration::ZERO;
/// Longest [`Config::idle_spin`] accepted, 10 ms: a core that should never block is
/// [`Config::busy_poll`]; past a few scheduler ticks a spin only burns the CPU.
pub const IDLE_SPIN_MAX: Duration = Duration::from_millis(10);

/// When the reactor hands queued submissions to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitPolicy {
    /// Queue entries during a loop turn and submit them with one `io_uring_enter` per turn.
    Batched,
    /// Submit every entry as soon as it is queued (one syscall per op); lowest latency at
    /// low queue depth, highest syscall cost.
    Eager,
    /// Batched, except ops that wait on a device (O_DIRECT file I/O, `uring_cmd`) while other
    /// tasks still run: those are submitted at once when the kernel has few ops left to work
    /// on (the device may be idle), else as soon as 8 entries are queued, so the device starts
    /// on them while the core runs other tasks without one syscall per op. The default:
    /// measured here, it keeps Batched's cost for NOPs and page-cache reads and Eager's IOPS
    /// for O_DIRECT reads at depth (see `benches/results/`).
    Adaptive,
}

/// Ring setup flags a core asks the kernel for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RingFlags {
    /// `IORING_SETUP_SQPOLL` with this idle time in milliseconds: a kernel thread polls the SQ.
    pub sqpoll_idle_ms: Option<u32>,
    /// `IORING_SETUP_SQE128 | IORING_SETUP_CQE32`, needed for NVMe passthrough (`uring_cmd`).
    pub big_entries: bool,
    /// `IORING_SETUP_SINGLE_ISSUER` (6.0+); dropped silently on older kernels.
    pub single_issuer: bool,
    /// `IORING_SETUP_DEFER_TASKRUN` (6.1+, needs single issuer); dropped silently on older kernels.
    pub defer_taskrun: bool,
    /// `IORING_SETUP_COOP_TASKRUN` (5.19+); dropped silently on older kernels.
    pub coop_taskrun: bool,
}

/// Registered (fixed) buffer arena of each core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FixedBufferConfig {
    /// Number of buffers registered with each core's ring (0 = none).
    pub count: u32,
    /// Size of each buffer in bytes (a multiple of 4096).
    pub size_bytes: usize,
}

/// Everything a core needs to set itself up.
#[derive(Debug, Clone)]
pub struct Config {
    /// Number of cores (threads, rings).
    pub cores: usize,
    /// Pin core `i` to the `i`-th CPU of the affinity mask of the thread that builds the
    /// runtime (wrapping around when there are more cores than CPUs).
    pub pin_cores: bool,
    /// Submission queue entries per ring.
    pub ring_entries: u32,
    /// Submission policy.
    pub submit_policy: SubmitPolicy,
    /// Ring flags.
    pub ring_flags: RingFlags,
    /// Fixed buffer arena per core.
    pub fixed_buffers: FixedBufferConfig,
    /// Never block in the kernel; spin instead (SPDK-style polling). Off by default.
    pub busy_poll: bool,
    /// How long an idle core keeps polling its mailbox and completion queue before it blocks
    /// in the kernel (default [`IDLE_SPIN_DEFAULT`], at most [`IDLE_SPIN_MAX`]; zero blocks
    /// at once). A message or completion that arrives in this window is picked up without a
    /// wake-up through the kernel (an eventfd write and a scheduler wake-up of the core's
    /// thread, tens of µs in a VM). The window starts each time the core runs out of work,
    /// so an idle runtime still sleeps: it costs at most this much CPU per burst of work. The
    /// spin yields its CPU to other runnable threads and stops for a while (1 to 100 ms) when
    /// it finds that another thread ran on its CPU meanwhile (a contended CPU), where
    /// spinning would delay more than it saves.
    pub idle_spin: Duration,
    /// Ordinary tasks polled per loop turn before the reactor checks for completions (a turn
    /// that uses all of it also polls a background task, see [`crate::spawn_background`];
    /// a turn stops earlier when background tasks wait and are behind their share, and,
    /// once a look (every 8 polls) finds it made 16 polls or polls that used 256 units of
    /// cooperative budget, at the first later look 200 µs or more after that while a message
    /// from another core, an op in flight or a poller waits for the loop; while polls average
    /// 25 µs or more — timed at such looks and at the end of such turns — the looks come
    /// after every poll and the 200 µs count from the turn's start).
    pub task_budget: usize,
    /// While ordinary tasks are ready, background tasks ([`crate::spawn_background`]) also
    /// get a turn's background slot whenever they had less than this percentage of the
    /// core's recent task time (`crate::background`: about the last 8 ms of time spent polling
    /// tasks while background tasks waited), so that work spawned in the
    /// background keeps up beside a foreground that is always ready. 0: they get only the
    /// turns described there; at most 90.
    pub background_share_percent: u8,
    /// Ring flags to treat as unsupported, as if the kernel lacked them (for tests of the
    /// degradation path).
    pub simulate_unsupported: RingFlags,
    /// Bytes of free buffer memory each core's pool keeps for reuse at most; buffers freed
    /// beyond it go back to their allocator. Buffers in use are not counted (they are the
    /// application's: ZIOB's own budget bounds those), nor the registered arena.
    pub buffer_cache_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            cores: 1,
            pin_cores: false,
            ring_entries: RING_ENTRIES_DEFAULT,
            submit_policy: SubmitPolicy::Adaptive,
            ring_flags: RingFlags {
                single_issuer: true,
                coop_taskrun: true,
                ..RingFlags::default()
            },
            fixed_buffers: FixedBufferConfig::default(),
            busy_poll: false,
            idle_spin: IDLE_SPIN_DEFAULT,
            task_budget: 128,
            background_share_percent: BACKGROUND_SHARE_PERCENT_DEFAULT,
            simulate_unsupported: RingFlags::default(),
            buffer_cache_bytes: BUFFER_CACHE_BYTES_DEFAULT,
        }
    }
}

impl Config {
    /// Checks the ranges of every value.
    pub fn validate(&self) -> Result<()> {
        if self.cores == 0 || self.cores > 1024 {
            return Err(Error::InvalidConfig(format!(
                "cores must be between 1 and 1024, got {}",
                self.cores
            )));
        }
        if !(RING_ENTRIES_MIN..=RING_ENTRIES_MAX).contains(&self.ring_entries) {
            return Err(Error::InvalidConfig(format!(
                "ring_entries must be between {RING_ENTRIES_MIN} and {RING_ENTRIES_MAX}, got {}",
                self.ring_entries
            )));
        }
        let fb = self.fixed_buffers;
        if fb.count > FIXED_BUFFERS_MAX {
            return Err(Error::InvalidConfig(format!(
                "fixed buffer count must be at most {FIXED_BUFFERS_MAX}, got {}",
                fb.count
            )));
        }
        if fb.count > 0 && (fb.size_bytes == 0 || !fb.size_bytes.is_multiple_of(4096)) {
            return Err(Error::InvalidConfig(format!(
                "fixed buffer size must be a non-zero multiple of 4096, got {}",
                fb.size_bytes
            )));
        }
        if self.idle_spin > IDLE_SPIN_MAX {
            return Err(Error::InvalidConfig(format!(
                "idle_spin must be at most {IDLE_SPIN_MAX:?} (use busy_poll for a core that \
                 never blocks), got {:?}",
                self.idle_spin
            )));
        }
        if self.task_budget == 0 {
            return Err(Error::InvalidConfig(
                "task_budget must be at least 1".into(),
            ));
        }
        if self.background_share_percent > BACKGROUND_SHARE_PERCENT_MAX {
            return Err(Error::InvalidConfig(format!(
                "background_share_percent must be at most {BACKGROUND_SHARE_PERCENT_MAX}, got {}",
                self.background_share_percent
            )));
        }
        Ok(())
    }
}

/// Builds a [`Runtime`]: `Runtime::builder().cores(2).ring_entries(512).build()`.
#[derive(Debug, Clone, Default)]
pub struct Builder {
    config: Config,
}

impl Builder {
    /// A builder with the defaults: one core, 256 ring entries, adaptive submission,
    /// single-issuer and cooperative task running, no fixed buffers, no pinning, no idle spin
    /// ([`IDLE_SPIN_DEFAULT`]).
    pub fn new() -> Self {
        Builder::default()
    }
    /// Number of cores (threads, each with its own ring).
    pub fn cores(mut self, n: usize) -> Self {
        self.config.cores = n;
        self
    }
    /// Pin core `i` to the `i`-th CPU of the calling thread's affinity mask (so a restricted
    /// cpuset or `taskset` is respected), wrapping around when there are more cores than CPUs.
    pub fn pin_cores(mut self, pin: bool) -> Self {
        self.config.pin_cores = pin;
        self
    }
    /// Submission queue entries per ring (8..=32768; rounded up to a power of two by the kernel).
    pub fn ring_entries(mut self, entries: u32) -> Self {
        self.config.ring_entries = entries;
        self
    }
    /// When queued submissions go to the kernel.
    pub fn submit_policy(mut self, policy: SubmitPolicy) -> Self {
        self.config.submit_policy = policy;
        self
    }
    /// Enable SQPOLL with the given idle time (ms) of the kernel polling thread.
    pub fn sqpoll(mut self, idle_ms: Option<u32>) -> Self {
        self.config.ring_flags.sqpoll_idle_ms = idle_ms;
        self
    }
    /// 128-byte SQEs and 32-byte CQEs (required for `uring_cmd`, i.e. NVMe passthrough).
    pub fn sqe128(mut self, on: bool) -> Self {
        self.config.ring_flags.big_entries = on;
        self
    }
    /// Ask for `IORING_SETUP_SINGLE_ISSUER` (default on; dropped when the kernel lacks it).
    pub fn single_issuer(mut self, on: bool) -> Self {
        self.config.ring_flags.single_issuer = on;
        self
    }
    /// Ask for `IORING_SETUP_DEFER_TASKRUN` (default off; dropped when the kernel lacks it).
    pub fn defer_taskrun(mut self, on: bool) -> Self {
        self.config.ring_flags.defer_taskrun = on;
        self
    }
    /// Ask for `IORING_SETUP_COOP_TASKRUN` (default on; dropped when the kernel lacks it).
    pub fn coop_taskrun(mut self, on: bool) -> Self {
        self.config.ring_flags.coop_taskrun = on;
        self
    }
    /// Register `count` buffers of `size_bytes` each with every core's ring. I/O on a
    /// [`DmaBuf`](crate::DmaBuf) taken from this arena uses `READ_FIXED`/`WRITE_FIXED`.
    pub fn fixed_buffers(mut self, count: u32, size_bytes: usize) -> Self {
        self.config.fixed_buffers = FixedBufferConfig { count, size_bytes };
        self
    }
    /// Free buffer memory each core's pool may keep for reuse, in bytes (default
    /// [`BUFFER_CACHE_BYTES_DEFAULT`]; 0 keeps none). See [`Config::buffer_cache_bytes`].
    pub fn buffer_cache_bytes(mut self, bytes: usize) -> Self {
        self.config.buffer_cache_bytes = bytes;
        self
    }
    /// Spin instead of blocking in the kernel when idle (costs a full CPU per core).
    pub fn busy_poll(mut self, on: bool) -> Self {
        self.config.busy_poll = on;
        self
    }
    /// How long an idle core keeps polling its mailbox and completion queue before it blocks
    /// in the kernel (default [`IDLE_SPIN_DEFAULT`], at most [`IDLE_SPIN_MAX`]; zero blocks at
    /// once). See [`Config::idle_spin`].
    pub fn idle_spin(mut self, spin: Duration) -> Self {
        self.config.idle_spin = spin;
        self
    }
    /// Tasks polled per loop turn before completions are reaped (default 128).
    pub fn task_budget(mut self, n: usize) -> Self {
        self.config.task_budget = n;
        self
    }
    /// The share of a core's recent task time background tasks may take while ordinary
    /// tasks are ready (default [`BACKGROUND_SHARE_PERCENT_DEFAULT`], at most
    /// [`BACKGROUND_SHARE_PERCENT_MAX`]). See [`Config::background_share_percent`].
    pub fn background_share_percent(mut self, percent: u8) -> Self {
        self.config.background_share_percent = percent;
        self
    }
    /// Treat these ring flags as if the kernel did not support them. Only for testing the
    /// degradation and error paths.
    #[doc(hidden)]
    pub fn simulate_unsupported(mut self, flags: RingFlags) -> Self {
        self.config.simulate_unsupported = flags;
        self
    }
    /// The configuration built so far.
    pub fn config(&self) -> &Config {
        &self.config
    }
    /// Validates the configuration and starts every core.
    pub fn build(self) -> Result<Runtime> {
        self.config.validate()?;
        Runtime::start(self.config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_out_of_range_values() {
        let cases = [
            (Builder::new().cores(0), "cores must be between"),
            (
                Builder::new().ring_entries(4),
                "ring_entries must be between",
            ),
            (
                Builder::new().ring_entries(65536),
                "ring_entries must be between",
            ),
            (Builder::new().fixed_buffers(4, 1000), "multiple of 4096"),
            (Builder::new().fixed_buffers(20000, 4096), "at most 16384"),
            (
                Builder::new().idle_spin(IDLE_SPIN_MAX + Duration::from_nanos(1)),
                "idle_spin must be at most 10ms",
            ),
            (
                Builder::new().idle_spin(Duration::from_secs(3600)),
                "use busy_poll",
            ),
        ];
        for (b, want) in cases {
            let err = b.config().validate().unwrap_err().to_string();
            assert!(err.contains(want), "{err} should contain {want}");
        }
        Builder::new().config().validate().unwrap();
        for ok in [Duration::ZERO, Duration::from_micros(1), IDLE_SPIN_MAX] {
            Builder::new().idle_spin(ok).config().validate().unwrap();
        }
    }
}
