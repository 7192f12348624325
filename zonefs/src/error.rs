//! The typed errors of the zone file layer.

use ziob::ZiobError;

/// What can go wrong in a zone file system call.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The ZIOB instance below failed (device error, closed instance, ...).
    #[error(transparent)]
    Ziob(#[from] ZiobError),
    /// A path that is not a valid file path.
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// No file at this path.
    #[error("no such file: {0}")]
    NotFound(String),
    /// `create` of a path that already names a file.
    #[error("file exists: {0}")]
    AlreadyExists(String),
    /// The device has no zonefs journal (all reserved zones are empty): run `mkfs` first.
    #[error("no zone file system on this device (the reserved zones are empty); format it first")]
    NotFormatted,
    /// The reserved zones hold something that is not a zonefs journal.
    #[error("the device holds something else (not a zone file system): {reason}")]
    Foreign {
        /// What was found.
        reason: String,
    },
    /// A zonefs superblock was found but its journal cannot be read back.
    #[error("the zone file system is corrupt: {reason}")]
    Corrupt {
        /// What is wrong.
        reason: String,
    },
    /// The superblock was written for another device geometry.
    #[error("the file system was made for another geometry: {reason}")]
    GeometryMismatch {
        /// Which field differs.
        reason: String,
    },
    /// `mkfs` found a zone file system or other data and was not forced.
    #[error("the device is not empty ({found}); pass force to format it anyway")]
    DeviceInUse {
        /// What was found.
        found: String,
    },
    /// Bad options or a device unfit for the layer (too few zones, limits too low).
    #[error("unusable configuration: {0}")]
    Config(String),
    /// No free zone is left for data and garbage collection cannot free one (every written
    /// zone is (nearly) all live data), or the metadata does not fit one reserved zone.
    #[error("out of space: {0}")]
    NoSpace(String),
    /// A write to a file system mounted read-only ([`ZoneFs::mount_read_only`](crate::ZoneFs::mount_read_only)).
    #[error("the file system is mounted read-only ({op} refused)")]
    ReadOnly {
        /// The refused operation.
        op: &'static str,
    },
}

/// Result of a zone file system call.
pub type Result<T> = std::result::Result<T, FsError>;
