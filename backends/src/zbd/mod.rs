//! `zbd`: a Linux zoned block device — an NVMe ZNS namespace (`/dev/nvmeXnY`), a zoned
//! null_blk device or a host-managed SMR disk — through the kernel block layer.
//!
//! - **Data**: `O_DIRECT` reads and writes on the core's io_uring ring. Writes larger than the
//!   queue's `max_sectors_kb` are split here, in order, one piece at a time (the kernel would
//!   split them anyway, and a half-done write would leave the write pointer in between: the
//!   range is checked against the capacity *before* the first piece is issued).
//! - **Zone Append**: the block layer offers none to user space, so [`ZbdDevice::append`] is a
//!   write at the write pointer this backend tracks in memory. Writes and appends to one zone
//!   are serialised by a per-zone async lock: the trait's contract is one op at a time per
//!   zone, and concurrent appends to one zone are correct but do not overlap.
//! - **Zone management and reports**: the `BLK*ZONE` ioctls ([`ioctl`]). **They block the
//!   calling core** for the duration of the command (microseconds to milliseconds); they are
//!   rare ops (reports, open/close/finish/reset), never on the data path.
//! - **Errors**: a per-zone mirror of state and write pointer ([`mirror`]) refuses invalid
//!   writes, appends and transitions before issuing them, with the model's typed
//!   [`DeviceError`]s. What the device still refuses comes back as an errno, mapped as the
//!   notes say (`EOVERFLOW` = Too Many Active Zones, `ETOOMANYREFS` = Too Many Open Zones,
//!   `EIO` = re-checked against a fresh report, else an I/O error); the mirror is refreshed
//!   from a report after every failure. Zoned null_blk refuses to finish a Closed zone while
//!   every open and active resource is taken (`ETOOMANYREFS`), which ZNS allows: the backend
//!   then closes an implicitly opened zone, as a controller's implicit close would, and
//!   finishes again.
//! - **Geometry**: zone size and count from `BLKGETZONESZ`/`BLKGETNRZONES`, capacity from the
//!   report, the rest from `/sys/block/<dev>/queue` ([`sysfs`]; 0 = no limit). The append
//!   limit is `zone_append_max_bytes` (else the largest request), at most the capacity.
//! - **Flush**: `fdatasync` of the block device (a cache flush when `queue/write_cache` is
//!   `write back`). **Durable writes** ([`ZonedDevice::write_durable`]): `RWF_DSYNC`, which
//!   the kernel sends with Force Unit Access; offered as one command
//!   ([`ZonedDevice::has_durable_writes`]) only where `queue/fua` is 1 or the cache is
//!   `write through` (else the kernel adds a cache flush to each).
//!
//! Limitations: devices with conventional zones (many SMR disks) or zones of different
//! capacities are refused; Offline Zone has no ioctl; another process writing the device
//! behind ZIOB's back makes the mirror stale until the next failure refreshes it.

pub mod ioctl;
pub mod mirror;
pub mod sysfs;

use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::lock::Mutex as AsyncMutex;
use ziob_runtime::{DmaBuf, File, OpenOptions};

use crate::device::{check_read_buf, fill_read_buf, ZonedDevice};
use crate::model::error::{DeviceError, IoOp, Result};
use crate::model::geometry::Geometry;
use crate::model::state::{ZoneAction, ZoneInfo, ZoneTarget};
use ioctl::{ZoneMgmt, SECTOR_BYTES};
use mirror::Mirror;
use sysfs::ZonedModel;

struct ZbdInner {
    name: String,
    geometry: Geometry,
    file: File,
    /// Largest piece a write is split into, in bytes (`max_sectors_kb`, whole blocks).
    write_piece_bytes_max: u64,
    mirror: Mutex<Mirror>,
    /// One async lock per zone: writes, appends and zone actions of a zone run one at a time.
    zone_locks: Vec<AsyncMutex<()>>,
    /// An `RWF_DSYNC` write is one device command: the device has FUA, or no volatile cache
    /// (without FUA the kernel adds a cache flush to each such write).
    durable_write_is_one_command: bool,
}

