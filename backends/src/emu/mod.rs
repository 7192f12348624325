//! `emu`: a file-backed emulated ZNS device, the default backend.
//!
//! The file holds a header (geometry), two zone-table slots and the data region (format in
//! `docs/format.md` and [`format`](mod@format)). Data goes through the runtime's io_uring ops on the
//! calling core, with `O_DIRECT` when the block size is at least 4 KiB and the filesystem
//! accepts it, buffered otherwise.
//!
//! ## Crash semantics (a device with a volatile write cache)
//! Writes go to the data region without sync and advance the in-memory write pointer.
//! [`flush`](ZonedDevice::flush) snapshots the zone table, `fdatasync`s the data, writes the
//! snapshot to the older table slot (sequence number + crc32c) and `fdatasync`s again. Zone
//! management commands do the same before completing, so a completed reset can never be
//! undone by a crash. On open the newest valid slot wins (a torn slot write falls back to the
//! previous one) and opened zones come back Closed: everything before the last completed
//! flush survives `kill -9`; later writes may be lost, and since write pointers come from the
//! table, no write pointer is ever past unwritten data. Bytes past a zone's data read as zeros.
//!
//! ## Latency model
//! `emu:PATH,lat_us=N,bw_mbps=M` adds `N` µs plus `bytes / M MB/s` to every op with
//! [`ziob_runtime::sleep`] (off by default), to study buffering effects on a fast disk.

pub mod format;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use ziob_runtime::{DmaBuf, File, OpenOptions};

use crate::device::{check_read_buf, fill_read_buf, ZonedDevice};
use crate::limits::EMU_DIRECT_BLOCK_SIZE_BYTES_MIN;
use crate::model::error::{DeviceError, Result};
use crate::model::geometry::Geometry;
use crate::model::spec::LatencyModel;
use crate::model::state::{Reservation, ZoneAction, ZoneInfo, ZoneTable, ZoneTarget};
use format::Layout;

struct EmuInner {
    name: String,
    path: PathBuf,
    geometry: Geometry,
    layout: Layout,
    file: File,
    direct: bool,
    latency: LatencyModel,
    /// The modelled controller: held only for table calls, never across an `.await`.
    table: Mutex<ZoneTable>,
    /// Serialises table persistence; holds the next table sequence number.
    persist: futures::lock::Mutex<u64>,
}

/// A file-backed emulated zoned device. Clones share the device.
#[derive(Clone)]
pub struct EmuDevice {
    inner: Arc<EmuInner>,
}

/// An error of a std call (`what` names it) on the device file.
fn io_err(path: &Path, what: &str, e: std::io::Error) -> DeviceError {
    DeviceError::io(format!("emu:{}: {what} failed", path.display()), e)
}

/// An error of a runtime op on the device file (the runtime error names the op).
fn rt_err(path: &Path, e: ziob_runtime::Error) -> DeviceError {
    DeviceError::io(format!("emu:{}", path.display()), e)
}

fn corrupt(path: &Path, detail: impl Into<String>) -> DeviceError {
    DeviceError::Corrupt {
        path: path.display().to_string(),
        detail: detail.into(),
    }
}

/// Reads exactly `len` bytes at `offset` into a fresh buffer; a short file is `Ok(None)`.
async fn read_region(file: &File, path: &Path, offset: u64, len: usize) -> Result<Option<DmaBuf>> {
    let mut out = DmaBuf::with_capacity(len);
    while out.len() < len {
        let chunk = DmaBuf::with_capacity(len - out.len());
        let (res, chunk) = file.read_at(chunk, offset + out.len() as u64).await;
        let n = res.map_err(|e| rt_err(path, e))?;
        if n == 0 {
            return Ok(None);
        }
        let take = n.min(len - out.len());
        out.extend_from_slice(&chunk[..take]);
    }
    Ok(Some(out))
}

async fn write_region(file: &File, path: &Path, offset: u64, bytes: &[u8]) -> Result<()> {
    let (res, _) = file.write_all_at(DmaBuf::from_slice(bytes), offset).await;
    res.map_err(|e| rt_err(path, e))
}

/// Opens `path` read-write, with `O_DIRECT` if `direct` and the filesystem allows it.
/// Returns the file and whether it is direct.
async fn open_file(path: &Path, direct: bool) -> Result<(File, bool)> {
    let opts = OpenOptions::new().read(true).write(true);
    if direct {
        match opts.direct(true).open(path).await {
            Ok(f) => return Ok((f, true)),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                tracing::info!(path = %path.display(), "O_DIRECT refused, using buffered I/O");
            }
            Err(e) => return Err(rt_err(path, e)),
        }
    }
    let f = opts.open(path).await.map_err(|e| rt_err(path, e))?;
    Ok((f, false))
}

