//! `nvme`: NVMe passthrough over io_uring on a generic char device (`nvme:/dev/ngXnY`).
//!
//! Every data and zone command is an NVMe command sent with `IORING_OP_URING_CMD`
//! ([`ziob_runtime::uring_cmd`]), so the ring of the core that issues it must have 128-byte
//! SQEs and 32-byte CQEs: build the runtime with [`runtime_builder_for`] (or
//! `Runtime::builder().sqe128(true)`); [`NvmeDevice::open`] refuses to open on a core whose
//! ring lacks them. Zone Append is native (the LBA it landed at comes back in the 32-byte CQE).
//!
//! The device is the state machine: no zone state is mirrored. Reports come from Zone
//! Management Receive; a command that fails comes back with the device's NVMe status, passed
//! through as the typed [`DeviceError`] ([`status`]), with the write pointer or state the
//! error names read by a Zone Management Receive after the failure. The host checks only what
//! the device would never see (buffer sizes, alignment, zone indexes past the end) and what it
//! must check to keep a split command all-or-nothing.
//!
//! ## Transfer limits
//! Passthrough commands are never split by the kernel: one command must fit MDTS (Identify
//! Controller) and the block queue's `max_hw_sectors_kb` and `max_segments` (sysfs of the
//! matching `nvmeXnY`; a 512 KiB write through `/dev/ng0n1` fails with EINVAL under QEMU with
//! 127 segments). Reads and writes larger than that are split into several commands; a split
//! write that would cross the zone capacity is refused before anything is sent. Appends are
//! one command each, so they are limited to the smaller of ZASL and the transfer limit
//! ([`Geometry::max_append_bytes`]).
//!
//! ## Durability
//! [`ZonedDevice::flush`] is the NVMe Flush command; [`ZonedDevice::write_durable`] sets Force
//! Unit Access on each Write command, so its data is durable when it completes without a
//! flush (on a device without a volatile write cache the Flush does nothing and FUA adds
//! nothing).
//!
//! Opening a device runs a few Identify admin ioctls, which block the calling thread briefly.

pub mod cmd;
pub mod identify;
pub mod status;
pub mod zone;

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ziob_runtime::{DmaBuf, IoBuf, IoBufMut};

use crate::device::{check_read_buf, ZonedDevice};
use crate::limits::{NVME_PASSTHRU_TRANSFER_BYTES_FALLBACK, NVME_SEGMENT_BYTES};
use crate::model::error::{DeviceError, IoOp, Result};
use crate::model::geometry::Geometry;
use crate::model::state::{capacity_crossing_refusal, ZoneAction, ZoneInfo, ZoneState, ZoneTarget};
use cmd::NvmeCmd;
use identify::{Cns, CSI_ZNS};
use status::{IoContext, NvmeStatus};

/// Whether a device spec needs a runtime with 128-byte SQEs (NVMe passthrough).
pub fn spec_needs_sqe128(spec: &str) -> bool {
    spec.trim_start().starts_with("nvme:")
}

/// A runtime builder able to drive devices of `spec`: `sqe128(true)` for `nvme:` specs, the
/// default builder otherwise. Add cores and other options as usual.
pub fn runtime_builder_for(spec: &str) -> ziob_runtime::Builder {
    ziob_runtime::Runtime::builder().sqe128(spec_needs_sqe128(spec))
}

struct NvmeInner {
    name: String,
    /// The generic char device; every command holds a reference to it until its completion,
    /// so a command still queued when the device is dropped never reaches a closed fd.
    file: ziob_runtime::File,
    nsid: u32,
    geometry: Geometry,
    zone_size_blocks: u64,
    zdes_bytes: usize,
    max_transfer_bytes: u64,
}

/// A ZNS namespace driven through NVMe passthrough. Clones share the device.
#[derive(Clone)]
pub struct NvmeDevice {
    inner: Arc<NvmeInner>,
}

/// Why a command did not succeed: the device's status, or a host-side error.
enum Failure {
    Status(NvmeStatus),
    Host(DeviceError),
}

fn os_err(name: &str, what: &str, e: std::io::Error) -> DeviceError {
    DeviceError::io(format!("{name}: {what}"), e)
}

