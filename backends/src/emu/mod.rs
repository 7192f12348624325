//! `emu`: a file-backed emulated ZNS device, the default backend.
//!
//! The file holds a header (geometry), two zone-table slots and the data region (format in
//! `docs/format.md` and [`format`](mod@format)). Data goes through the runtime's io_uring ops on the
//! calling core, with `O_DIRECT` when the block size is at least 4 KiB and the filesystem
//! accepts it, buffered otherwise or when the spec asks for the page cache (`direct=0`,
//! [`EmuDevice::open_through_page_cache`]); through the page cache, writes of at most 64 KiB
//! (data and zone-table slots) are copied by one `pwrite` on the core instead
//! (`inline_write`). Short writes make the device write zeros over the next 1 MiB of their
//! zone's host blocks ahead of them, so that a flush commits no block allocation
//! ([`EmuDevice::zero_ahead`]). Through the page cache, a data write that fills a MiB of the
//! file starts that MiB's write-back, so that a flush finds little left to write
//! ([`EmuDevice::write_behind`]).
//!
//! ## Crash semantics (a device with a volatile write cache)
//! Writes go to the data region without sync and advance the in-memory write pointer.
//! [`flush`](ZonedDevice::flush) snapshots the zone table and writes it to the older table
//! slot (sequence number + crc32c). When the zones' data grew since the last table only by
//! short writes (at most 64 KiB each, 1 MiB in all), whose CRC-32Cs the device keeps, the
//! table carries a data check per grown zone and one `fdatasync` makes data and table durable
//! together; otherwise the data is `fdatasync`ed first and the table after it. A flush that
//! finds nothing changed since the last table writes nothing (or, if that table has checks,
//! writes it again without them); the first table after an open, or after a table write
//! that failed or was cancelled, syncs the data first. Zone management commands
//! persist the table the same way before completing, so a completed reset can never be
//! undone by a crash. On open the newest valid slot wins if its data checks match (a table
//! write or its data torn by a crash falls back to the previous table, reported by
//! [`EmuDevice::recovery`] — as does data of the last flush damaged after it completed,
//! which the open cannot tell from a crash; any other damage of the newest slot is a
//! [`DeviceError::Corrupt`] error) and opened zones come back Closed:
//! everything before the last completed flush survives `kill -9`; later writes may be lost,
//! and since write pointers come from the table, no write pointer is ever past unwritten data.
//! Bytes past a zone's data read as zeros.
//!
//! ## Writes in flight
//! A write reserves its range when first polled. Its data transfer runs in a task of its own
//! on the calling core, so dropping the write's future does not abandon it: the transfer
//! completes (or fails) and the reservation with it. A write returns only once it and every
//! earlier write of the zone have completed, so what a flush persists (each zone's contiguous
//! completed prefix) covers every write that returned `Ok` before the flush was called, even
//! while later writes are in flight. A failed transfer (a host I/O error such as `ENOSPC`)
//! fails that write and aborts the ones issued after it; once they have completed the write
//! pointer goes back to where the completed data ends and the zone takes writes again.
//! A reset or finish first waits until the zone has no write in flight (a transfer still
//! running would otherwise land over data written after the reset); writes issued to the
//! zone meanwhile wait until the action has completed, and then go after it, in issue order.
//! A flush or zone action also runs in a task of its own, so dropping its future never
//! leaves a table write in flight.
//!
//! ## Locking and read-only opens
//! A read-write open takes an exclusive `flock` on the file, a read-only open
//! ([`EmuDevice::open_read_only`]) a shared one; a conflicting opener gets
//! [`DeviceError::Busy`]. The lock is released when the last clone of the device is dropped.
//!
//! ## Latency model
//! `emu:PATH,lat_us=N,bw_mbps=M` adds `N` µs plus `bytes / M MB/s` to every op with
//! [`ziob_runtime::sleep`] (off by default), to study buffering effects on a fast disk.

mod checks;
pub mod format;
mod inline_write;
mod lock;
mod open;
mod persist;
mod write_behind;
mod zero_ahead;

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use ziob_runtime::{DmaBuf, File, Limited};

use crate::device::{check_read_buf, fill_read_buf, ZonedDevice};
use crate::limits::EMU_DIRECT_BLOCK_SIZE_BYTES_MIN;
use crate::model::error::{DeviceError, Result};
use crate::model::geometry::Geometry;
use crate::model::spec::LatencyModel;
use crate::model::state::{PersistedZone, Reservation, WriteFate, ZoneTable};
use crate::model::zone::{ZoneAction, ZoneInfo, ZoneState, ZoneTarget};
use checks::DataChecks;
use format::{Layout, TableEntry};
use inline_write::InlineWrites;
use open::{corrupt, io_err};
pub use open::{OpenMode, TableRecovery};
use persist::Persisted;
use write_behind::WriteBehind;
use zero_ahead::{host_written_to, ZeroAhead};

/// The modelled controller: the zone table and, per zone, the tasks waiting for something of
/// the zone (a write's fate, the zone's writes in flight to drain, a zone action to end). Held
/// only for table calls, never across an `.await`.
struct Controller {
    table: ZoneTable,
    waiters: Vec<Vec<Waker>>,
    /// Per zone: reset and finish actions in progress. They wait until the zone has no write
    /// in flight (a transfer still running when a zone is reset would land over the data
    /// written after the reset); new writes to the zone wait until they have ended.
    draining: Vec<u32>,
    /// Per zone: tickets of the writes waiting to be reserved, in issue order (a write issued
    /// while others wait queues behind them, so the zone accepts writes in issue order).
    queued: Vec<std::collections::VecDeque<u64>>,
    /// The next write ticket.
    next_ticket: u64,
    /// Checksums of the completed writes a table has not covered yet.
    checks: DataChecks,
    /// Which host blocks of each zone are written, and the windows being zeroed ahead of
    /// short writes.
    zero_ahead: ZeroAhead,
}