impl EmuDevice {
    /// Creates a new device file at `path` (which must not exist) with every zone Empty.
    /// The file is sparse: data space is allocated as zones are written.
    pub async fn create(path: impl AsRef<Path>, geometry: &Geometry) -> Result<EmuDevice> {
        let path = path.as_ref();
        geometry.validate()?;
        let layout = Layout::for_geometry(geometry);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| io_err(path, "create", e))?;
        let result = async {
            f.set_len(layout.file_bytes(geometry))
                .map_err(|e| io_err(path, "set length", e))?;
            drop(f);
            let (file, _) = open_file(path, false).await?;
            write_region(&file, path, 0, &format::encode_header(geometry, &layout)).await?;
            let empty = ZoneTable::new(geometry).snapshot();
            for seq in 0..2u64 {
                let slot = format::encode_table(&layout, seq, &empty);
                write_region(&file, path, layout.slot_offset(seq % 2), &slot).await?;
            }
            file.sync_all().await.map_err(|e| rt_err(path, e))?;
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                if let Ok(d) = std::fs::File::open(dir) {
                    d.sync_all()
                        .map_err(|e| io_err(dir, "fsync directory", e))?;
                }
            }
            Ok(())
        }
        .await;
        if let Err(e) = result {
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        EmuDevice::open(path, LatencyModel::default()).await
    }

    /// Opens an existing device file. A missing, truncated or damaged file is an error
    /// ([`DeviceError::Io`] or [`DeviceError::Corrupt`]); nothing is ever reformatted.
    pub async fn open(path: impl AsRef<Path>, latency: LatencyModel) -> Result<EmuDevice> {
        let path = path.as_ref();
        let name = format!("emu:{}", path.display());
        EmuDevice::open_named(path, latency, name).await
    }

    pub(crate) async fn open_named(
        path: &Path,
        latency: LatencyModel,
        name: String,
    ) -> Result<EmuDevice> {
        let (file, _) = open_file(path, false).await?;
        let header = read_region(&file, path, 0, format::HEADER_BYTES as usize)
            .await?
            .ok_or_else(|| corrupt(path, "the file is shorter than its 4096-byte header"))?;
        let (geometry, layout) = format::decode_header(&header).map_err(|d| corrupt(path, d))?;
        let file_bytes = std::fs::metadata(path)
            .map_err(|e| io_err(path, "stat", e))?
            .len();
        if file_bytes < layout.file_bytes(&geometry) {
            return Err(corrupt(
                path,
                format!(
                    "the file is truncated: {file_bytes} bytes, the geometry needs {}",
                    layout.file_bytes(&geometry)
                ),
            ));
        }
        let mut best: Option<(u64, Vec<crate::PersistedZone>)> = None;
        let mut problems = Vec::new();
        for slot in 0..2u64 {
            let bytes = read_region(
                &file,
                path,
                layout.slot_offset(slot),
                layout.table_slot_bytes as usize,
            )
            .await?
            .ok_or_else(|| corrupt(path, "the file ends inside the zone table"))?;
            match format::decode_table(&bytes, geometry.zone_count) {
                Ok((seq, zones)) if seq % 2 != slot => {
                    problems.push(format!("table slot {slot} holds sequence {seq}"));
                    let _ = zones;
                }
                Ok((seq, zones)) => {
                    if best.as_ref().is_none_or(|(s, _)| seq > *s) {
                        best = Some((seq, zones));
                    }
                }
                Err(d) => problems.push(format!("table slot {slot}: {d}")),
            }
        }
        let Some((seq, zones)) = best else {
            return Err(corrupt(
                path,
                format!("no valid zone table ({})", problems.join("; ")),
            ));
        };
        if !problems.is_empty() {
            tracing::warn!(path = %path.display(), seq, problems = %problems.join("; "), "using the remaining valid zone table");
        }
        let table = ZoneTable::restore(&geometry, &zones)
            .map_err(|d| corrupt(path, format!("zone table sequence {seq}: {d}")))?;
        let want_direct = geometry.block_size_bytes >= EMU_DIRECT_BLOCK_SIZE_BYTES_MIN;
        let (file, direct) = if want_direct {
            drop(file);
            open_file(path, true).await?
        } else {
            (file, false)
        };
        Ok(EmuDevice {
            inner: Arc::new(EmuInner {
                name,
                path: path.to_path_buf(),
                geometry,
                layout,
                file,
                direct,
                latency,
                table: Mutex::new(table),
                persist: futures::lock::Mutex::new(seq + 1),
            }),
        })
    }

    /// The device file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Whether data I/O bypasses the page cache (`O_DIRECT`).
    pub fn is_direct(&self) -> bool {
        self.inner.direct
    }

    fn table(&self) -> MutexGuard<'_, ZoneTable> {
        // Every table change is checked before it is made, so a poisoned lock is consistent.
        self.inner.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn data_pos(&self, zone: u32, offset_bytes: u64) -> u64 {
        self.inner.layout.data_offset_bytes
            + u64::from(zone) * self.inner.geometry.zone_size_bytes
            + offset_bytes
    }

    async fn model_delay(&self, bytes: u64) {
        if !self.inner.latency.is_off() {
            // A failed timer only shortens the modelled delay.
            let _ = ziob_runtime::sleep(self.inner.latency.delay(bytes)).await;
        }
    }

    async fn write_reserved(&self, r: Result<Reservation>, buf: DmaBuf) -> (Result<u64>, DmaBuf) {
        let r = match r {
            Ok(r) => r,
            Err(e) => return (Err(e), buf),
        };
        self.model_delay(r.len_bytes).await;
        let (res, buf) = self
            .inner
            .file
            .write_all_at(buf, self.data_pos(r.zone, r.offset_bytes))
            .await;
        self.table().complete(r, res.is_ok());
        match res {
            Ok(()) => (Ok(r.offset_bytes), buf),
            Err(e) => (Err(rt_err(&self.inner.path, e)), buf),
        }
    }

    /// Persists the zone table: snapshot, fdatasync the data, write the next slot, fdatasync.
    async fn persist(&self) -> Result<()> {
        let path = &self.inner.path;
        let mut next_seq = self.inner.persist.lock().await;
        let zones = self.table().snapshot();
        let file = &self.inner.file;
        file.sync_data().await.map_err(|e| rt_err(path, e))?;
        let seq = *next_seq;
        let slot = format::encode_table(&self.inner.layout, seq, &zones);
        write_region(file, path, self.inner.layout.slot_offset(seq % 2), &slot).await?;
        file.sync_data().await.map_err(|e| rt_err(path, e))?;
        *next_seq = seq + 1;
        Ok(())
    }
}

