//! One core's io_uring instance: setup with flag fallback, pushing entries, reaping completions.

use std::io;
use std::os::fd::RawFd;

use io_uring::{cqueue, squeue, IoUring};

use crate::config::{Config, RingFlags};
use crate::error::{Error, Result};

/// A process-unique identity of one core's ring (never reused while the process runs):
/// registrations (fixed files and buffers, pollers) are matched by it, not by core index,
/// since every runtime in a process has a core 0. See `registry.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct RingId(u64);

impl RingId {
    /// A fresh identity.
    pub(crate) fn new() -> RingId {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        RingId(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

/// What a core's ring ended up with after setup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingInfo {
    /// Flags requested and granted.
    pub granted: RingFlags,
    /// Optional flags requested but dropped because the kernel refused them.
    pub degraded: RingFlags,
    /// Submission queue entries.
    pub sq_entries: u32,
}

/// A completion, normalised over 16- and 32-byte CQEs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The result: a count or `-errno`.
    pub result: i32,
    /// CQE flags.
    pub flags: u32,
    /// The extra 16 bytes of a 32-byte CQE (zero on normal rings).
    pub big: [u64; 2],
}

/// The ring, with 64- or 128-byte submission entries.
pub(crate) enum Ring {
    Normal(IoUring),
    Big(IoUring<squeue::Entry128, cqueue::Entry32>),
}

/// An entry ready to push, of either size.
pub(crate) enum Sqe {
    Normal(squeue::Entry),
    Big(Box<squeue::Entry128>),
}

/// `IORING_ENTER_GETEVENTS` from the kernel's uapi header (not re-exported by `io-uring`).
const IORING_ENTER_GETEVENTS: u32 = 1;

fn is_unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL) | Some(libc::EOPNOTSUPP)
    )
}

fn simulated_refusal(requested: &RingFlags, simulate: &RingFlags) -> bool {
    (requested.single_issuer && simulate.single_issuer)
        || (requested.defer_taskrun && simulate.defer_taskrun)
        || (requested.coop_taskrun && simulate.coop_taskrun)
        || (requested.big_entries && simulate.big_entries)
        || (requested.sqpoll_idle_ms.is_some() && simulate.sqpoll_idle_ms.is_some())
}

/// Without `IORING_FEAT_NODROP` (Linux < 5.5) the kernel drops completions when the CQ is
/// full, and the task waiting for a dropped one would hang: refuse such a ring.
fn check_nodrop(has_nodrop: bool) -> Result<()> {
    if has_nodrop {
        Ok(())
    } else {
        Err(Error::MissingRingFeature {
            feature: "IORING_FEAT_NODROP",
            why: "without it the kernel drops completions when the completion queue is full",
        })
    }
}

/// Whether a ring set up with `flags` also asks for `IORING_SETUP_TASKRUN_FLAG`: the kernel
/// then sets `IORING_SQ_TASKRUN` while completion work waits for the core to enter the
/// kernel (see [`Ring::kernel_work_pending`]). It is valid with cooperative or deferred task
/// running (cooperative came in the same release, 5.19, deferred later, so a kernel that
/// grants either grants it too) and refused with SQPOLL; without either the kernel
/// interrupts the core to post completions, and the flag is not needed.
fn reports_taskrun(flags: &RingFlags) -> bool {
    (flags.coop_taskrun || flags.defer_taskrun) && flags.sqpoll_idle_ms.is_none()
}