/// The sysfs queue directory of the block device matching a char device `ngXnY`.
fn queue_dir(path: &Path) -> Option<PathBuf> {
    let file = path.file_name()?.to_str()?;
    let rest = file.strip_prefix("ng")?;
    Some(PathBuf::from(format!("/sys/block/nvme{rest}/queue")))
}

fn read_sysfs_u64(dir: &Path, name: &str) -> Option<u64> {
    std::fs::read_to_string(dir.join(name))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Largest transfer of one passthrough command in bytes: MDTS, `max_hw_sectors_kb` and
/// `max_segments` (one 4 KiB page per segment, one page spare for an unaligned window start),
/// or the fallback when sysfs does not say; rounded down to the block size.
fn max_transfer_bytes(path: &Path, mdts_bytes: Option<u64>, block_size_bytes: u64) -> u64 {
    let queue = queue_dir(path);
    let hw = queue
        .as_deref()
        .and_then(|q| read_sysfs_u64(q, "max_hw_sectors_kb"))
        .map(|kb| kb * 1024);
    let segs = queue
        .as_deref()
        .and_then(|q| read_sysfs_u64(q, "max_segments"))
        .map(|n| n.saturating_sub(1).max(1) * NVME_SEGMENT_BYTES);
    let kernel = match (hw, segs) {
        (None, None) => NVME_PASSTHRU_TRANSFER_BYTES_FALLBACK,
        (a, b) => a.unwrap_or(u64::MAX).min(b.unwrap_or(u64::MAX)),
    };
    let bytes = kernel.min(mdts_bytes.unwrap_or(u64::MAX));
    (bytes / block_size_bytes).max(1) * block_size_bytes
}

impl NvmeDevice {
    /// Opens the ZNS namespace behind the generic char device `path` (e.g. `/dev/ng0n1`);
    /// `name` is the spec it reports. Must run on a runtime core whose ring has 128-byte SQEs.
    /// Reads the geometry from Identify and the zone capacity from zone 0's report.
    pub async fn open(path: impl AsRef<Path>, name: impl Into<String>) -> Result<NvmeDevice> {
        let path = path.as_ref();
        let name = name.into();
        if !ziob_runtime::on_core() || !ziob_runtime::ring_info().granted.big_entries {
            return Err(DeviceError::InvalidArgument(format!(
                "{name}: NVMe passthrough needs a ring with 128-byte SQEs on the calling core; \
                 build the runtime with Runtime::builder().sqe128(true) \
                 (ziob_backends::runtime_builder_for does it for nvme: specs)"
            )));
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| os_err(&name, "open", e))?;
        let fd = file.as_raw_fd();
        let nsid = identify::namespace_id(fd).map_err(|e| {
            os_err(
                &name,
                "NVME_IOCTL_ID (is this an NVMe generic char device, /dev/ngXnY?)",
                e,
            )
        })?;
        let id = |cns, csi| {
            identify::identify(fd, nsid, cns, csi)
                .map_err(|e| os_err(&name, &format!("Identify CNS {:#x}", cns as u8), e))
        };
        let ns = identify::parse_namespace(&id(Cns::Namespace, 0)?).ok_or_else(|| {
            DeviceError::InvalidGeometry(format!("{name}: unusable LBA format in Identify"))
        })?;
        let ctrl = identify::parse_controller(&id(Cns::Controller, 0)?);
        let zns_ns = identify::identify(fd, nsid, Cns::CsNamespace, CSI_ZNS).map_err(|e| {
            DeviceError::InvalidArgument(format!(
                "{name}: namespace {nsid} is not a Zoned Namespace ({e})"
            ))
        })?;
        let zns = identify::parse_zns_namespace(&zns_ns, ns.lba_format);
        let zasl_bytes = identify::parse_zns_controller(&id(Cns::CsController, CSI_ZNS)?);
        if zns.zone_size_blocks == 0 || ns.size_blocks < zns.zone_size_blocks {
            return Err(DeviceError::InvalidGeometry(format!(
                "{name}: zone size {} blocks, namespace size {} blocks",
                zns.zone_size_blocks, ns.size_blocks
            )));
        }
        let bs = ns.block_size_bytes;
        let max_transfer = max_transfer_bytes(path, ctrl.max_transfer_bytes, bs);
        let zone_count = u32::try_from(ns.size_blocks / zns.zone_size_blocks)
            .map_err(|_| DeviceError::InvalidGeometry(format!("{name}: more than 2^32 zones")))?;
        let mut dev = NvmeDevice {
            inner: Arc::new(NvmeInner {
                name,
                file: ziob_runtime::File::from_std(file),
                nsid,
                geometry: Geometry {
                    block_size_bytes: bs,
                    zone_size_bytes: zns.zone_size_blocks * bs,
                    // Set from zone 0's report below (reports do not use it).
                    zone_capacity_bytes: zns.zone_size_blocks * bs,
                    zone_count,
                    max_open_zones: zns.max_open,
                    max_active_zones: zns.max_active,
                    max_append_bytes: bs,
                    volatile_write_cache: ctrl.volatile_write_cache,
                },
                zone_size_blocks: zns.zone_size_blocks,
                zdes_bytes: zns.zdes_bytes,
                max_transfer_bytes: max_transfer,
            }),
        };
        let cap = dev.report_zones(0, 1).await?[0].capacity_bytes;
        let inner = Arc::get_mut(&mut dev.inner).expect("no clone exists yet");
        inner.geometry.zone_capacity_bytes = cap;
        let append_limit = zasl_bytes
            .unwrap_or(max_transfer)
            .min(max_transfer)
            .min(cap);
        inner.geometry.max_append_bytes = (append_limit / bs).max(1) * bs;
        inner.geometry.validate()?;
        tracing::info!(
            name = %inner.name,
            nsid,
            geometry = ?inner.geometry,
            max_transfer_bytes = max_transfer,
            "opened NVMe ZNS namespace"
        );
        Ok(dev)
    }

    /// The namespace id.
    pub fn nsid(&self) -> u32 {
        self.inner.nsid
    }

    /// Largest data transfer of one command in bytes (larger reads and writes are split).
    pub fn max_transfer_bytes(&self) -> u64 {
        self.inner.max_transfer_bytes
    }

    fn g(&self) -> &Geometry {
        &self.inner.geometry
    }

    fn zslba(&self, zone: u32) -> u64 {
        u64::from(zone) * self.inner.zone_size_blocks
    }

    fn lba(&self, zone: u32, offset_bytes: u64) -> u64 {
        self.zslba(zone) + offset_bytes / self.g().block_size_bytes
    }

    /// Sends one I/O command; `Ok` carries completion dwords 0–1.
    async fn submit(
        &self,
        what: &str,
        c: NvmeCmd,
        buf: Option<DmaBuf>,
    ) -> (std::result::Result<u64, Failure>, Option<DmaBuf>) {
        // SAFETY: every builder sets `addr`/`data_len` to a range inside `buf` (or to nothing
        // when `buf` is None); the op owns `buf` and a reference to the device file until the
        // completion.
        let (res, buf) = unsafe {
            ziob_runtime::uring_cmd(
                &self.inner.file,
                cmd::NVME_URING_CMD_IO,
                c.to_sqe_cmd(),
                buf,
            )
        }
        .await;
        let out = match res {
            Ok(o) => match NvmeStatus::from_result(o.result) {
                None => Ok(o.big_cqe[0]),
                Some(st) => Err(Failure::Status(st)),
            },
            Err(e @ ziob_runtime::Error::NeedsBigRing { .. }) => {
                Err(Failure::Host(DeviceError::io(
                    format!(
                        "{}: {what}: this core's ring has 64-byte SQEs; build the runtime with \
                         Runtime::builder().sqe128(true) (see ziob_backends::runtime_builder_for)",
                        self.inner.name
                    ),
                    e,
                )))
            }
            Err(e) => Err(Failure::Host(DeviceError::io(
                format!("{}: {what}", self.inner.name),
                e,
            ))),
        };
        (out, buf)
    }

    fn unknown_status(&self, what: &str, st: NvmeStatus) -> DeviceError {
        DeviceError::io(
            format!("{}: {what}", self.inner.name),
            std::io::Error::other(st.to_string()),
        )
    }

    /// The typed error of a data command that failed with `st`.
    async fn io_failure(&self, st: NvmeStatus, ctx: IoContext) -> DeviceError {
        let needs_zone = st.is_zns(status::SC_ZONE_INVALID_WRITE)
            || (ctx.op == IoOp::Append && st.is_zns(status::SC_ZONE_BOUNDARY));
        let now = if needs_zone {
            self.report_zones(ctx.zone, 1)
                .await
                .ok()
                .and_then(|z| z.first().copied())
        } else {
            None
        };
        status::io_error(self.g(), st, ctx, now.as_ref()).unwrap_or_else(|| {
            self.unknown_status(
                &format!(
                    "{} of {} bytes at byte {} of zone {}",
                    ctx.op, ctx.len_bytes, ctx.offset_bytes, ctx.zone
                ),
                st,
            )
        })
    }

    /// The error the device gives a write that would cross the capacity, decided from its
    /// report (for writes split into several commands, which must not land partially):
    /// the zone state first, then the write pointer, then the boundary (ZNS order).
    async fn refused_split_write(
        &self,
        zone: u32,
        offset_bytes: u64,
        len_bytes: u64,
    ) -> DeviceError {
        let z = match self.report_zones(zone, 1).await {
            Ok(z) => z[0],
            Err(e) => return e,
        };
        capacity_crossing_refusal(
            self.g(),
            zone,
            z.state,
            z.write_pointer_bytes,
            offset_bytes,
            len_bytes,
        )
    }

    /// What Report Zones descriptors are checked against.
    fn report_layout(&self) -> zone::ReportLayout {
        zone::ReportLayout {
            zone_size_blocks: self.inner.zone_size_blocks,
            zone_count: self.g().zone_count,
            block_size_bytes: self.g().block_size_bytes,
        }
    }
}

impl NvmeDevice {
    /// A write of `buf` at `offset_bytes` of `zone`, split at the largest transfer, with
    /// Force Unit Access on every command if `fua`.
    async fn write_with(
        &self,
        zone: u32,
        offset_bytes: u64,
        mut buf: DmaBuf,
        fua: bool,
    ) -> (Result<()>, DmaBuf) {
        let len_bytes = buf.len() as u64;
        let checked = self.g().check_zone(zone).and_then(|()| {
            self.g()
                .check_aligned(IoOp::Write, zone, offset_bytes, len_bytes)
        });
        if let Err(e) = checked {
            return (Err(e), buf);
        }
        let max = self.inner.max_transfer_bytes;
        if len_bytes > max && offset_bytes + len_bytes > self.g().zone_capacity_bytes {
            let e = self
                .refused_split_write(zone, offset_bytes, len_bytes)
                .await;
            return (Err(e), buf);
        }
        let bs = self.g().block_size_bytes;
        let mut done = 0u64;
        while done < len_bytes {
            let n = (len_bytes - done).min(max);
            let mut c = cmd::write(
                self.inner.nsid,
                self.lba(zone, offset_bytes + done),
                (n / bs) as u32,
                buf.stable_ptr().wrapping_add(done as usize),
                n as u32,
            );
            if fua {
                c = c.fua();
            }
            let (res, b) = self.submit("write", c, Some(buf)).await;
            buf = b.expect("the op hands its buffer back");
            match res {
                Ok(_) => done += n,
                Err(Failure::Host(e)) => return (Err(e), buf),
                Err(Failure::Status(st)) => {
                    // Only the first command can fail on a device that follows the contract
                    // (one op at a time per zone): later ones continue at the write pointer.
                    let ctx = IoContext {
                        op: IoOp::Write,
                        zone,
                        offset_bytes: offset_bytes + done,
                        len_bytes: len_bytes - done,
                    };
                    return (Err(self.io_failure(st, ctx).await), buf);
                }
            }
        }
        (Ok(()), buf)
    }
}

impl ZonedDevice for NvmeDevice {
    fn geometry(&self) -> &Geometry {
        &self.inner.geometry
    }

    fn name(&self) -> &str {
        &self.inner.name
    }

    async fn report_zones(&self, first: u32, count: u32) -> Result<Vec<ZoneInfo>> {
        let zone_count = self.g().zone_count;
        self.g().check_zone(first)?;
        let end = first.saturating_add(count).min(zone_count);
        let entry_bytes = zone::ZONE_DESCRIPTOR_BYTES + self.inner.zdes_bytes;
        let per_cmd = ((self.inner.max_transfer_bytes as usize - zone::REPORT_HEADER_BYTES)
            / entry_bytes)
            .max(1);
        let mut out = Vec::with_capacity((end - first) as usize);
        let mut next = first;
        while next < end {
            let n = ((end - next) as usize).min(per_cmd);
            let len = zone::report_len_bytes(n, self.inner.zdes_bytes);
            let mut buf = DmaBuf::zeroed(len);
            let c = zone::report_zones(
                self.inner.nsid,
                self.zslba(next),
                self.inner.zdes_bytes > 0,
                buf.stable_mut_ptr(),
                len as u32,
            );
            let (res, buf) = self.submit("Report Zones", c, Some(buf)).await;
            let buf = buf.expect("the op hands its buffer back");
            match res {
                Ok(_) => {}
                Err(Failure::Host(e)) => return Err(e),
                Err(Failure::Status(st)) => {
                    return Err(self.unknown_status(&format!("Report Zones from zone {next}"), st))
                }
            }
            let zones = zone::parse_report_zones(
                &buf,
                self.inner.zdes_bytes,
                &self.report_layout(),
                next,
                n,
            )
            .map_err(|e| DeviceError::Corrupt {
                path: self.inner.name.clone(),
                detail: e.to_string(),
            })?;
            next += zones.len() as u32;
            out.extend(zones);
        }
        Ok(out)
    }

    async fn read(
        &self,
        zone: u32,
        offset_bytes: u64,
        len: usize,
        mut buf: DmaBuf,
    ) -> (Result<()>, DmaBuf) {
        let len_bytes = len as u64;
        let checked = self
            .g()
            .check_zone(zone)
            .and_then(|()| {
                self.g()
                    .check_aligned(IoOp::Read, zone, offset_bytes, len_bytes)
            })
            .and_then(|()| check_read_buf(&buf, len))
            .and_then(|()| self.g().check_read_end(zone, offset_bytes, len_bytes));
        if let Err(e) = checked {
            return (Err(e), buf);
        }
        let g = *self.g();
        let mut done = 0u64;
        while done < len_bytes {
            let n = (len_bytes - done).min(self.inner.max_transfer_bytes);
            let c = cmd::read(
                self.inner.nsid,
                self.lba(zone, offset_bytes + done),
                (n / g.block_size_bytes) as u32,
                buf.stable_mut_ptr().wrapping_add(done as usize),
                n as u32,
            );
            let (res, b) = self.submit("read", c, Some(buf)).await;
            buf = b.expect("the op hands its buffer back");
            match res {
                Ok(_) => done += n,
                Err(Failure::Host(e)) => return (Err(e), buf),
                Err(Failure::Status(st)) => {
                    let ctx = IoContext {
                        op: IoOp::Read,
                        zone,
                        offset_bytes,
                        len_bytes,
                    };
                    return (Err(self.io_failure(st, ctx).await), buf);
                }
            }
        }
        // SAFETY: the device completed reads of all `len` bytes into the buffer's memory.
        unsafe { buf.set_init(len) };
        (Ok(()), buf)
    }

    async fn write(&self, zone: u32, offset_bytes: u64, buf: DmaBuf) -> (Result<()>, DmaBuf) {
        self.write_with(zone, offset_bytes, buf, false).await
    }

    /// Every command of the write with Force Unit Access.
    async fn write_durable(
        &self,
        zone: u32,
        offset_bytes: u64,
        buf: DmaBuf,
    ) -> (Result<()>, DmaBuf) {
        self.write_with(zone, offset_bytes, buf, true).await
    }

    fn has_durable_writes(&self) -> bool {
        true
    }

    async fn append(&self, zone: u32, buf: DmaBuf) -> (Result<u64>, DmaBuf) {
        let len_bytes = buf.len() as u64;
        let g = *self.g();
        let checked = g
            .check_zone(zone)
            .and_then(|()| g.check_append(zone, len_bytes));
        if let Err(e) = checked {
            return (Err(e), buf);
        }
        let zslba = self.zslba(zone);
        let c = cmd::zone_append(
            self.inner.nsid,
            zslba,
            (len_bytes / g.block_size_bytes) as u32,
            buf.stable_ptr(),
            len_bytes as u32,
        );
        let (res, buf) = self.submit("zone append", c, Some(buf)).await;
        let buf = buf.expect("the op hands its buffer back");
        let lba = match res {
            Ok(lba) => lba,
            Err(Failure::Host(e)) => return (Err(e), buf),
            Err(Failure::Status(st)) => {
                let ctx = IoContext {
                    op: IoOp::Append,
                    zone,
                    offset_bytes: 0,
                    len_bytes,
                };
                return (Err(self.io_failure(st, ctx).await), buf);
            }
        };
        let landed = lba
            .checked_sub(zslba)
            .filter(|&b| (b + len_bytes / g.block_size_bytes) <= g.zone_capacity_blocks());
        match landed {
            Some(blocks) => (Ok(blocks * g.block_size_bytes), buf),
            None => (
                Err(DeviceError::Corrupt {
                    path: self.inner.name.clone(),
                    detail: format!(
                        "zone append to zone {zone} completed at LBA {lba:#x}, outside the zone"
                    ),
                }),
                buf,
            ),
        }
    }

    async fn zone_action(&self, action: ZoneAction, target: ZoneTarget) -> Result<()> {
        let (zslba, all) = match target {
            ZoneTarget::One(z) => {
                self.g().check_zone(z)?;
                (self.zslba(z), false)
            }
            ZoneTarget::All => (0, true),
        };
        let c = zone::management_send(self.inner.nsid, zslba, action, all);
        let (res, _) = self.submit("Zone Management Send", c, None).await;
        let st = match res {
            Ok(_) => return Ok(()),
            Err(Failure::Host(e)) => return Err(e),
            Err(Failure::Status(st)) => st,
        };
        // The zone the error names: the target, or for Select All the first zone still in a
        // state the action applies to (e.g. the Closed zone an Open All could not open).
        let (zone, state_now) = match target {
            ZoneTarget::One(z) => {
                let now = self.report_zones(z, 1).await.ok();
                (z, now.and_then(|r| r.first().map(|i| i.state)))
            }
            ZoneTarget::All => {
                let zones = self.report_all().await.unwrap_or_default();
                let first = zones.iter().find(|z| match action {
                    ZoneAction::Open => z.state == ZoneState::Closed,
                    _ => z.state.is_active(),
                });
                first.map_or((0, None), |z| (z.index, Some(z.state)))
            }
        };
        Err(status::action_error(self.g(), st, action, zone, state_now)
            .unwrap_or_else(|| self.unknown_status(&format!("{action} zone {zone}"), st)))
    }

    async fn flush(&self) -> Result<()> {
        let (res, _) = self
            .submit("flush", cmd::flush(self.inner.nsid), None)
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(Failure::Host(e)) => Err(e),
            Err(Failure::Status(st)) => Err(self.unknown_status("flush", st)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_that_need_big_rings() {
        assert!(spec_needs_sqe128("nvme:/dev/ng0n1"));
        assert!(!spec_needs_sqe128("emu:/tmp/x.zns"));
        assert!(!spec_needs_sqe128("zbd:/dev/nvme0n1"));
        assert!(
            runtime_builder_for("nvme:/dev/ng0n1")
                .config()
                .ring_flags
                .big_entries
        );
        assert!(
            !runtime_builder_for("mem:zones=2")
                .config()
                .ring_flags
                .big_entries
        );
    }

    #[test]
    fn queue_dir_of_a_generic_char_device() {
        assert_eq!(
            queue_dir(Path::new("/dev/ng1n2")),
            Some(PathBuf::from("/sys/block/nvme1n2/queue"))
        );
        assert_eq!(queue_dir(Path::new("/dev/nvme0n1")), None);
    }

    #[test]
    fn transfer_limit_without_sysfs_is_the_fallback() {
        let p = Path::new("/nonexistent/ng9n9");
        assert_eq!(
            max_transfer_bytes(p, None, 4096),
            NVME_PASSTHRU_TRANSFER_BYTES_FALLBACK
        );
        assert_eq!(max_transfer_bytes(p, Some(128 * 1024), 4096), 128 * 1024);
    }

    #[test]
    fn open_off_a_big_ring_says_how_to_fix_it() {
        let rt = ziob_runtime::Runtime::builder().cores(1).build().unwrap();
        let e = rt
            .block_on(|| async { NvmeDevice::open("/dev/null", "nvme:/dev/null").await.err() })
            .unwrap()
            .expect("a 64-byte-SQE ring must be refused");
        assert!(
            e.to_string().contains("sqe128(true)"),
            "unhelpful error: {e}"
        );
    }
}