/// A kernel zoned block device. Clones share the device (one descriptor, one mirror).
#[derive(Clone)]
pub struct ZbdDevice {
    inner: Arc<ZbdInner>,
}

/// The errno of a runtime or std error, if it has one.
fn errno(e: &ziob_runtime::Error) -> Option<i32> {
    match e {
        ziob_runtime::Error::Io { source, .. } => source.raw_os_error(),
        _ => None,
    }
}

/// Reports zones `[first, first + count)` from the device (blocking ioctls).
fn report_from_device(
    fd: RawFd,
    geometry: &Geometry,
    first: u32,
    count: u32,
) -> std::io::Result<std::result::Result<Vec<ZoneInfo>, String>> {
    let zone_sectors = geometry.zone_size_bytes / SECTOR_BYTES;
    let end = first.saturating_add(count).min(geometry.zone_count);
    let mut out = Vec::with_capacity(end.saturating_sub(first) as usize);
    let mut next = first;
    while next < end {
        let (zones, flags) = ioctl::report_zones(fd, u64::from(next) * zone_sectors, end - next)?;
        if zones.is_empty() {
            return Ok(Err(format!("the device reported no zone at zone {next}")));
        }
        for z in &zones {
            if next >= end {
                break;
            }
            match mirror::zone_info(next, z, flags & ioctl::BLK_ZONE_REP_CAPACITY != 0) {
                Ok(info) => out.push(info),
                Err(e) => return Ok(Err(e)),
            }
            next += 1;
        }
    }
    Ok(Ok(out))
}

impl ZbdDevice {
    /// Opens the zoned block device at `path`; `name` is the spec it reports (e.g.
    /// `zbd:/dev/nvme0n1`). Refuses a missing device ([`DeviceError::Io`], `NotFound`) and a
    /// device that is not host-managed or host-aware ([`DeviceError::InvalidSpec`]). Blocks
    /// the core briefly (sysfs reads, two ioctls and a full zone report).
    pub async fn open(path: impl AsRef<Path>, name: impl Into<String>) -> Result<ZbdDevice> {
        let path: PathBuf = path.as_ref().to_path_buf();
        let name = name.into();
        let queue = sysfs::queue_dir(&path).map_err(|e| DeviceError::io(name.clone(), e))?;
        let invalid = |reason| DeviceError::InvalidSpec {
            spec: name.clone(),
            reason,
        };
        if sysfs::zoned_model(&queue).map_err(invalid)? == ZonedModel::None {
            return Err(DeviceError::InvalidSpec {
                spec: name.clone(),
                reason: format!(
                    "{} is not a zoned block device ({}/zoned is `none`)",
                    path.display(),
                    queue.display()
                ),
            });
        }
        let limits = sysfs::read_limits(&queue).map_err(invalid)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .direct(true)
            .open(&path)
            .await
            .map_err(|e| DeviceError::io(format!("{name}: open"), e))?;
        let fd = file.as_raw_fd();
        let ioctl_err = |what: &str, e| DeviceError::io(format!("{name}: {what}"), e);
        let zone_sectors =
            ioctl::zone_size_sectors(fd).map_err(|e| ioctl_err("BLKGETZONESZ", e))?;
        let zone_count = ioctl::zone_count(fd).map_err(|e| ioctl_err("BLKGETNRZONES", e))?;
        let bs = limits.logical_block_size_bytes;
        let mut geometry = Geometry {
            block_size_bytes: bs,
            zone_size_bytes: u64::from(zone_sectors) * SECTOR_BYTES,
            zone_capacity_bytes: u64::from(zone_sectors) * SECTOR_BYTES,
            zone_count,
            max_open_zones: limits.max_open_zones,
            max_active_zones: limits.max_active_zones,
            max_append_bytes: bs,
            volatile_write_cache: limits.volatile_write_cache,
        };
        let bad_geometry = |msg: String| DeviceError::InvalidGeometry(format!("{name}: {msg}"));
        if zone_count == 0 || zone_sectors == 0 {
            return Err(bad_geometry("the kernel reports no zones".into()));
        }
        let report = report_from_device(fd, &geometry, 0, zone_count)
            .map_err(|e| ioctl_err("BLKREPORTZONE", e))?
            .map_err(&bad_geometry)?;
        let capacity = report[0].capacity_bytes;
        if let Some(z) = report.iter().find(|z| z.capacity_bytes != capacity) {
            return Err(bad_geometry(format!(
                "zone {} has a capacity of {} bytes, zone 0 of {capacity} (zones of different capacities are not supported)",
                z.index, z.capacity_bytes
            )));
        }
        geometry.zone_capacity_bytes = capacity;
        let append = limits
            .zone_append_max_bytes
            .unwrap_or(limits.max_hw_bytes)
            .min(capacity);
        geometry.max_append_bytes = (append / bs * bs).max(bs);
        geometry
            .validate()
            .map_err(|e| bad_geometry(e.to_string()))?;
        let write_piece_bytes_max = (limits.max_request_bytes / bs * bs).max(bs);
        tracing::debug!(?geometry, write_piece_bytes_max, "opened {name}");
        Ok(ZbdDevice {
            inner: Arc::new(ZbdInner {
                name,
                mirror: Mutex::new(Mirror::new(&geometry, &report)),
                zone_locks: (0..zone_count).map(|_| AsyncMutex::new(())).collect(),
                geometry,
                file,
                write_piece_bytes_max,
                durable_write_is_one_command: limits.fua || !limits.volatile_write_cache,
            }),
        })
    }