impl Ring {
    /// Creates a ring for `config`, dropping optional flags the kernel refuses. SQE128 and
    /// SQPOLL are required when asked for: refusing them is an error that says what to change.
    pub(crate) fn new(config: &Config) -> Result<(Ring, RingInfo)> {
        let want = config.ring_flags;
        let mut try_flags = want;
        loop {
            match Self::try_new(
                config.ring_entries,
                &try_flags,
                &config.simulate_unsupported,
                !config.idle_spin.is_zero(),
            ) {
                Ok(ring) => {
                    check_nodrop(ring.has_nodrop())?;
                    let degraded = RingFlags {
                        sqpoll_idle_ms: None,
                        big_entries: false,
                        single_issuer: want.single_issuer && !try_flags.single_issuer,
                        defer_taskrun: want.defer_taskrun && !try_flags.defer_taskrun,
                        coop_taskrun: want.coop_taskrun && !try_flags.coop_taskrun,
                    };
                    if degraded != RingFlags::default() {
                        tracing::warn!(?degraded, "io_uring setup: kernel refused optional flags");
                    }
                    let sq_entries = ring.sq_entries();
                    return Ok((
                        ring,
                        RingInfo {
                            granted: try_flags,
                            degraded,
                            sq_entries,
                        },
                    ));
                }
                Err(e) if is_unsupported(&e) => {
                    // Drop optional flags, newest first; then the required ones fail.
                    if try_flags.defer_taskrun {
                        try_flags.defer_taskrun = false;
                    } else if try_flags.single_issuer {
                        try_flags.single_issuer = false;
                    } else if try_flags.coop_taskrun {
                        try_flags.coop_taskrun = false;
                    } else if try_flags.big_entries {
                        return Err(Error::UnsupportedRingFlag {
                            flag: "SQE128/CQE32",
                            hint: "NVMe passthrough needs Linux 5.19 or newer; use the zbd: backend on this kernel",
                            source: e,
                        });
                    } else if try_flags.sqpoll_idle_ms.is_some() {
                        return Err(Error::UnsupportedRingFlag {
                            flag: "SQPOLL",
                            hint: "run without Builder::sqpoll, or on a kernel that allows SQPOLL for this user",
                            source: e,
                        });
                    } else {
                        return Err(Error::IoUringUnavailable { source: e });
                    }
                }
                Err(e) => return Err(Error::IoUringUnavailable { source: e }),
            }
        }
    }

    /// `spins`: the core has an idle spin, which asks for `IORING_SETUP_TASKRUN_FLAG` (see
    /// `reports_taskrun`); without one the ring is set up exactly as before the spin existed.
    fn try_new(
        entries: u32,
        flags: &RingFlags,
        simulate: &RingFlags,
        spins: bool,
    ) -> io::Result<Ring> {
        if simulated_refusal(flags, simulate) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        macro_rules! configure {
            ($b:expr) => {{
                let mut b = $b;
                if let Some(idle) = flags.sqpoll_idle_ms {
                    b.setup_sqpoll(idle);
                }
                if flags.single_issuer {
                    b.setup_single_issuer();
                }
                if flags.defer_taskrun {
                    b.setup_defer_taskrun();
                }
                if flags.coop_taskrun {
                    b.setup_coop_taskrun();
                }
                if spins && reports_taskrun(flags) {
                    b.setup_taskrun_flag();
                }
                b.setup_cqsize(entries * 4);
                b.build(entries)
            }};
        }
        if flags.big_entries {
            Ok(Ring::Big(configure!(IoUring::<
                squeue::Entry128,
                cqueue::Entry32,
            >::builder())?))
        } else {
            Ok(Ring::Normal(configure!(IoUring::builder())?))
        }
    }

    /// Whether the kernel keeps completions that do not fit the CQ (`IORING_FEAT_NODROP`).
    fn has_nodrop(&self) -> bool {
        match self {
            Ring::Normal(r) => r.params().is_feature_nodrop(),
            Ring::Big(r) => r.params().is_feature_nodrop(),
        }
    }

    fn sq_entries(&self) -> u32 {
        match self {
            Ring::Normal(r) => r.params().sq_entries(),
            Ring::Big(r) => r.params().sq_entries(),
        }
    }

    pub(crate) fn is_big(&self) -> bool {
        matches!(self, Ring::Big(_))
    }

    /// Pushes one entry; returns it back when the submission queue is full.
    ///
    /// # Safety
    /// Every buffer and pointer the entry refers to must stay valid until its completion is
    /// reaped (the op table guarantees this by owning them).
    #[inline(always)]
    pub(crate) unsafe fn push(&mut self, sqe: Sqe) -> std::result::Result<(), Sqe> {
        match (self, sqe) {
            (Ring::Normal(r), Sqe::Normal(e)) => {
                // SAFETY: forwarded from the caller's contract.
                unsafe { r.submission().push(&e) }.map_err(|_| Sqe::Normal(e))
            }
            (Ring::Big(r), Sqe::Normal(e)) => {
                let big: squeue::Entry128 = e.into();
                // SAFETY: forwarded from the caller's contract.
                unsafe { r.submission().push(&big) }.map_err(|_| Sqe::Big(Box::new(big)))
            }
            (Ring::Big(r), Sqe::Big(e)) => {
                // SAFETY: forwarded from the caller's contract.
                unsafe { r.submission().push(&e) }.map_err(|_| Sqe::Big(e))
            }
            (Ring::Normal(_), Sqe::Big(_)) => {
                unreachable!("big entries are rejected before they reach a normal ring")
            }
        }
    }

    /// Number of queued entries not yet handed to the kernel.
    pub(crate) fn sq_pending(&mut self) -> usize {
        match self {
            Ring::Normal(r) => r.submission().len(),
            Ring::Big(r) => r.submission().len(),
        }
    }