impl Controller {
    /// Takes the waiters of `zone`, to be woken once the lock is released.
    fn take_waiters(&mut self, zone: u32) -> Vec<Waker> {
        self.waiters
            .get_mut(zone as usize)
            .map(std::mem::take)
            .unwrap_or_default()
    }
}

/// A reset or finish in progress on some zones ([`EmuDevice::start_drain`]): while it lives,
/// new writes to those zones wait. Dropping it (the action ended) lets them go on.
struct Draining {
    dev: EmuDevice,
    zones: Vec<u32>,
}

impl Draining {
    /// Returns once none of the zones has a write in flight.
    async fn drained(&self) {
        std::future::poll_fn(|cx| {
            let mut c = self.dev.controller();
            match self.zones.iter().find(|&&z| c.table.has_in_flight(z)) {
                Some(&z) => {
                    c.waiters[z as usize].push(cx.waker().clone());
                    Poll::Pending
                }
                None => Poll::Ready(()),
            }
        })
        .await
    }
}

impl Drop for Draining {
    fn drop(&mut self) {
        let waiters: Vec<Waker> = {
            let mut c = self.dev.controller();
            let mut waiters = Vec::new();
            for &z in &self.zones {
                c.draining[z as usize] -= 1;
                waiters.extend(c.take_waiters(z));
            }
            waiters
        };
        waiters.into_iter().for_each(Waker::wake);
    }
}

struct EmuInner {
    name: String,
    path: PathBuf,
    geometry: Geometry,
    layout: Layout,
    /// Data and table I/O; its descriptor holds the device lock.
    file: File,
    /// Short writes copied on the calling core (a page-cache device without a latency
    /// model only).
    inline: Option<InlineWrites>,
    direct: bool,
    mode: OpenMode,
    latency: LatencyModel,
    recovery: Option<TableRecovery>,
    controller: Mutex<Controller>,
    /// Serialises table persistence.
    persist: futures::lock::Mutex<Persisted>,
    /// `fdatasync`s issued by table persistence ([`EmuDevice::fdatasyncs`]).
    fdatasyncs: AtomicU64,
    /// Bytes of zeros written ahead of short writes ([`EmuDevice::zeroed_ahead_bytes`]).
    zeroed_ahead: AtomicU64,
    /// Write-back started as data writes fill chunks of the file ([`EmuDevice::write_behind`];
    /// page cache only).
    write_behind: Arc<WriteBehind>,
    faults: HostFaults,
    /// The file system refused `RWF_NOWAIT` reads: [`ZonedDevice::read_now`] gives up at once.
    nowait_unsupported: AtomicBool,
    /// Whether a reset punches a hole over the zone's data ([`EmuDevice::discard_on_reset`]).
    discard: AtomicBool,
    /// This device's share of the process's lock on the file.
    _lock: lock::DeviceClaim,
}

/// Injected host I/O errors (see [`EmuDevice::fail_data_write`],
/// [`EmuDevice::fail_table_write`] and [`EmuDevice::fail_table_sync`]).
#[derive(Default)]
struct HostFaults {
    /// Data writes issued since the device was opened.
    issued: AtomicU64,
    /// Whether `planned` may be non-empty: the data write path takes the lock only then.
    armed: AtomicBool,
    /// `(index of the data write, errno)` still to fire.
    planned: Mutex<Vec<(u64, i32)>>,
    /// The errno the next zone-table write fails with (0: none).
    table: AtomicI32,
    /// The errno the `fdatasync` after the next zone-table write fails with (0: none).
    table_sync: AtomicI32,
}

impl HostFaults {
    /// Counts a data write; the errno to fail it with, if one was planned for it.
    fn next(&self) -> Option<i32> {
        let index = self.issued.fetch_add(1, Ordering::Relaxed);
        if !self.armed.load(Ordering::Acquire) {
            return None;
        }
        let mut planned = self.planned.lock().unwrap_or_else(|p| p.into_inner());
        let pos = planned.iter().position(|(i, _)| *i == index)?;
        let errno = planned.swap_remove(pos).1;
        if planned.is_empty() {
            self.armed.store(false, Ordering::Release);
        }
        Some(errno)
    }

    fn plan(&self, data_write_index: u64, errno: i32) {
        let mut planned = self.planned.lock().unwrap_or_else(|p| p.into_inner());
        planned.push((data_write_index, errno));
        self.armed.store(true, Ordering::Release);
    }
}

/// A file-backed emulated zoned device. Clones share the device.
#[derive(Clone)]
pub struct EmuDevice {
    inner: Arc<EmuInner>,
}

/// An error of a runtime op on the device file (the runtime error names the op).
fn rt_err(path: &Path, e: ziob_runtime::Error) -> DeviceError {
    DeviceError::io(format!("emu:{}", path.display()), e)
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

/// Turns on `O_DIRECT` for `f` if the filesystem allows it; returns whether it is on.
fn try_direct(path: &Path, f: &std::fs::File) -> bool {
    let fd = f.as_raw_fd();
    // SAFETY: F_GETFL/F_SETFL on a descriptor `f` owns change only its status flags.
    let ok = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_DIRECT) == 0
    };
    if !ok {
        tracing::info!(path = %path.display(), "O_DIRECT refused, using buffered I/O");
    }
    ok
}

