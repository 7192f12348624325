//! Why a `ziob fs` command failed.

use ziob::backends::DeviceError;
use ziob::ZiobError;
use ziob_zonefs::FsError;

/// Why a `ziob fs` command failed (exit status 1).
#[derive(Debug, thiserror::Error)]
pub enum FsCmdError {
    /// The file system layer refused or failed.
    #[error(transparent)]
    Fs(#[from] FsError),
    /// The ZIOB instance failed.
    #[error(transparent)]
    Ziob(#[from] ZiobError),
    /// The device could not be opened.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// `mkfs` without `--force` on a device that holds data.
    #[error("{dev} is not empty ({found}); `ziob fs mkfs --force {dev}` erases everything on it")]
    InUse {
        /// The device spec.
        dev: String,
        /// What mkfs found on it.
        found: String,
    },
    /// The device has no zone file system.
    #[error("no zone file system on {0} (its journal zones are empty); format it with `ziob fs mkfs {0}`")]
    NotFormatted(String),
    /// `ls` of a path that is neither a file nor a directory.
    #[error("no such file or directory: {0}")]
    NoSuchPath(String),
    /// stdout failed.
    #[error("writing stdout: {0}")]
    Stdout(std::io::Error),
    /// The runtime could not start or stopped.
    #[error("runtime: {0}")]
    Runtime(String),
}

impl FsCmdError {
    /// The error of `mkfs` on `dev`.
    pub fn mkfs(e: FsError, dev: &str) -> FsCmdError {
        match e {
            FsError::DeviceInUse { found } => FsCmdError::InUse {
                dev: dev.to_string(),
                found,
            },
            e => FsCmdError::Fs(e),
        }
    }

    /// The error of mounting `dev`.
    pub fn mount(e: FsError, dev: &str) -> FsCmdError {
        match e {
            FsError::NotFormatted => FsCmdError::NotFormatted(dev.to_string()),
            e => FsCmdError::Fs(e),
        }
    }

    /// Whether this says the file system on the device is damaged (what `fsck` reports as
    /// inconsistent), rather than that it could not be looked at.
    pub fn is_inconsistency(&self) -> bool {
        matches!(
            self,
            FsCmdError::Fs(FsError::Corrupt { .. } | FsError::GeometryMismatch { .. })
        )
    }

    /// The process exit status for this error.
    pub fn exit_code(&self) -> i32 {
        1
    }
}