    /// Number of completions posted and not yet reaped.
    pub(crate) fn cq_ready(&mut self) -> usize {
        match self {
            Ring::Normal(r) => r.completion().len(),
            Ring::Big(r) => r.completion().len(),
        }
    }

    /// Whether completions wait in the kernel for an `io_uring_enter` (with
    /// `IORING_ENTER_GETEVENTS`) to post them: task work is pending (`IORING_SQ_TASKRUN`, set
    /// on rings with cooperative or deferred task running, see `reports_taskrun`) or the CQ
    /// overflowed. On other rings the kernel posts completions without being entered.
    #[inline]
    pub(crate) fn kernel_work_pending(&mut self) -> bool {
        match self {
            Ring::Normal(r) => {
                let sq = r.submission();
                sq.taskrun() || sq.cq_overflow()
            }
            Ring::Big(r) => {
                let sq = r.submission();
                sq.taskrun() || sq.cq_overflow()
            }
        }
    }

    /// Submits queued entries and, if `wait`, blocks until at least one completion exists.
    /// `getevents` forces the kernel to run deferred completion work.
    pub(crate) fn enter(&mut self, wait: bool, getevents: bool) -> io::Result<usize> {
        let pending = self.sq_pending() as u32;
        let submitter = match self {
            Ring::Normal(r) => r.submitter(),
            Ring::Big(r) => r.submitter(),
        };
        let res = if wait {
            submitter.submit_and_wait(1)
        } else if getevents {
            // SAFETY: the queued entries were pushed under `push`'s contract; the call passes
            // no argument pointer. GETEVENTS makes a DEFER_TASKRUN ring post its completions.
            unsafe { submitter.enter::<libc::sigset_t>(pending, 0, IORING_ENTER_GETEVENTS, None) }
        } else {
            submitter.submit()
        };
        // EINTR: a signal; ETIME: a wait's timeout. Every other error goes to the caller
        // (`Core::enter` decides whether it is transient).
        match res {
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(0),
            Err(e) if e.raw_os_error() == Some(libc::ETIME) => Ok(0),
            other => other,
        }
    }

    /// Takes the oldest posted completion off the CQ, if any, with its user data.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<(u64, Completion)> {
        match self {
            Ring::Normal(r) => r.completion().next().map(|cqe| {
                (
                    cqe.user_data(),
                    Completion {
                        result: cqe.result(),
                        flags: cqe.flags(),
                        big: [0, 0],
                    },
                )
            }),
            Ring::Big(r) => r.completion().next().map(|cqe| {
                (
                    cqe.user_data(),
                    Completion {
                        result: cqe.result(),
                        flags: cqe.flags(),
                        big: *cqe.big_cqe(),
                    },
                )
            }),
        }
    }

    /// Registers `iovecs` as fixed buffers.
    ///
    /// # Safety
    /// The memory behind every iovec must stay valid and unmoved while the ring exists.
    pub(crate) unsafe fn register_buffers(&self, iovecs: &[libc::iovec]) -> io::Result<()> {
        // SAFETY: forwarded from the caller's contract.
        unsafe {
            match self {
                Ring::Normal(r) => r.submitter().register_buffers(iovecs),
                Ring::Big(r) => r.submitter().register_buffers(iovecs),
            }
        }
    }

    /// Registers a sparse file table of `slots` entries.
    pub(crate) fn register_files_sparse(&self, slots: u32) -> io::Result<()> {
        match self {
            Ring::Normal(r) => r.submitter().register_files_sparse(slots),
            Ring::Big(r) => r.submitter().register_files_sparse(slots),
        }
    }

    /// Puts `fd` into fixed file slot `slot`.
    pub(crate) fn register_file_at(&self, slot: u32, fd: RawFd) -> io::Result<()> {
        match self {
            Ring::Normal(r) => r.submitter().register_files_update(slot, &[fd]).map(|_| ()),
            Ring::Big(r) => r.submitter().register_files_update(slot, &[fd]).map(|_| ()),
        }
    }

    /// Empties fixed file slot `slot`.
    pub(crate) fn unregister_file_at(&self, slot: u32) -> io::Result<()> {
        self.register_file_at(slot, -1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_without_nodrop_is_refused_with_a_clear_error() {
        check_nodrop(true).unwrap();
        let msg = check_nodrop(false).unwrap_err().to_string();
        assert!(msg.contains("IORING_FEAT_NODROP"), "{msg}");
        // This kernel has it: a ring builds.
        Ring::new(&Config::default()).unwrap();
    }
}