    fn mirror(&self) -> MutexGuard<'_, Mirror> {
        // Every mirror change is a plain assignment after its checks: a poisoned lock still
        // holds a consistent mirror.
        self.inner.mirror.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fd(&self) -> RawFd {
        self.inner.file.as_raw_fd()
    }

    fn zone_start_sector(&self, zone: u32) -> u64 {
        u64::from(zone) * self.inner.geometry.zone_size_bytes / SECTOR_BYTES
    }

    /// Refreshes the mirror from a report of every zone, except zones with an op in flight
    /// on another task (their owner updates them) — `held` is the zone the caller holds.
    fn refresh(&self, held: Option<u32>) {
        let g = &self.inner.geometry;
        // Lock every zone nobody is using *before* reading the report and keep the locks
        // until the mirror is updated: a write completing in between (on another core) would
        // otherwise have its write pointer overwritten by the older report.
        let guards: Vec<_> = (0..g.zone_count)
            .filter(|&z| Some(z) != held)
            .filter_map(|z| {
                self.inner.zone_locks[z as usize]
                    .try_lock()
                    .map(|guard| (z, guard))
            })
            .collect();
        match report_from_device(self.fd(), g, 0, g.zone_count) {
            Ok(Ok(report)) => {
                // `guards` is in zone order: a binary search per zone, not a scan.
                let free: Vec<ZoneInfo> = report
                    .into_iter()
                    .filter(|z| {
                        Some(z.index) == held
                            || guards.binary_search_by_key(&z.index, |(z, _)| *z).is_ok()
                    })
                    .collect();
                self.mirror().refresh(&free);
            }
            Ok(Err(e)) => tracing::warn!("{}: zone report for a refresh: {e}", self.inner.name),
            Err(e) => tracing::warn!("{}: zone report for a refresh: {e}", self.inner.name),
        }
    }

    /// Maps an errno of a write/append/zone action on `zone`, after the mirror was refreshed.
    /// `recheck` re-runs the mirror's checks, which now see the device's state.
    fn map_errno(
        &self,
        zone: u32,
        what: &str,
        source: std::io::Error,
        recheck: impl FnOnce(&Mirror) -> Result<()>,
    ) -> DeviceError {
        let g = &self.inner.geometry;
        match source.raw_os_error() {
            Some(libc::EOVERFLOW) => DeviceError::TooManyActive {
                zone,
                max_active: g.max_active_zones.unwrap_or(u32::MAX),
            },
            Some(libc::ETOOMANYREFS) => DeviceError::TooManyOpen {
                zone,
                max_open: g.max_open_zones.unwrap_or(u32::MAX),
            },
            _ => match recheck(&self.mirror()) {
                Err(typed) => typed,
                Ok(()) => DeviceError::io(
                    format!("{}: {what} of zone {zone}", self.inner.name),
                    source,
                ),
            },
        }
    }