/// Returns the reservation of a write whose task is dropped before its transfer finished (at
/// runtime shutdown, also before the task ever ran: the guard is made before the task is
/// spawned): the write counts as failed, so the zone does not stay reserved.
struct Unfinished {
    dev: EmuDevice,
    r: Option<Reservation>,
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if let Some(r) = self.r.take() {
            let fate = self.dev.complete(r, false, None);
            debug_assert_ne!(
                fate,
                WriteFate::Pending,
                "a failed reservation is never pending"
            );
        }
    }
}

/// A write waiting in its zone's queue ([`EmuDevice::reserve`]); dropped before its turn, it
/// leaves the queue and lets the next one go.
struct QueuedWrite<'a> {
    dev: &'a EmuDevice,
    zone: u32,
    ticket: Option<u64>,
}

impl Drop for QueuedWrite<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.ticket.take() {
            let waiters = {
                let mut c = self.dev.controller();
                let q = &mut c.queued[self.zone as usize];
                if let Some(pos) = q.iter().position(|&x| x == t) {
                    q.remove(pos);
                }
                c.take_waiters(self.zone)
            };
            waiters.into_iter().for_each(Waker::wake);
        }
    }
}

/// The handle of work spawned with [`run_detached`]: dropping it lets the work run on.
struct Detached<T>(Option<ziob_runtime::Task<std::thread::Result<T>>>);

impl<T> std::future::Future for Detached<T> {
    type Output = T;
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let task = self.0.as_mut().expect("polled after completion");
        let out = std::task::ready!(std::pin::Pin::new(task).poll(cx));
        self.0 = None;
        match out {
            Ok(out) => Poll::Ready(out),
            // The work panicked: the caller unwinds with its message.
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

/// Runs `work` in a task of its own on this core and waits for it; if the returned future
/// is dropped, the work runs on to its end. A panic in the work continues in the caller (or
/// is logged, once the caller is gone).
fn run_detached<T: 'static>(work: impl std::future::Future<Output = T> + 'static) -> Detached<T> {
    use futures::FutureExt;
    let task = ziob_runtime::spawn(async move {
        let out = std::panic::AssertUnwindSafe(work).catch_unwind().await;
        if out.is_err() {
            tracing::error!("an emu write, flush or zone action panicked");
        }
        out
    });
    Detached(Some(task))
}

impl<T> Drop for Detached<T> {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.detach();
        }
    }
}

impl EmuDevice {
    /// Creates a new device file at `path` (which must not exist) with every zone Empty and
    /// opens it read-write. The file is sparse: data space is allocated as zones are written.
    pub async fn create(path: impl AsRef<Path>, geometry: &Geometry) -> Result<EmuDevice> {
        let path = path.as_ref();
        geometry.validate()?;
        let layout = Layout::for_geometry(geometry);
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| io_err(path, "create", e))?;
        let mut device_lock = None;
        let result = async {
            device_lock = Some(lock::acquire(path, &f, OpenMode::ReadWrite).await?);
            use std::os::unix::fs::FileExt;
            f.set_len(layout.file_bytes(geometry))
                .map_err(|e| io_err(path, "set length", e))?;
            f.write_all_at(&format::encode_header(geometry, &layout), 0)
                .map_err(|e| io_err(path, "write header", e))?;
            let empty: Vec<TableEntry> = ZoneTable::new(geometry)
                .snapshot()
                .into_iter()
                .map(TableEntry::unchecked)
                .collect();
            for seq in 0..2u64 {
                let slot = format::encode_table(&layout, seq, &empty);
                f.write_all_at(&slot, layout.slot_offset(seq % 2))
                    .map_err(|e| io_err(path, "write zone table", e))?;
            }
            f.sync_all().map_err(|e| io_err(path, "fsync", e))?;
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
        let name = format!("emu:{}", path.display());
        let device_lock = device_lock.expect("locked before anything was written");
        EmuDevice::from_locked(
            (f, device_lock),
            path,
            LatencyModel::default(),
            name,
            OpenMode::ReadWrite,
            true,
        )
    }

    /// Opens an existing device file read-write (exclusive lock: [`DeviceError::Busy`] while
    /// anyone else has it open). A missing, truncated or damaged file is an error
    /// ([`DeviceError::Io`] or [`DeviceError::Corrupt`]); nothing is ever reformatted.
    pub async fn open(path: impl AsRef<Path>, latency: LatencyModel) -> Result<EmuDevice> {
        let path = path.as_ref();
        let name = format!("emu:{}", path.display());
        EmuDevice::open_named(path, latency, name, OpenMode::ReadWrite, true).await
    }

    /// Opens an existing device file read-write like [`EmuDevice::open`], but reads and writes
    /// it through the host's page cache (never `O_DIRECT`; the spec option `direct=0`). Reads
    /// of recently used data then cost a memory copy instead of a device read, as for a
    /// file-based store with buffered I/O; durability is unchanged (a flush `fdatasync`s).
    pub async fn open_through_page_cache(
        path: impl AsRef<Path>,
        latency: LatencyModel,
    ) -> Result<EmuDevice> {
        let path = path.as_ref();
        let name = format!("emu:{},direct=0", path.display());
        EmuDevice::open_named(path, latency, name, OpenMode::ReadWrite, false).await
    }