impl ZonedDevice for EmuDevice {
    fn geometry(&self) -> &Geometry {
        &self.inner.geometry
    }

    fn name(&self) -> &str {
        &self.inner.name
    }

    /// A write reserves its range in the zone table when it is issued (before any I/O or
    /// modelled delay), so writes issued in write-pointer order are accepted in that order
    /// whatever order their file I/O completes in.
    fn ordered_writes_in_flight(&self) -> u32 {
        crate::limits::EMU_ORDERED_WRITES_IN_FLIGHT
    }

    async fn report_zones(&self, first: u32, count: u32) -> Result<Vec<ZoneInfo>> {
        self.table().report(first, count)
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
        let data_end = match self.table().check_read(zone, offset_bytes, len as u64) {
            Ok(end) => end,
            Err(e) => return (Err(e), buf),
        };
        self.model_delay(len as u64).await;
        let with_data = data_end.saturating_sub(offset_bytes).min(len as u64) as usize;
        if with_data == 0 {
            fill_read_buf(&mut buf, &[], len);
            return (Ok(()), buf);
        }
        let pos = self.data_pos(zone, offset_bytes);
        let (res, mut buf) = self.inner.file.read_at(buf, pos).await;
        let got = match res {
            Ok(n) => n,
            Err(e) => return (Err(rt_err(&self.inner.path, e)), buf),
        };
        if got < with_data {
            // Short read (a file shortened behind our back, or a page-cache split): finish it.
            let rest = match read_region(
                &self.inner.file,
                &self.inner.path,
                pos + got as u64,
                with_data - got,
            )
            .await
            {
                Ok(Some(rest)) => rest,
                Ok(None) => {
                    let e = corrupt(&self.inner.path, "the file ends inside the data region");
                    return (Err(e), buf);
                }
                Err(e) => return (Err(e), buf),
            };
            buf.truncate(got);
            buf.extend_from_slice(&rest);
        }
        buf.truncate(with_data);
        buf.resize(len, 0);
        (Ok(()), buf)
    }

    async fn write(&self, zone: u32, offset_bytes: u64, buf: DmaBuf) -> (Result<()>, DmaBuf) {
        let r = self
            .table()
            .begin_write(zone, offset_bytes, buf.len() as u64);
        let (res, buf) = self.write_reserved(r, buf).await;
        (res.map(|_| ()), buf)
    }

    async fn append(&self, zone: u32, buf: DmaBuf) -> (Result<u64>, DmaBuf) {
        let r = self.table().begin_append(zone, buf.len() as u64);
        self.write_reserved(r, buf).await
    }

    async fn zone_action(&self, action: ZoneAction, target: ZoneTarget) -> Result<()> {
        self.table().apply(action, target)?;
        self.model_delay(0).await;
        self.persist().await
    }

    async fn flush(&self) -> Result<()> {
        self.model_delay(0).await;
        self.persist().await
    }
}