    /// Writes all of `buf` at byte `dev_offset` of the device in pieces of at most
    /// `write_piece_bytes_max`, in order, each with `RWF_DSYNC` if `dsync`. The buffer comes
    /// back with its window unchanged.
    async fn write_pieces(
        &self,
        mut buf: DmaBuf,
        dev_offset: u64,
        dsync: bool,
    ) -> (std::result::Result<(), ziob_runtime::Error>, DmaBuf) {
        let start = buf.window_start();
        let len = buf.len();
        let piece_max = self.inner.write_piece_bytes_max as usize;
        if len <= piece_max {
            let (res, buf) = if dsync {
                self.inner.file.write_dsync_at(buf, dev_offset).await
            } else {
                self.inner.file.write_at(buf, dev_offset).await
            };
            return match res {
                Ok(n) if n == len => (Ok(()), buf),
                Ok(n) => {
                    // A short write of a block device: continue with the rest, in order.
                    let mut buf = buf;
                    buf.set_window(start + n, start + len);
                    let (res, mut buf) =
                        Box::pin(self.write_pieces(buf, dev_offset + n as u64, dsync)).await;
                    buf.set_window(start, start + len);
                    (res, buf)
                }
                Err(e) => (Err(e), buf),
            };
        }
        let mut done = 0usize;
        while done < len {
            let piece = piece_max.min(len - done);
            buf.set_window(start + done, start + done + piece);
            let (res, b) = Box::pin(self.write_pieces(buf, dev_offset + done as u64, dsync)).await;
            buf = b;
            if let Err(e) = res {
                buf.set_window(start, start + len);
                return (Err(e), buf);
            }
            done += piece;
        }
        buf.set_window(start, start + len);
        (Ok(()), buf)
    }