    /// Opens an existing device file for reports and reads only: needs only read permission,
    /// takes a shared lock (any number of read-only openers, [`DeviceError::Busy`] while it is
    /// open read-write). See [`OpenMode::ReadOnly`].
    pub async fn open_read_only(
        path: impl AsRef<Path>,
        latency: LatencyModel,
    ) -> Result<EmuDevice> {
        let path = path.as_ref();
        let name = format!("emu:{}", path.display());
        EmuDevice::open_named(path, latency, name, OpenMode::ReadOnly, true).await
    }

    /// Opens the device file; `allow_direct: false` keeps it off `O_DIRECT` (`direct=0`).
    pub(crate) async fn open_named(
        path: &Path,
        latency: LatencyModel,
        name: String,
        mode: OpenMode,
        allow_direct: bool,
    ) -> Result<EmuDevice> {
        latency.validate()?;
        let locked = open::open_locked(path, mode).await?;
        EmuDevice::from_locked(locked, path, latency, name, mode, allow_direct)
    }

    /// Builds the device on a locked descriptor of its file.
    fn from_locked(
        (f, device_lock): (std::fs::File, lock::DeviceClaim),
        path: &Path,
        latency: LatencyModel,
        name: String,
        mode: OpenMode,
        allow_direct: bool,
    ) -> Result<EmuDevice> {
        let loaded = open::load(&f, path, mode)?;
        let direct = allow_direct
            && loaded.geometry.block_size_bytes >= EMU_DIRECT_BLOCK_SIZE_BYTES_MIN
            && try_direct(path, &f);
        let zones = loaded.geometry.zone_count as usize;
        // A read-only device never writes: no `lseek` per zone to learn what it would zero.
        let written_to = |(zone, z): (usize, &PersistedZone)| match mode {
            OpenMode::ReadWrite => host_written_to(&f, &loaded.layout, &loaded.geometry, zone, z),
            OpenMode::ReadOnly => z.written_bytes,
        };
        let zero_ahead = ZeroAhead::new(
            loaded.table.snapshot().iter().enumerate().map(written_to),
            loaded.geometry.zone_capacity_bytes,
            loaded.geometry.block_size_bytes,
        );
        Ok(EmuDevice {
            inner: Arc::new(EmuInner {
                name,
                path: path.to_path_buf(),
                geometry: loaded.geometry,
                layout: loaded.layout,
                inline: (!direct && latency.is_off() && mode == OpenMode::ReadWrite)
                    .then(|| InlineWrites::new_or_none(&f, path))
                    .flatten(),
                file: File::from_std(f),
                direct,
                mode,
                latency,
                recovery: loaded.recovery,
                controller: Mutex::new(Controller {
                    table: loaded.table,
                    waiters: vec![Vec::new(); zones],
                    draining: vec![0; zones],
                    queued: vec![std::collections::VecDeque::new(); zones],
                    next_ticket: 0,
                    checks: DataChecks::new(loaded.geometry.zone_count),
                    zero_ahead,
                }),
                persist: futures::lock::Mutex::new(Persisted {
                    next_sequence: loaded.sequence + 1,
                    zones: None,
                    checked: false,
                }),
                fdatasyncs: AtomicU64::new(0),
                zeroed_ahead: AtomicU64::new(0),
                write_behind: WriteBehind::new(path.to_path_buf(), true),
                faults: HostFaults::default(),
                nowait_unsupported: AtomicBool::new(false),
                discard: AtomicBool::new(false),
                _lock: device_lock,
            }),
        })
    }

    /// Sets whether a reset gives the zone's space back to the host filesystem by punching a
    /// hole over its data (`FALLOC_FL_PUNCH_HOLE`; the spec option `discard=1`). Off by
    /// default: the file never grows past the device's size (zones × zone size) anyway, and on
    /// ext4 writes into punched holes must allocate blocks again, which halved the append
    /// rate of zones that are reset and rewritten. Applies to every handle of this device.
    pub fn discard_on_reset(self, on: bool) -> EmuDevice {
        self.inner.discard.store(on, Ordering::Relaxed);
        self
    }

    /// The device file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Whether data I/O bypasses the page cache (`O_DIRECT`).
    pub fn is_direct(&self) -> bool {
        self.inner.direct
    }

    /// How the device was opened.
    pub fn mode(&self) -> OpenMode {
        self.inner.mode
    }

    /// Set when the open found one zone-table slot damaged and used the other (a torn table
    /// write, a newest table whose data checks failed — which a read-write open then writes
    /// over, see [`TableRecovery::retired`] — or a damaged older copy; see
    /// `docs/format.md`). Nothing acknowledged was lost, unless a failed data check came from
    /// damage to data after its flush completed rather than from a crash (see
    /// [`TableRecovery::torn_newest_write`]); a tool should say so. The open also logged it
    /// with `tracing::warn!`.
    pub fn recovery(&self) -> Option<&TableRecovery> {
        self.inner.recovery.as_ref()
    }

    /// Fault injection for tests: the data write with index `data_write_index` (0-based,
    /// counting the data writes and appends this device issued since it was opened, in the
    /// order their transfers start) fails with `errno` (e.g. `libc::ENOSPC`) without writing
    /// anything, as a host I/O error would.
    pub fn fail_data_write(&self, data_write_index: u64, errno: i32) {
        self.inner.faults.plan(data_write_index, errno);
    }

