//! # ziob-backends: zoned devices for ZIOB
//!
//! The [`ZonedDevice`] trait models an NVMe Zoned Namespace: zones addressed by index, writes
//! only at the write pointer, Zone Append, zone management (open, close, finish, reset) and
//! open/active resource limits, each refusal a typed [`DeviceError`] carrying the zone, the
//! position in blocks and the NVMe status a real device would return.
//!
//! One state machine, [`ZoneTable`], implements the zone states and transitions for every
//! backend that tracks state itself:
//! - [`mem`]: zones in RAM, with deterministic fault injection and simulated power loss;
//! - [`emu`]: a file-backed emulated device with a persistent, checksummed zone table (the
//!   default backend; format in `docs/format.md`);
//! - [`nil`]: tracks state, moves no data (to measure ZIOB's own per-op cost);
//! - [`zbd`]: a Linux zoned block device (NVMe ZNS namespace, zoned null_blk, SMR disk)
//!   through O_DIRECT io_uring I/O and the zone ioctls;
//! - [`nvme`]: a real ZNS namespace through NVMe passthrough (`/dev/ngXnY`; the runtime needs
//!   128-byte SQEs, see [`runtime_builder_for`]).
//!
//! Devices are opened from a spec string ([`DeviceSpec`]) with [`open_device`], which returns
//! an [`AnyDevice`] dispatching to the backend:
//!
//! ```
//! use ziob_backends::{open_device, ZoneAction, ZoneTarget, ZonedDevice};
//! use ziob_runtime::{DmaBuf, Runtime};
//! let rt = Runtime::builder().cores(1).build().unwrap();
//! rt.block_on(|| async {
//!     let dev = open_device("mem:zones=4,zone_size=1M").await.unwrap();
//!     let (res, _) = dev.write(0, 0, DmaBuf::from_slice(&[7; 4096])).await;
//!     res.unwrap();
//!     let (off, _) = dev.append(0, DmaBuf::from_slice(&[8; 4096])).await;
//!     assert_eq!(off.unwrap(), 4096);
//!     dev.zone_action(ZoneAction::Reset, ZoneTarget::All).await.unwrap();
//! })
//! .unwrap();
//! ```
#![warn(missing_docs)]

pub mod any;
pub mod device;
pub mod emu;
pub mod limits;
pub mod mem;
pub mod model;
pub mod nil;
pub mod nvme;
#[cfg(feature = "spdk")]
pub mod spdk;
pub mod zbd;

pub use any::{create_device, open_device, open_device_read_only, AnyDevice};
pub use device::ZonedDevice;
pub use emu::{EmuDevice, OpenMode, TableRecovery};
pub use mem::{Fault, MemDevice};
pub use model::error::{Boundary, DeviceError, ErrorKind, IoOp, Result};
pub use model::geometry::Geometry;
pub use model::spec::{parse_size_bytes, DeviceSpec, LatencyModel};
pub use model::state::{
    check_write_position, check_write_target, Reservation, WriteFate, ZoneTable,
};
pub use model::zone::{PersistedZone, ZoneAction, ZoneInfo, ZoneState, ZoneTarget};
pub use nil::NilDevice;
pub use nvme::{runtime_builder_for, spec_needs_sqe128, NvmeDevice};
#[cfg(feature = "spdk")]
pub use spdk::SpdkDevice;
pub use zbd::ZbdDevice;