    /// Reads `buf.capacity()` bytes at byte `dev_offset` of the device into `buf`.
    async fn read_exact(&self, buf: DmaBuf, dev_offset: u64, zone: u32) -> (Result<()>, DmaBuf) {
        let want = buf.capacity();
        let (res, buf) = self.inner.file.read_at(buf, dev_offset).await;
        let context = || format!("{}: read of zone {zone}", self.inner.name);
        let res = match res {
            Ok(n) if n == want => Ok(()),
            Ok(n) => Err(DeviceError::io(
                context(),
                std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("short read: {n} of {want} bytes"),
                ),
            )),
            Err(e) => Err(DeviceError::io(context(), e)),
        };
        (res, buf)
    }

    /// A write (`offset` = `Some`) or append (`None`) under the zone's lock, durable when
    /// it completes if `dsync`.
    async fn write_at_wp(
        &self,
        op: IoOp,
        zone: u32,
        offset: Option<u64>,
        buf: DmaBuf,
        dsync: bool,
    ) -> (Result<u64>, DmaBuf) {
        let g = &self.inner.geometry;
        let len = buf.len() as u64;
        if let Err(e) = g.check_zone(zone) {
            return (Err(e), buf);
        }
        let _zone_lock = self.inner.zone_locks[zone as usize].lock().await;
        let plan = match self.mirror().plan_write(op, zone, offset, len) {
            Ok(p) => p,
            Err(e) => return (Err(e), buf),
        };
        let dev_offset = u64::from(zone) * g.zone_size_bytes + plan.offset_bytes;
        let (res, buf) = self.write_pieces(buf, dev_offset, dsync).await;
        match res {
            Ok(()) => {
                self.mirror().wrote(zone, plan.offset_bytes, len);
                if plan.closes_another_zone {
                    self.refresh(Some(zone));
                }
                (Ok(plan.offset_bytes), buf)
            }
            Err(e) => {
                self.refresh(Some(zone));
                let source = match errno(&e) {
                    Some(n) => std::io::Error::from_raw_os_error(n),
                    None => std::io::Error::other(e.to_string()),
                };
                let err = self.map_errno(zone, &op.to_string(), source, |m| {
                    m.plan_write(op, zone, offset, len).map(|_| ())
                });
                (Err(err), buf)
            }
        }
    }

    /// One zone management command on one zone, under its lock.
    async fn action_one(&self, action: ZoneAction, zone: u32) -> Result<()> {
        let g = &self.inner.geometry;
        g.check_zone(zone)?;
        let _zone_lock = self.inner.zone_locks[zone as usize].lock().await;
        self.mirror().plan_action(action, zone)?;
        let mgmt = match action {
            ZoneAction::Open => ZoneMgmt::Open,
            ZoneAction::Close => ZoneMgmt::Close,
            ZoneAction::Finish => ZoneMgmt::Finish,
            ZoneAction::Reset => ZoneMgmt::Reset,
            // plan_action refused everything but Offline of an Offline zone (a no-op).
            ZoneAction::Offline => return Ok(()),
        };
        let zone_sectors = g.zone_size_bytes / SECTOR_BYTES;
        let mut res = ioctl::zone_mgmt(self.fd(), mgmt, self.zone_start_sector(zone), zone_sectors);
        if action == ZoneAction::Finish && is_open_resource_refusal(&res) {
            // Zoned null_blk (Linux 6.1) refuses to finish a Closed zone when the open and the
            // active limits are both reached, although finishing needs no open resource. Do
            // what a ZNS controller's implicit close would: close an implicitly opened zone
            // (it stays active and takes writes again) and finish once more.
            self.refresh(Some(zone));
            let victim = self.mirror().implicitly_opened_other_than(zone);
            if let Some(victim) = victim {
                let closed = ioctl::zone_mgmt(
                    self.fd(),
                    ZoneMgmt::Close,
                    self.zone_start_sector(victim),
                    zone_sectors,
                );
                if closed.is_ok() {
                    res = ioctl::zone_mgmt(
                        self.fd(),
                        mgmt,
                        self.zone_start_sector(zone),
                        zone_sectors,
                    );
                }
            }
        }
        match res {
            Ok(()) => {
                if action == ZoneAction::Finish {
                    self.mirror().finished(zone);
                }
                self.refresh(Some(zone));
                Ok(())
            }
            Err(e) => {
                self.refresh(Some(zone));
                Err(self.map_errno(zone, &action.to_string(), e, |m| {
                    m.plan_action(action, zone).map(|_| ())
                }))
            }
        }
    }
}

/// Whether a zone management ioctl failed for want of an open resource (`ETOOMANYREFS`).
fn is_open_resource_refusal(res: &std::io::Result<()>) -> bool {
    matches!(res, Err(e) if e.raw_os_error() == Some(libc::ETOOMANYREFS))
}

impl ZonedDevice for ZbdDevice {
    fn geometry(&self) -> &Geometry {
        &self.inner.geometry
    }

    fn name(&self) -> &str {
        &self.inner.name
    }

    /// Reports from the device (blocking `BLKREPORTZONE` ioctls, see the module docs).
    async fn report_zones(&self, first: u32, count: u32) -> Result<Vec<ZoneInfo>> {
        let g = &self.inner.geometry;
        g.check_zone(first)?;
        report_from_device(self.fd(), g, first, count)
            .map_err(|e| DeviceError::io(format!("{}: BLKREPORTZONE", self.inner.name), e))?
            .map_err(|e| DeviceError::InvalidGeometry(format!("{}: {e}", self.inner.name)))
    }