    /// Fault injection for tests: the next zone-table write (of a flush or zone action) fails
    /// with `errno` (non-zero, e.g. `libc::EIO`) without writing anything, as a host I/O
    /// error would.
    pub fn fail_table_write(&self, errno: i32) {
        self.inner.faults.table.store(errno, Ordering::Relaxed);
    }

    /// The `fdatasync`s this device issued since it was opened (each flush and zone action
    /// issues 0, 1 or 2, see `docs/format.md`), for tests and tools that check what a flush
    /// cost.
    pub fn fdatasyncs(&self) -> u64 {
        self.inner.fdatasyncs.load(Ordering::Relaxed)
    }

    /// Sets whether short writes make the device write zeros over the next host blocks of
    /// their zone ahead of them (the spec option `zero_ahead=0` turns it off; on by
    /// default). The file is sparse, and a flush's `fdatasync` after writes into blocks the
    /// host has not allocated yet also commits their allocation: zeroing 1 MiB at a time
    /// ahead of a zone's short writes (at most 64 KiB each) commits it once per MiB instead.
    /// It writes each such block twice on the host; zones written in long runs are not
    /// zeroed. Applies to every handle of this device.
    pub fn zero_ahead(self, on: bool) -> EmuDevice {
        self.controller().zero_ahead.set_enabled(on);
        self
    }

    /// Sets whether a data write through the page cache that fills a 1 MiB chunk of the
    /// device file starts that chunk's write-back to the disk (the spec option
    /// `write_behind=0` turns it off; on by default; no effect with `O_DIRECT`). A flush's
    /// `fdatasync` writes back everything dirty in the file, every zone's data since the last
    /// flush; with the chunks written back as they fill, little is left for it. Durability
    /// does not change. Applies to every handle of this device.
    pub fn write_behind(self, on: bool) -> EmuDevice {
        self.inner.write_behind.set(on);
        self
    }

    /// Bytes whose write-back this device started since it was opened (handed to
    /// `sync_file_range`, see [`EmuDevice::write_behind`]).
    pub fn written_behind_bytes(&self) -> u64 {
        self.inner.write_behind.started_bytes()
    }

    /// Bytes of zeros this device wrote ahead of short writes since it was opened (see
    /// [`EmuDevice::zero_ahead`]).
    pub fn zeroed_ahead_bytes(&self) -> u64 {
        self.inner.zeroed_ahead.load(Ordering::Relaxed)
    }

    /// Fault injection for tests: the `fdatasync` after the next zone-table write fails with
    /// `errno` (non-zero, e.g. `libc::EIO`) after the table was written (to the page cache or
    /// the drive's cache, where it may still become durable), as a host I/O error would.
    pub fn fail_table_sync(&self, errno: i32) {
        self.inner.faults.table_sync.store(errno, Ordering::Relaxed);
    }

