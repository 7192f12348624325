//! The plugin's errors and their codes across the C ABI (each becomes a RocksDB `IOStatus`).

use ziob_zonefs::FsError;

use crate::uri::UriError;

/// Status code: success.
pub const ZIOB_OK: i32 = 0;
/// Status code: no such file or directory (`IOStatus::NotFound`).
pub const ZIOB_NOT_FOUND: i32 = 1;
/// Status code: out of space (`IOStatus::NoSpace`).
pub const ZIOB_NO_SPACE: i32 = 2;
/// Status code: any other I/O failure (`IOStatus::IOError`).
pub const ZIOB_IO_ERROR: i32 = 3;
/// Status code: a device with foreign or damaged contents (`IOStatus::Corruption`).
pub const ZIOB_CORRUPTION: i32 = 4;
/// Status code: bad URI, path or options (`IOStatus::InvalidArgument`).
pub const ZIOB_INVALID_ARGUMENT: i32 = 5;

/// A failed plugin call, sorted by the `IOStatus` it becomes.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// No such file or directory.
    #[error("{0}")]
    NotFound(String),
    /// Out of space.
    #[error("{0}")]
    NoSpace(String),
    /// The device holds something that is not a usable zone file system.
    #[error("{0}")]
    Corruption(String),
    /// Bad URI, path or options.
    #[error("{0}")]
    InvalidArgument(String),
    /// Any other failure.
    #[error("{0}")]
    Io(String),
}

impl PluginError {
    /// The error of a zonefs call on device `spec` (mount and format errors name the device).
    pub fn from_fs(e: FsError, spec: &str) -> PluginError {
        let msg = format!("ziob {spec}: {e}");
        match e {
            FsError::Foreign { .. } | FsError::DeviceInUse { .. } => PluginError::Corruption(
                format!("{msg} (the plugin never formats a device that holds other data)"),
            ),
            other => {
                let mut p = PluginError::from(other);
                p.set_message(msg);
                p
            }
        }
    }

    fn set_message(&mut self, msg: String) {
        match self {
            PluginError::NotFound(m)
            | PluginError::NoSpace(m)
            | PluginError::Corruption(m)
            | PluginError::InvalidArgument(m)
            | PluginError::Io(m) => *m = msg,
        }
    }

    /// The status code of this error.
    pub fn code(&self) -> i32 {
        match self {
            PluginError::NotFound(_) => ZIOB_NOT_FOUND,
            PluginError::NoSpace(_) => ZIOB_NO_SPACE,
            PluginError::Corruption(_) => ZIOB_CORRUPTION,
            PluginError::InvalidArgument(_) => ZIOB_INVALID_ARGUMENT,
            PluginError::Io(_) => ZIOB_IO_ERROR,
        }
    }
}

impl From<FsError> for PluginError {
    fn from(e: FsError) -> Self {
        let msg = format!("ziob: {e}");
        match e {
            FsError::NotFound(_) => PluginError::NotFound(msg),
            FsError::NoSpace(_) => PluginError::NoSpace(msg),
            FsError::Foreign { .. }
            | FsError::Corrupt { .. }
            | FsError::GeometryMismatch { .. }
            | FsError::DeviceInUse { .. } => PluginError::Corruption(msg),
            FsError::InvalidPath { .. } | FsError::Config(_) => PluginError::InvalidArgument(msg),
            _ => PluginError::Io(msg),
        }
    }
}

impl From<UriError> for PluginError {
    fn from(e: UriError) -> Self {
        PluginError::InvalidArgument(e.to_string())
    }
}