    async fn read(
        &self,
        zone: u32,
        offset_bytes: u64,
        len: usize,
        mut buf: DmaBuf,
    ) -> (Result<()>, DmaBuf) {
        if let Err(e) = check_read_buf(&buf, len) {
            return (Err(e), buf);
        }
        let data_end = match self.mirror().check_read(zone, offset_bytes, len as u64) {
            Ok(end) => end,
            Err(e) => return (Err(e), buf),
        };
        // Only the written part is read from the device; the rest reads as zeros.
        let from_device = data_end.saturating_sub(offset_bytes).min(len as u64) as usize;
        if from_device == 0 {
            fill_read_buf(&mut buf, &[], len);
            return (Ok(()), buf);
        }
        let g = &self.inner.geometry;
        let dev_offset = u64::from(zone) * g.zone_size_bytes + offset_bytes;
        if from_device == len && buf.capacity() == len {
            // The whole read lands in the caller's buffer.
            let (res, buf) = self.read_exact(buf, dev_offset, zone).await;
            return (res, buf);
        }
        // A staging buffer of exactly `from_device` bytes (a larger one would read past the
        // data, possibly across the zone end): its window ends at the end of the memory.
        let whole = from_device.next_multiple_of(ziob_runtime::DMA_ALIGN_BYTES);
        let mut stage = DmaBuf::zeroed(whole);
        stage.set_window(whole - from_device, whole);
        let (res, stage) = self.read_exact(stage, dev_offset, zone).await;
        if let Err(e) = res {
            return (Err(e), buf);
        }
        fill_read_buf(&mut buf, &stage[..from_device], len);
        (Ok(()), buf)
    }

    async fn write(&self, zone: u32, offset_bytes: u64, buf: DmaBuf) -> (Result<()>, DmaBuf) {
        let (res, buf) = self
            .write_at_wp(IoOp::Write, zone, Some(offset_bytes), buf, false)
            .await;
        (res.map(|_| ()), buf)
    }

    /// `RWF_DSYNC` writes: the kernel sends them with Force Unit Access where the device
    /// has a volatile write cache and FUA, adds a cache flush where it has a volatile cache
    /// but no FUA, and sends a plain write where it has no volatile cache.
    async fn write_durable(
        &self,
        zone: u32,
        offset_bytes: u64,
        buf: DmaBuf,
    ) -> (Result<()>, DmaBuf) {
        let (res, buf) = self
            .write_at_wp(IoOp::Write, zone, Some(offset_bytes), buf, true)
            .await;
        (res.map(|_| ()), buf)
    }

    /// Only where the device has FUA or no volatile cache (`queue/fua`, `queue/write_cache`).
    fn has_durable_writes(&self) -> bool {
        self.inner.durable_write_is_one_command
    }

    /// Emulated: a write at the write pointer tracked in memory (the block layer has no Zone
    /// Append for user space), serialised per zone — see the module docs.
    async fn append(&self, zone: u32, buf: DmaBuf) -> (Result<u64>, DmaBuf) {
        self.write_at_wp(IoOp::Append, zone, None, buf, false).await
    }

    /// Blocking ioctls (see the module docs). Select All applies the action zone by zone to
    /// the zones the model selects, except Reset All: one `BLKRESETZONE` over the device.
    async fn zone_action(&self, action: ZoneAction, target: ZoneTarget) -> Result<()> {
        match target {
            ZoneTarget::One(zone) => self.action_one(action, zone).await,
            ZoneTarget::All if action == ZoneAction::Reset => {
                let g = &self.inner.geometry;
                let res = ioctl::zone_mgmt(
                    self.fd(),
                    ZoneMgmt::Reset,
                    0,
                    g.device_size_bytes() / SECTOR_BYTES,
                );
                self.refresh(None);
                res.map_err(|e| {
                    DeviceError::io(format!("{}: reset of all zones", self.inner.name), e)
                })
            }
            ZoneTarget::All => {
                let chosen = self.mirror().select_all(action)?;
                for zone in chosen {
                    self.action_one(action, zone).await?;
                }
                Ok(())
            }
        }
    }

    async fn flush(&self) -> Result<()> {
        self.inner
            .file
            .sync_data()
            .await
            .map_err(|e| DeviceError::io(format!("{}: fdatasync", self.inner.name), e))
    }
}
