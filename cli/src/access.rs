//! What access a command needs to its device, and the one place the CLI opens devices.

use ziob_backends::{open_device, open_device_read_only, AnyDevice, DeviceError};

/// The access a command needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Only reads data and zone state (`info`, `report`, `read`): read permission suffices,
    /// and other readers may use the device at the same time.
    ReadOnly,
    /// Writes data or changes zone state.
    ReadWrite,
}

/// Opens the device named by `spec` for `access`.
pub async fn open(spec: &str, access: Access) -> Result<AnyDevice, DeviceError> {
    match access {
        Access::ReadWrite => open_device(spec).await,
        // emu: O_RDONLY with a shared lock, so read permission suffices and other readers
        // may use the file at the same time; other backends open as for writing.
        Access::ReadOnly => open_device_read_only(spec).await,
    }
}
