//! [`AnyDevice`]: one type for every backend, chosen at run time from a device spec.

use ziob_runtime::DmaBuf;

use crate::device::ZonedDevice;
use crate::emu::{EmuDevice, OpenMode, TableRecovery};
use crate::mem::MemDevice;
use crate::model::error::{DeviceError, Result};
use crate::model::geometry::Geometry;
use crate::model::spec::DeviceSpec;
use crate::model::zone::{ZoneAction, ZoneInfo, ZoneTarget};
use crate::nil::NilDevice;
use crate::nvme::NvmeDevice;
use crate::zbd::ZbdDevice;

/// A device of any built-in backend. New backends join as new variants.
#[derive(Clone)]
pub enum AnyDevice {
    /// `mem:`
    Mem(MemDevice),
    /// `emu:`
    Emu(EmuDevice),
    /// `nil:`
    Nil(NilDevice),
    /// `spdk:` (cargo feature `spdk`)
    #[cfg(feature = "spdk")]
    Spdk(crate::spdk::SpdkDevice),
    /// `zbd:`
    Zbd(ZbdDevice),
    /// `nvme:` (needs a runtime with 128-byte SQEs, see [`crate::runtime_builder_for`])
    Nvme(NvmeDevice),
}

/// Opens the device a spec names (see [`DeviceSpec`]). `mem` and `nil` devices are new and
/// empty; `emu` opens an existing file (see [`create_device`]); `zbd` opens a kernel zoned
/// block device as it is (its zones keep their state and data).
pub async fn open_device(spec: &str) -> Result<AnyDevice> {
    match DeviceSpec::parse(spec)? {
        DeviceSpec::Mem(g) => Ok(AnyDevice::Mem(MemDevice::new(spec, &g)?)),
        DeviceSpec::Nil(g) => Ok(AnyDevice::Nil(NilDevice::new(spec, &g)?)),
        DeviceSpec::Emu {
            path,
            latency,
            discard,
            direct,
            zero_ahead,
            write_behind,
        } => Ok(AnyDevice::Emu(
            EmuDevice::open_named(
                &path,
                latency,
                spec.to_string(),
                OpenMode::ReadWrite,
                direct,
            )
            .await?
            .discard_on_reset(discard)
            .zero_ahead(zero_ahead)
            .write_behind(write_behind),
        )),
        DeviceSpec::Zbd(path) => Ok(AnyDevice::Zbd(ZbdDevice::open(&path, spec).await?)),
        DeviceSpec::Nvme(path) => Ok(AnyDevice::Nvme(NvmeDevice::open(&path, spec).await?)),
        #[cfg(feature = "spdk")]
        DeviceSpec::Spdk(rest) => Ok(AnyDevice::Spdk(
            crate::spdk::SpdkDevice::open(spec, &rest).await?,
        )),
        #[cfg(not(feature = "spdk"))]
        DeviceSpec::Spdk(_) => Err(DeviceError::Unsupported {
            backend: "spdk".into(),
        }),
    }
}

/// Opens the device a spec names for reports and reads only. An `emu` file is opened
/// read-only ([`OpenMode::ReadOnly`]: it needs only read permission, takes a shared lock so
/// other readers may share it, and refuses writes, appends and zone actions); every other
/// backend opens as with [`open_device`].
pub async fn open_device_read_only(spec: &str) -> Result<AnyDevice> {
    match DeviceSpec::parse(spec)? {
        DeviceSpec::Emu {
            path,
            latency,
            direct,
            ..
        } => Ok(AnyDevice::Emu(
            EmuDevice::open_named(&path, latency, spec.to_string(), OpenMode::ReadOnly, direct)
                .await?,
        )),
        _ => open_device(spec).await,
    }
}

/// Creates a persistent device of `geometry` (only `emu` creates anything: its file must not
/// exist yet) and opens it with the spec's options.
pub async fn create_device(spec: &str, geometry: &Geometry) -> Result<AnyDevice> {
    match DeviceSpec::parse(spec)? {
        DeviceSpec::Emu { path, .. } => {
            drop(EmuDevice::create(&path, geometry).await?);
            open_device(spec).await
        }
        _ => Err(DeviceError::InvalidSpec {
            spec: spec.to_string(),
            reason: "only emu devices are created; mem and nil take their geometry from the spec"
                .into(),
        }),
    }
}

impl AnyDevice {
    /// For an `emu` device whose open found a damaged zone-table slot and used the other one:
    /// what happened (see [`EmuDevice::recovery`]); a tool should print it. `None` otherwise.
    pub fn table_recovery(&self) -> Option<&TableRecovery> {
        match self {
            AnyDevice::Emu(d) => d.recovery(),
            _ => None,
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $d:ident => $e:expr) => {
        match $self {
            AnyDevice::Mem($d) => $e,
            AnyDevice::Emu($d) => $e,
            AnyDevice::Nil($d) => $e,
            #[cfg(feature = "spdk")]
            AnyDevice::Spdk($d) => $e,
            AnyDevice::Zbd($d) => $e,
            AnyDevice::Nvme($d) => $e,
        }
    };
}

impl ZonedDevice for AnyDevice {
    fn geometry(&self) -> &Geometry {
        dispatch!(self, d => d.geometry())
    }

    fn name(&self) -> &str {
        dispatch!(self, d => d.name())
    }

    fn ordered_writes_in_flight(&self) -> u32 {
        dispatch!(self, d => d.ordered_writes_in_flight())
    }

    fn read_granularity_bytes(&self) -> u64 {
        dispatch!(self, d => d.read_granularity_bytes())
    }

    fn read_now(&self, zone: u32, offset_bytes: u64, len: usize) -> Option<Result<Vec<u8>>> {
        dispatch!(self, d => d.read_now(zone, offset_bytes, len))
    }

    fn read_now_into<'a>(
        &self,
        zone: u32,
        offset_bytes: u64,
        out: &'a mut [std::mem::MaybeUninit<u8>],
    ) -> Option<Result<&'a mut [u8]>> {
        dispatch!(self, d => d.read_now_into(zone, offset_bytes, out))
    }

    async fn report_zones(&self, first: u32, count: u32) -> Result<Vec<ZoneInfo>> {
        dispatch!(self, d => d.report_zones(first, count).await)
    }

    async fn read(
        &self,
        zone: u32,
        offset_bytes: u64,
        len: usize,
        buf: DmaBuf,
    ) -> (Result<()>, DmaBuf) {
        dispatch!(self, d => d.read(zone, offset_bytes, len, buf).await)
    }

    async fn write(&self, zone: u32, offset_bytes: u64, buf: DmaBuf) -> (Result<()>, DmaBuf) {
        dispatch!(self, d => d.write(zone, offset_bytes, buf).await)
    }

    async fn append(&self, zone: u32, buf: DmaBuf) -> (Result<u64>, DmaBuf) {
        dispatch!(self, d => d.append(zone, buf).await)
    }

    async fn zone_action(&self, action: ZoneAction, target: ZoneTarget) -> Result<()> {
        dispatch!(self, d => d.zone_action(action, target).await)
    }

    async fn flush(&self) -> Result<()> {
        dispatch!(self, d => d.flush().await)
    }

    async fn write_durable(
        &self,
        zone: u32,
        offset_bytes: u64,
        buf: DmaBuf,
    ) -> (Result<()>, DmaBuf) {
        dispatch!(self, d => d.write_durable(zone, offset_bytes, buf).await)
    }

    fn has_durable_writes(&self) -> bool {
        dispatch!(self, d => d.has_durable_writes())
    }
}