    fn controller(&self) -> MutexGuard<'_, Controller> {
        // Every table change is checked before it is made, so a poisoned lock is consistent.
        self.inner
            .controller
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Refuses a change on a read-only device, and a write off a runtime core (its transfer
    /// task needs the core; refused before anything is reserved).
    /// `what` names the change for the error (built only on error).
    fn check_may_change(&self, what: impl FnOnce() -> String) -> Result<()> {
        if !ziob_runtime::on_core() {
            return Err(rt_err(
                &self.inner.path,
                ziob_runtime::Error::NotOnCore("emu write, append or zone action"),
            ));
        }
        if self.inner.mode == OpenMode::ReadOnly {
            return Err(DeviceError::ReadOnlyDevice {
                name: self.inner.name.clone(),
                what: what(),
            });
        }
        Ok(())
    }

    /// Writes all of `buf` at file position `pos`: copied on this core when the device has
    /// [`InlineWrites`] and `buf` is short, through the ring otherwise.
    /// A write that fails because the host filesystem is full (`ENOSPC`, `EDQUOT`) gives
    /// back the space past the write pointers ([`EmuDevice::give_back_space_ahead`]) and, if
    /// that freed any, is tried once more.
    async fn write_at(&self, buf: DmaBuf, pos: u64) -> (Result<()>, DmaBuf) {
        let (mut res, mut buf) = self.write_once(buf, pos).await;
        let full = |res: &std::result::Result<(), ziob_runtime::Error>| {
            matches!(res, Err(ziob_runtime::Error::Io { source, .. })
                if matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)))
        };
        if full(&res) && self.give_back_space_ahead() {
            (res, buf) = self.write_once(buf, pos).await;
        }
        (res.map_err(|e| rt_err(&self.inner.path, e)), buf)
    }

    async fn write_once(
        &self,
        buf: DmaBuf,
        pos: u64,
    ) -> (std::result::Result<(), ziob_runtime::Error>, DmaBuf) {
        match self.inner.inline.as_ref().and_then(|i| i.write(&buf, pos)) {
            Some(res) => {
                let res = res.map_err(|source| ziob_runtime::Error::Io {
                    op: "write",
                    source,
                });
                (res, buf)
            }
            None => self.inner.file.write_all_at(buf, pos).await,
        }
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

    /// Ends a reservation in the table (`crc32c`: its data's checksum, if it was short enough
    /// to compute one) and wakes the zone's waiting writes and actions.
    fn complete(&self, r: Reservation, ok: bool, crc32c: Option<u32>) -> WriteFate {
        let (fate, waiters) = {
            let mut c = self.controller();
            if ok {
                c.checks.record(r.zone, r.offset_bytes, r.len_bytes, crc32c);
                c.zero_ahead.wrote(r.zone, r.end_bytes());
            }
            let fate = c.table.complete(r, ok);
            (fate, c.take_waiters(r.zone))
        };
        waiters.into_iter().for_each(Waker::wake);
        fate
    }

    /// Reserves a write of `len` bytes with `begin` once no reset or finish of `zone` is in
    /// progress, every write issued to the zone before it has been reserved and it would not
    /// reach into zeros still being written ahead (a zone that does not exist goes straight
    /// to `begin`, which refuses it). A short write may start zeroing the next window.
    async fn reserve(
        &self,
        zone: u32,
        len: u64,
        mut begin: impl FnMut(&mut ZoneTable) -> Result<Reservation>,
    ) -> Result<Reservation> {
        let i = zone as usize;
        if i >= self.inner.geometry.zone_count as usize {
            return begin(&mut self.controller().table);
        }
        let mut queued = QueuedWrite {
            dev: self,
            zone,
            ticket: None,
        };
        std::future::poll_fn(|cx| {
            let mut c = self.controller();
            let at = c.table.info(zone).map_or(0, |z| z.write_pointer_bytes);
            let free = c.draining[i] == 0 && !c.zero_ahead.holds_back(zone, at, len);
            let turn = match queued.ticket {
                None => free && c.queued[i].is_empty(),
                Some(t) => free && c.queued[i].front() == Some(&t),
            };
            if turn {
                let mut next = Vec::new();
                if queued.ticket.take().is_some() {
                    c.queued[i].pop_front();
                    next = c.take_waiters(zone);
                }
                let r = begin(&mut c.table);
                let job = r
                    .as_ref()
                    .ok()
                    .and_then(|r| c.zero_ahead.plan(zone, r.end_bytes(), r.len_bytes));
                drop(c);
                next.into_iter().for_each(Waker::wake);
                if let Some(job) = job {
                    self.start_zeroing(job);
                }
                return Poll::Ready(r);
            }
            if queued.ticket.is_none() {
                let t = c.next_ticket;
                c.next_ticket += 1;
                c.queued[i].push_back(t);
                queued.ticket = Some(t);
            }
            c.waiters[i].push(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Starts a reset or finish of `target`: new writes to its zones wait from now on (wait
    /// for the writes in flight with [`Draining::drained`]). The zones go back to taking
    /// writes when the returned guard is dropped.
    fn start_drain(&self, target: ZoneTarget) -> Draining {
        let zones: Vec<u32> = match target {
            ZoneTarget::One(z) if z < self.inner.geometry.zone_count => vec![z],
            // A zone that does not exist: the action itself refuses it.
            ZoneTarget::One(_) => Vec::new(),
            ZoneTarget::All => (0..self.inner.geometry.zone_count).collect(),
        };
        {
            let mut c = self.controller();
            for &z in &zones {
                c.draining[z as usize] += 1;
            }
        }
        Draining {
            dev: self.clone(),
            zones,
        }
    }

    /// Waits until the fate of a reservation that completed as [`WriteFate::Pending`] is
    /// decided.
    async fn fate_of(&self, r: Reservation) -> WriteFate {
        std::future::poll_fn(|cx| {
            let mut c = self.controller();
            if let Some(fate) = c.table.take_fate(&r) {
                return Poll::Ready(fate);
            }
            c.waiters[r.zone as usize].push(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    async fn write_reserved(&self, r: Result<Reservation>, buf: DmaBuf) -> (Result<u64>, DmaBuf) {
        let r = match r {
            Ok(r) => r,
            Err(e) => return (Err(e), buf),
        };
        // The transfer runs in its own task: dropping this future lets it finish.
        run_detached(self.transfer(r, buf)).await
    }

    /// The task that moves a reserved write's data and settles its reservation (its
    /// [`Unfinished`] guard is made here, before the task is spawned).
    fn transfer(
        &self,
        r: Reservation,
        buf: DmaBuf,
    ) -> impl std::future::Future<Output = (Result<u64>, DmaBuf)> + 'static {
        let unfinished = Unfinished {
            dev: self.clone(),
            r: Some(r),
        };
        self.clone().carry_out(r, unfinished, buf)
    }

    /// Moves reservation `r`'s data and settles it (`unfinished` holds it meanwhile).
    async fn carry_out(
        self,
        r: Reservation,
        mut unfinished: Unfinished,
        buf: DmaBuf,
    ) -> (Result<u64>, DmaBuf) {
        self.model_delay(r.len_bytes).await;
        let path = &self.inner.path;
        let crc32c = DataChecks::checksum(&buf);
        let (res, buf) = match self.inner.faults.next() {
            Some(errno) => (
                Err(DeviceError::io(
                    format!("emu:{}: write (injected host error)", path.display()),
                    std::io::Error::from_raw_os_error(errno),
                )),
                buf,
            ),
            None => {
                let pos = self.data_pos(r.zone, r.offset_bytes);
                self.write_at(buf, pos).await
            }
        };
        unfinished.r = None;
        let mut fate = self.complete(r, res.is_ok(), crc32c);
        if fate == WriteFate::Pending {
            fate = self.fate_of(r).await;
        }
        let bs = self.inner.geometry.block_size_bytes;
        let res = match (fate, res) {
            (WriteFate::Done, Ok(())) => {
                if !self.inner.direct {
                    let pos = self.data_pos(r.zone, r.offset_bytes);
                    self.inner
                        .write_behind
                        .wrote(&self.inner.file, pos, r.len_bytes);
                }
                Ok(r.offset_bytes)
            }
            (WriteFate::Failed, Err(e)) => Err(e),
            (WriteFate::Aborted, _) => Err(DeviceError::Aborted {
                op: r.op,
                zone: r.zone,
                offset_blocks: r.offset_bytes / bs,
                reason: "an earlier write to the zone failed while it \
                         was in flight; it does not count as written"
                    .into(),
            }),
            (fate, res) => unreachable!("reservation fate {fate:?} after a transfer {res:?}"),
        };
        (res, buf)
    }

    /// With [`EmuDevice::discard_on_reset`] on, gives the space of reset zones back to the
    /// host filesystem (best effort): punches a
    /// hole over the data of each zone in `zones` that is still Empty. Called while the reset
    /// still holds its [`Draining`] guard: no write is in flight in those zones, and none can
    /// be reserved there, while the hole is punched.
    fn punch_reset_zones(&self, zones: &[u32]) {
        if zones.is_empty() || !self.inner.discard.load(Ordering::Relaxed) {
            return;
        }
        let mut c = self.controller();
        for &zone in zones {
            let Ok(info) = c.table.info(zone) else {
                continue;
            };
            if info.state != ZoneState::Empty {
                continue;
            }
            debug_assert!(!c.table.has_in_flight(zone), "punching under a write");
            let zone_bytes = 0..self.inner.geometry.zone_size_bytes;
            if let Err(e) = self.punch_hole(zone, zone_bytes) {
                tracing::debug!(path = %self.inner.path.display(), zone, error = %e, "reset: the filesystem does not punch holes, the zone keeps its space");
                return;
            }
            c.zero_ahead.punched(zone);
        }
    }

    /// Gives the host space of `range` (bytes from the zone start) back to the host
    /// filesystem. The caller makes sure that no write is in flight there.
    fn punch_hole(&self, zone: u32, range: std::ops::Range<u64>) -> std::io::Result<()> {
        let pos = self.data_pos(zone, range.start) as libc::off_t;
        let len = (range.end - range.start) as libc::off_t;
        // SAFETY: fallocate on the device's own descriptor; no memory is passed.
        let rc = unsafe {
            libc::fallocate(
                self.inner.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                pos,
                len,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
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

    /// Without `O_DIRECT` reads go through the page cache and may take any byte range.
    fn read_granularity_bytes(&self) -> u64 {
        if self.inner.direct {
            self.inner.geometry.block_size_bytes
        } else {
            1
        }
    }

    async fn report_zones(&self, first: u32, count: u32) -> Result<Vec<ZoneInfo>> {
        self.controller().table.report(first, count)
    }

    /// Through the page cache (`direct=0`, no latency model) only, and only when every byte
    /// is cached there: one `preadv2` with `RWF_NOWAIT`, which never waits for the disk.
    fn read_now(&self, zone: u32, offset_bytes: u64, len: usize) -> Option<Result<Vec<u8>>> {
        let mut out: Vec<u8> = Vec::with_capacity(len);
        match self.read_now_into(zone, offset_bytes, &mut out.spare_capacity_mut()[..len])? {
            Ok(_) => {
                // SAFETY: `read_now_into` answered `Ok`, so it initialised all `len` bytes of
                // the spare capacity it was given, the first `len` of the allocation.
                unsafe { out.set_len(len) };
                Some(Ok(out))
            }
            Err(e) => Some(Err(e)),
        }
    }

    /// As [`read_now`](Self::read_now), straight into `out`: the one `preadv2` writes there.
    fn read_now_into<'a>(
        &self,
        zone: u32,
        offset_bytes: u64,
        out: &'a mut [std::mem::MaybeUninit<u8>],
    ) -> Option<Result<&'a mut [u8]>> {
        if self.inner.direct
            || !self.inner.latency.is_off()
            || self.inner.nowait_unsupported.load(Ordering::Relaxed)
        {
            return None;
        }
        let len = out.len();
        let checked = self
            .controller()
            .table
            .check_read_unaligned(zone, offset_bytes, len as u64);
        let data_end = match checked {
            Ok(end) => end,
            Err(e) => return Some(Err(e)),
        };
        let with_data = data_end.saturating_sub(offset_bytes).min(len as u64) as usize;
        if with_data > 0 {
            let pos = i64::try_from(self.data_pos(zone, offset_bytes)).ok()?;
            let iov = libc::iovec {
                iov_base: out.as_mut_ptr().cast(),
                iov_len: with_data,
            };
            // SAFETY: the kernel writes at most `iov_len` = `with_data` <= `out.len()` bytes
            // into `out` (the one iovec covers only that memory, which is ours for the call;
            // writing bytes into `MaybeUninit<u8>`s is always valid), and nothing after the
            // call returns; the descriptor stays open while `self` lives.
            let got = unsafe {
                libc::preadv2(self.inner.file.as_raw_fd(), &iov, 1, pos, libc::RWF_NOWAIT)
            };
            if got < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EOPNOTSUPP) {
                self.inner.nowait_unsupported.store(true, Ordering::Relaxed);
            }
            // Not cached (EAGAIN), short, or failed: `read` does it (and reports errors).
            if usize::try_from(got).ok()? != with_data {
                return None;
            }
        }
        // Past the data: zeros.
        out[with_data..].fill(std::mem::MaybeUninit::new(0));
        // SAFETY: every byte of `out` is initialised: `[0, with_data)` by the kernel (the
        // read returned exactly `with_data`, checked above), the rest by the fill.
        Some(Ok(unsafe {
            std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<u8>(), out.len())
        }))
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
        let checked = {
            let ctl = self.controller();
            if self.inner.direct {
                ctl.table.check_read(zone, offset_bytes, len as u64)
            } else {
                ctl.table
                    .check_read_unaligned(zone, offset_bytes, len as u64)
            }
        };
        let data_end = match checked {
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
        // Only the bytes holding data: the page cache copies no more than that (an O_DIRECT
        // read is whole blocks, and `len` is then the buffer's capacity).
        let (res, buf) = self
            .inner
            .file
            .read_at(Limited::new(buf, with_data), pos)
            .await;
        let mut buf = buf.into_inner();
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
        if let Err(e) = self.check_may_change(|| format!("write to zone {zone}")) {
            return (Err(e), buf);
        }
        let len = buf.len() as u64;
        let r = self
            .reserve(zone, len, |t| t.begin_write(zone, offset_bytes, len))
            .await;
        let (res, buf) = self.write_reserved(r, buf).await;
        (res.map(|_| ()), buf)
    }

    async fn append(&self, zone: u32, buf: DmaBuf) -> (Result<u64>, DmaBuf) {
        if let Err(e) = self.check_may_change(|| format!("append to zone {zone}")) {
            return (Err(e), buf);
        }
        let len = buf.len() as u64;
        let r = self.reserve(zone, len, |t| t.begin_append(zone, len)).await;
        self.write_reserved(r, buf).await
    }

    async fn zone_action(&self, action: ZoneAction, target: ZoneTarget) -> Result<()> {
        self.check_may_change(|| format!("{action} {target:?}"))?;
        // A reset or finish holds new writes to its zones back from its first poll on (so
        // writes issued after it go after it); it waits for the zone's writes in flight
        // before it is persisted: a transfer still running would land after it.
        let draining = match action {
            ZoneAction::Reset | ZoneAction::Finish => Some(self.start_drain(target)),
            _ => None,
        };
        // Runs to its end in a task of its own (see the module doc, "Writes in flight").
        let dev = self.clone();
        run_detached(async move {
            if let Some(draining) = &draining {
                draining.drained().await;
            }
            let out = dev.carry_out_action(action, target).await;
            drop(draining);
            out
        })
        .await
    }

    async fn flush(&self) -> Result<()> {
        if self.inner.mode == OpenMode::ReadOnly {
            return Ok(());
        }
        if !ziob_runtime::on_core() {
            return Err(rt_err(
                &self.inner.path,
                ziob_runtime::Error::NotOnCore("emu flush"),
            ));
        }
        // Runs to its end in a task of its own (see the module doc, "Writes in flight").
        let dev = self.clone();
        run_detached(async move {
            dev.model_delay(0).await;
            dev.persist().await
        })
        .await
    }
}

impl EmuDevice {
    /// Carries out a zone action (in its own task, see [`ZonedDevice::zone_action`]; a reset
    /// or finish holds its [`Draining`] guard, and its zones have no write in flight).
    async fn carry_out_action(&self, action: ZoneAction, target: ZoneTarget) -> Result<()> {
        self.model_delay(0).await;
        // The table as it is after the action is persisted first, and only then is the action
        // applied: a failed table write leaves it undone (not done in memory but not durable,
        // where writes after a reset could mix with the old data after a crash).
        let reset_zones = self
            .persist_with(
                |table| {
                    let mut after = table.clone();
                    after.apply(action, target)?;
                    Ok(after.snapshot())
                },
                |table| {
                    let reset_zones = match (action, target) {
                        (ZoneAction::Reset, ZoneTarget::One(z)) => vec![z],
                        (ZoneAction::Reset, ZoneTarget::All) => table
                            .report(0, u32::MAX)?
                            .iter()
                            .filter(|z| z.state.is_active() || z.state == ZoneState::Full)
                            .map(|z| z.index)
                            .collect(),
                        _ => Vec::new(),
                    };
                    // Applied before the next table write can start, so none can miss it.
                    // The zones of a reset or finish cannot have changed since the snapshot
                    // (they are drained and hold new writes back). An open or close can meet
                    // a change another zone's writes made to the open resources meanwhile;
                    // then it is refused here, and the next table write stores the table
                    // without it.
                    table.apply(action, target)?;
                    Ok(reset_zones)
                },
            )
            .await?;
        self.punch_reset_zones(&reset_zones);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a fresh one-core runtime.
    pub(in crate::emu) fn on_core<T, F>(f: impl FnOnce() -> F + Send + 'static) -> T
    where
        T: Send + 'static,
        F: std::future::Future<Output = T> + 'static,
    {
        let rt = ziob_runtime::Runtime::builder().cores(1).build().unwrap();
        rt.block_on(f).unwrap()
    }

    #[test]
    fn a_transfer_task_dropped_before_it_ran_settles_its_reservation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.zns");
        on_core(move || async move {
            let dev = EmuDevice::create(&path, &Geometry::new(2, 1 << 20))
                .await
                .unwrap();
            let r = dev
                .reserve(0, 4096, |t| t.begin_append(0, 4096))
                .await
                .unwrap();
            assert!(dev.controller().table.has_in_flight(0));
            // What a runtime shutdown does to a transfer task still queued.
            drop(dev.transfer(r, DmaBuf::from_slice(&[7; 4096])));
            assert!(!dev.controller().table.has_in_flight(0), "still reserved");
            let (res, _) = dev.append(0, DmaBuf::from_slice(&[8; 4096])).await;
            assert_eq!(res.unwrap(), 0, "the zone takes writes at the same place");
        });
    }
}
