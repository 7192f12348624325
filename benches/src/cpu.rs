//! CPU time from `getrusage` (user + system).

use std::time::Duration;

/// CPU time consumed so far, user and system.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTime {
    /// Time in user mode.
    pub user: Duration,
    /// Time in the kernel on behalf of the caller.
    pub system: Duration,
}

impl CpuTime {
    /// User plus system time.
    pub fn total(&self) -> Duration {
        self.user + self.system
    }
    /// `self - earlier`, saturating at zero.
    pub fn since(&self, earlier: &CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }
}

fn timeval(tv: libc::timeval) -> Duration {
    Duration::new(tv.tv_sec as u64, (tv.tv_usec as u32) * 1000)
}

fn rusage(who: libc::c_int) -> CpuTime {
    // SAFETY: rusage is plain data; getrusage writes into the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage; `who` is RUSAGE_SELF or RUSAGE_THREAD.
    let rc = unsafe { libc::getrusage(who, &mut ru) };
    assert_eq!(
        rc,
        0,
        "getrusage failed: {}",
        std::io::Error::last_os_error()
    );
    CpuTime {
        user: timeval(ru.ru_utime),
        system: timeval(ru.ru_stime),
    }
}

/// CPU time of the whole process (every thread, including io_uring workers and threads that
/// have exited).
pub fn process() -> CpuTime {
    rusage(libc::RUSAGE_SELF)
}

/// CPU time of the calling thread.
pub fn thread() -> CpuTime {
    rusage(libc::RUSAGE_THREAD)
}
