//! What access a command needs to its device, and the one place the CLI opens devices.

use ziob_backends::{open_device, AnyDevice, DeviceError};

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
        // TODO(merge fix-emu): open emu read-only (O_RDONLY, shared lock) — replace this arm
        // with
        //     Access::ReadOnly => match DeviceSpec::parse(spec)? {
        //         DeviceSpec::Emu { path, latency } => Ok(AnyDevice::Emu(
        //             EmuDevice::open_read_only(&path, latency).await?,
        //         )),
        //         _ => open_device(spec).await,
        //     },
        // and remove the `#[ignore]` of tests/cli_read_only.rs. Until then every backend
        // opens read-write, so a read-only emu file fails with "Permission denied".
        Access::ReadOnly => open_device(spec).await,
    }
}
