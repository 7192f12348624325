//! Errors of the runtime: every failure names the operation and carries the errno.

use std::io;

/// Result alias used throughout the runtime.
pub type Result<T> = std::result::Result<T, Error>;

/// An error of the runtime: ring setup, buffer registration or one I/O operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An io_uring operation completed with an error.
    #[error("{op} failed: {source}")]
    Io {
        /// The operation, e.g. `read`, `write`, `fsync`, `uring_cmd`.
        op: &'static str,
        /// The errno the kernel returned.
        #[source]
        source: io::Error,
    },
    /// The kernel refused to create an io_uring instance at all.
    #[error("io_uring is not available: {source}. ZIOB needs Linux 5.19 or newer with io_uring enabled (check /proc/sys/kernel/io_uring_disabled, seccomp filters and container profiles)")]
    IoUringUnavailable {
        /// The errno of `io_uring_setup`.
        #[source]
        source: io::Error,
    },
    /// A ring setup flag that was required is not supported by this kernel.
    #[error("ring flag {flag} is not supported by this kernel ({source}); {hint}")]
    UnsupportedRingFlag {
        /// The flag's name, e.g. `SQE128`.
        flag: &'static str,
        /// What to change.
        hint: &'static str,
        /// The errno of `io_uring_setup`.
        #[source]
        source: io::Error,
    },
    /// Registering fixed buffers failed because locked memory is limited.
    #[error("registering {bytes} bytes of fixed buffers failed: {source}. Raise RLIMIT_MEMLOCK (`ulimit -l`, currently {limit_bytes} bytes) or run without fixed buffers (Builder::fixed_buffers(0, _))")]
    MemlockTooSmall {
        /// Bytes we tried to register.
        bytes: usize,
        /// The current RLIMIT_MEMLOCK soft limit in bytes (u64::MAX = unlimited).
        limit_bytes: u64,
        /// The errno of the registration.
        #[source]
        source: io::Error,
    },
    /// A configuration value is out of range.
    #[error("invalid runtime configuration: {0}")]
    InvalidConfig(String),
    /// Starting a core's thread failed.
    #[error("failed to start core {core}: {source}")]
    Spawn {
        /// The core index.
        core: usize,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A core was shut down before it answered.
    #[error("core {0} is not running")]
    CoreGone(usize),
    /// A core stopped after a fatal error (a failed `io_uring_enter`, a panic in its loop);
    /// it takes no more work, and what it was running was dropped.
    #[error("core {core} stopped after a fatal error: {reason}")]
    CoreDead {
        /// The core index.
        core: usize,
        /// What killed it.
        reason: String,
    },
    /// The ring lacks a kernel feature ZIOB relies on.
    #[error("io_uring lacks {feature}: {why}. ZIOB needs Linux 5.19 or newer")]
    MissingRingFeature {
        /// The feature flag, e.g. `IORING_FEAT_NODROP`.
        feature: &'static str,
        /// What ZIOB needs it for.
        why: &'static str,
    },
    /// The operation needs a ring created with SQE128/CQE32.
    #[error("{op} needs a ring with 128-byte SQEs; build the runtime with Builder::sqe128(true)")]
    NeedsBigRing {
        /// The operation.
        op: &'static str,
    },
    /// The call was made outside a runtime core thread.
    #[error("{0} must be called from a ZIOB runtime core")]
    NotOnCore(&'static str),
}

impl Error {
    /// Builds an [`Error::Io`] from an io_uring result code (`-errno`).
    pub fn from_errno(op: &'static str, neg_errno: i32) -> Self {
        Error::Io {
            op,
            source: io::Error::from_raw_os_error(-neg_errno),
        }
    }

    /// The raw OS errno, when the error carries one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            Error::Io { source, .. }
            | Error::IoUringUnavailable { source }
            | Error::UnsupportedRingFlag { source, .. }
            | Error::MemlockTooSmall { source, .. } => source.raw_os_error(),
            Error::Spawn { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        match e.raw_os_error() {
            Some(code) => io::Error::new(io::Error::from_raw_os_error(code).kind(), e),
            None => io::Error::other(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_error_names_op_and_errno() {
        let e = Error::from_errno("read", -libc::EBADF);
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
        let msg = e.to_string();
        assert!(msg.starts_with("read failed: Bad file descriptor"), "{msg}");
    }

    #[test]
    fn memlock_error_says_what_to_change() {
        let e = Error::MemlockTooSmall {
            bytes: 1 << 20,
            limit_bytes: 8192,
            source: io::Error::from_raw_os_error(libc::ENOMEM),
        };
        let msg = e.to_string();
        assert!(msg.contains("RLIMIT_MEMLOCK"), "{msg}");
        assert!(msg.contains("8192"), "{msg}");
    }
}
