//! [`Ziob`] and [`Zone`]: the handle applications use from any core. Each request runs on
//! the core that owns its zone (`placement`); requests from other cores travel there by
//! message passing (`ziob_runtime::call_on`).

use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use tracing::Instrument;

use ziob_backends::{
    open_device, AnyDevice, Geometry, ZoneAction, ZoneInfo, ZoneTarget, ZonedDevice,
};
use ziob_runtime::{call_on, core_id, num_cores, DmaBuf};

use crate::config::ZiobConfig;
use crate::error::{Result, ZiobError};
use crate::metrics::MetricsSnapshot;
use crate::metrics::ShardStats;
use crate::on_device::OnDevice;
use crate::placement::owner_core;
use crate::shard::{run_to_completion, Shard};

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

/// Most bytes a read does synchronously on the calling thread ([`Ziob::read_direct_now`]):
/// beyond it a copy would hold up a core's other tasks (or a foreign executor's) for long.
pub(crate) const READ_NOW_MAX_BYTES: usize = 1 << 20;

/// A range the device holds (written back), and what the reader saw of its zone's seqlock.
struct DirectRange {
    start: u64,
    end: u64,
    seen: crate::on_device::Seen,
}

thread_local! {
    /// The shards living on this core, by instance id.
    static SHARDS: RefCell<HashMap<u64, Rc<dyn Any>>> = RefCell::new(HashMap::new());
}

/// This core's shard of instance `id` (`Closed` once it was removed).
fn local_shard<D: ZonedDevice>(id: u64) -> Result<Rc<Shard<D>>> {
    SHARDS.with(|s| {
        s.borrow()
            .get(&id)
            .cloned()
            .and_then(|a| a.downcast::<Shard<D>>().ok())
            .ok_or(ZiobError::Closed)
    })
}

struct Inner<D: ZonedDevice> {
    id: u64,
    device: D,
    geometry: Geometry,
    /// The geometry the buffer presents as a device (limits lifted when buffered).
    view_geometry: Geometry,
    view_name: String,
    config: ZiobConfig,
    cores: usize,
    /// What any core may read straight from the device (published by the owners).
    on_device: Arc<OnDevice>,
    closed: AtomicBool,
    /// The runtime's cores, reachable from any thread (the [`Client`](crate::Client) and the
    /// drop path).
    handle: ziob_runtime::Handle,
}

impl<D: ZonedDevice> Drop for Inner<D> {
    /// The last handle of an instance that was neither closed nor abandoned is gone: close
    /// its shards in the background (sync, then remove), as [`Ziob::close`] would. Nobody is
    /// left to take an error: it is logged (`tracing` warning). If the runtime is stopped
    /// (or stops first), the shards are gone with it and unflushed data is lost.
    fn drop(&mut self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let id = self.id;
        for core in 0..self.cores {
            let sent = self.handle.spawn_on(core, move || async move {
                if let Err(e) = close_shard::<D>(id).await {
                    tracing::warn!(instance = id, core, error = %e, "closing a dropped ZIOB instance failed");
                }
            });
            if let Err(e) = sent {
                tracing::debug!(instance = id, core, error = %e, "dropped ZIOB instance: core not running");
            }
        }
    }
}

/// A ZIOB instance: a zoned device with a zone write buffer in front of it, sharded over the
/// runtime's cores (or its first [`ZiobConfig::cores`]). Clone it freely and use it from any
/// core: calls from a core without a shard go to the owner like any other.
///
/// # Durability
/// A completed [`append`](Ziob::append) or [`write_at`](Ziob::write_at) means the data is in
/// the buffer — like a drive's volatile write cache, a crash may lose it. A completed
/// [`flush`](Ziob::flush) (one zone) or [`sync`](Ziob::sync) (all zones) means the data is on
/// the device and durable there: the device's cache is flushed, or — a zone flush on a device
/// with durable writes ([`ZonedDevice::has_durable_writes`]) whose zone was durable up to its
/// write-back — the write-back was a Force-Unit-Access write. A zone flush promises nothing
/// about other zones. A flush pads a partial last block with zeros:
/// the write pointer moves to the next block boundary, so the next append gets that offset.
///
/// # Cancel safety
/// Every method may be dropped at any point, from any core, without leaving a zone held,
/// memory charged or the instance stuck. What a dropped call did depends on the method (each
/// says), never on which core the caller is on:
/// - appends and writes happen whole or not at all (which one is not reported: a call that
///   reached the owning core may complete after its caller gave up);
/// - reads, reports and statistics change nothing;
/// - a flush or sync may have padded partial blocks and started write-back, which goes on;
///   nothing is promised durable;
/// - zone actions and [`close`](Ziob::close), once started, run to the end.
///
/// # Errors of write-back
/// See the crate docs ("Write-back errors") for the exact rules: transient device errors are
/// retried; a write-back error that stays is kept by its zone only (its appends, writes and
/// flushes return it; `sync` and `close` name it in [`ZiobError::ZonesFailed`] while its
/// data is not durable, and still sync every other zone); the zone stays readable, and a
/// finish or reset ends the error.
#[derive(Clone)]
pub struct Ziob<D: ZonedDevice = AnyDevice> {
    inner: Arc<Inner<D>>,
}

impl Ziob<AnyDevice> {
    /// Opens the device named by `spec` (e.g. `emu:/var/tmp/dev.zns`, `mem:zones=64,zone_size=64M`)
    /// and starts a shard on every core (or on the first [`ZiobConfig::cores`]). Call it from
    /// a runtime core.
    ///
    /// # Cancel safety
    /// As [`Ziob::with_device`].
    pub async fn open(spec: &str, config: ZiobConfig) -> Result<Ziob<AnyDevice>> {
        let device = open_device(spec).await?;
        Ziob::with_device(device, config).await
    }
}

impl<D: ZonedDevice> Ziob<D> {
    /// Puts a buffer in front of `device` with one shard per core of the current runtime
    /// (or of its first [`ZiobConfig::cores`] cores).
    ///
    /// # Cancel safety
    /// If dropped part-way, the shards already started hold no data and stay, idle, until
    /// the runtime stops.
    pub async fn with_device(device: D, config: ZiobConfig) -> Result<Ziob<D>> {
        let geometry = *device.geometry();
        config.validate(&geometry)?;
        let cores = config.instance_cores(num_cores())?;
        let id = NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed);
        let on_device = Arc::new(OnDevice::new(geometry.zone_count, cores));
        for core in 0..cores {
            let (dev, cfg, on_dev) = (device.clone(), config.clone(), on_device.clone());
            let res = call_on(core, move || async move {
                let shard = Shard::new(core, cores, dev, &cfg, on_dev).await?;
                if cfg.buffered {
                    if let Some(idle) = cfg.idle_writeback {
                        ziob_runtime::spawn(shard.clone().idle_ticker(idle)).detach();
                    }
                }
                SHARDS.with(|s| s.borrow_mut().insert(id, shard as Rc<dyn Any>));
                Ok::<_, ZiobError>(())
            })
            .await?;
            if let Err(e) = res {
                for c in 0..core {
                    let _ = call_on(c, move || async move { remove_shard::<D>(id).await }).await;
                }
                return Err(e);
            }
        }
        Ok(Ziob {
            inner: Arc::new(Inner {
                id,
                view_geometry: Geometry {
                    max_open_zones: if config.buffered {
                        None
                    } else {
                        geometry.max_open_zones
                    },
                    max_active_zones: if config.buffered {
                        None
                    } else {
                        geometry.max_active_zones
                    },
                    ..geometry
                },
                view_name: format!(
                    "ziob({}{})",
                    device.name(),
                    if config.buffered {
                        ""
                    } else {
                        ", pass-through"
                    }
                ),
                device,
                geometry,
                config,
                cores,
                on_device,
                closed: AtomicBool::new(false),
                handle: ziob_runtime::handle(),
            }),
        })
    }

    /// The device's geometry (the buffer lifts the open/active limits, see the crate docs).
    pub fn geometry(&self) -> &Geometry {
        &self.inner.geometry
    }

    /// The geometry this instance presents as a [`ZonedDevice`]: the device's, with no
    /// open/active limits when buffered (the buffer lifts them).
    pub fn view_geometry(&self) -> &Geometry {
        &self.inner.view_geometry
    }

    /// The name this instance presents as a [`ZonedDevice`].
    pub fn view_name(&self) -> &str {
        &self.inner.view_name
    }

    /// The configuration.
    pub fn config(&self) -> &ZiobConfig {
        &self.inner.config
    }

    /// The device behind the buffer.
    pub fn device(&self) -> &D {
        &self.inner.device
    }

    /// A handle to one zone.
    pub fn zone(&self, zone: u32) -> Zone<D> {
        Zone {
            ziob: self.clone(),
            index: zone,
        }
    }

    /// How many cores the instance runs on (its shards are on cores `0..n`).
    pub fn cores(&self) -> usize {
        self.inner.cores
    }

    /// The core that owns `zone`.
    pub fn owner_core(&self, zone: u32) -> usize {
        owner_core(zone, self.inner.cores)
    }

    /// Runs `f` with the shard owning `zone`, on its core.
    async fn on_owner<F, Fut, T>(&self, zone: u32, f: F) -> Result<T>
    where
        F: FnOnce(Rc<Shard<D>>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T>> + 'static,
        T: Send + 'static,
    {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(ZiobError::Closed);
        }
        let owner = owner_core(zone, self.inner.cores);
        let id = self.inner.id;
        if owner == core_id() {
            // Buffered appends and reads often complete without waiting: let other tasks in.
            ziob_runtime::consume_budget().await;
            return admitted(id, f).await;
        }
        call_on(owner, move || admitted(id, f)).await?
    }

    /// The core of this instance's runtime the caller is on, if the range `[offset, offset +
    /// len)` of `zone` may be read there straight from the device ([`Ziob::read_direct`]):
    /// the zone is another core's and the device alone holds the range (written back, and
    /// no longer in the owner's memory).
    pub(crate) fn direct_read_core(&self, zone: u32, offset: u64, len: usize) -> Option<usize> {
        let here = self.inner.handle.local_core()?;
        let owner = owner_core(zone, self.inner.cores);
        (owner != here && self.direct_range(zone, offset, len, true).is_some()).then_some(here)
    }

    /// `[offset, offset + len)` of `zone` widened to the device's read granularity, if the
    /// owner published all of it as written back to the device ([`OnDevice`]) (with
    /// `not_in_owner_memory`: and no longer in the owner's memory, which the owner reads
    /// instead), the instance is open and the owner's core still runs (else the owner's path
    /// gives the error).
    fn direct_range(
        &self,
        zone: u32,
        offset: u64,
        len: usize,
        not_in_owner_memory: bool,
    ) -> Option<DirectRange> {
        let owner = owner_core(zone, self.inner.cores);
        if len == 0
            || self.inner.closed.load(Ordering::Acquire)
            || !self.inner.handle.core_running(owner)
        {
            return None;
        }
        let g = self.inner.device.read_granularity_bytes().max(1);
        let end = offset
            .checked_add(len as u64)?
            .checked_next_multiple_of(g)?;
        let start = offset / g * g;
        let seen = self
            .inner
            .on_device
            .readable(zone, start, end - start, not_in_owner_memory)?;
        Some(DirectRange { start, end, seen })
    }

    /// Reads `[offset, offset + len)` of `zone` at once on the calling thread — any thread,
    /// the owner's core included — when the device holds the range (as
    /// [`direct_read_core`](Self::direct_read_core) but on any core; on any thread but the
    /// owner's core also a range of which the owner's memory holds a clean copy: such a read
    /// is a copy from memory either way, and the owner's costs a hop to its core and back)
    /// and the device can read without waiting ([`ZonedDevice::read_now`]: a RAM device, an
    /// `emu` device's page cache), for at most [`READ_NOW_MAX_BYTES`]. `None` otherwise,
    /// and when the zone was reset during the read or the device read failed: then read
    /// the ordinary way.
    pub(crate) fn read_direct_now(&self, zone: u32, offset: u64, len: usize) -> Option<Vec<u8>> {
        if len > READ_NOW_MAX_BYTES {
            return None;
        }
        let here = self.inner.handle.local_core();
        let owner_here = here == Some(owner_core(zone, self.inner.cores));
        let r = self.direct_range(zone, offset, len, owner_here)?;
        let got = self
            .inner
            .device
            .read_now(zone, r.start, (r.end - r.start) as usize)?;
        let on_device = &self.inner.on_device;
        let ok = got.is_ok() && on_device.unchanged(r.seen);
        on_device.count(here, ok.then_some(len as u64));
        let got = got.ok().filter(|_| ok)?;
        let at = (offset - r.start) as usize;
        Some(if at == 0 && got.len() == len {
            got
        } else {
            got[at..at + len].to_vec()
        })
    }

    /// [`read_direct_now`](Self::read_direct_now) into the caller's memory: `out.len()` bytes
    /// at `offset` of `zone`, given back as `out` initialised; `None` (and nothing promised
    /// of `out`) where `read_direct_now` answers `None`. Where the device reads exactly the
    /// bytes asked for (granularity 1: a page cache, RAM), the device writes into `out`
    /// itself; else the widened read is copied out.
    pub(crate) fn read_direct_now_into<'a>(
        &self,
        zone: u32,
        offset: u64,
        out: &'a mut [std::mem::MaybeUninit<u8>],
    ) -> Option<&'a mut [u8]> {
        let len = out.len();
        if len > READ_NOW_MAX_BYTES {
            return None;
        }
        let here = self.inner.handle.local_core();
        let owner_here = here == Some(owner_core(zone, self.inner.cores));
        let r = self.direct_range(zone, offset, len, owner_here)?;
        if r.start != offset || r.end != offset + len as u64 {
            let data = self.read_direct_now(zone, offset, len)?;
            return Some(out.write_copy_of_slice(&data));
        }
        let got = self.inner.device.read_now_into(zone, offset, out)?;
        let on_device = &self.inner.on_device;
        let ok = got.is_ok() && on_device.unchanged(r.seen);
        on_device.count(here, ok.then_some(len as u64));
        got.ok().filter(|_| ok)
    }

    /// Reads `[offset, offset + len)` of `zone` straight from the device by the calling core
    /// when [`direct_read_core`](Self::direct_read_core) allows it: no hop to the owner,
    /// however busy the owner is. `None` when it does not, when the device read fails (the
    /// owner's read reports the error) or when the zone was reset during the read (what was
    /// read may be the new zone's): then read through the owner. On success the buffer
    /// read and where the requested bytes start in it.
    ///
    /// Not an admitted call: a [`close`](Self::close) does not wait for it (it reads only
    /// what the device already holds, and keeps the device open while it runs).
    pub(crate) async fn read_direct(
        &self,
        zone: u32,
        offset: u64,
        len: usize,
    ) -> Option<(DmaBuf, usize)> {
        let here = self.inner.handle.local_core()?;
        if owner_core(zone, self.inner.cores) == here {
            return None;
        }
        let r = self.direct_range(zone, offset, len, true)?;
        let n = (r.end - r.start) as usize;
        let (res, buf) = self
            .inner
            .device
            .read(zone, r.start, n, DmaBuf::with_capacity(n))
            .await;
        let on_device = &self.inner.on_device;
        let ok = res.is_ok() && on_device.unchanged(r.seen);
        on_device.count(Some(here), ok.then_some(len as u64));
        ok.then_some((buf, (offset - r.start) as usize))
    }

    /// The runtime handle of the cores this instance's shards live on.
    pub(crate) fn runtime_handle(&self) -> &ziob_runtime::Handle {
        &self.inner.handle
    }

    /// Runs `f` with this core's shard as an admitted call. The caller is on the core that
    /// owns what `f` touches (the [`Client`](crate::Client) sends it there).
    pub(crate) async fn on_local<F, Fut, T>(&self, f: F) -> Result<T>
    where
        F: FnOnce(Rc<Shard<D>>) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(ZiobError::Closed);
        }
        ziob_runtime::consume_budget().await;
        admitted(self.inner.id, f).await
    }

    /// Runs `f` with every shard, on its core, concurrently; results in core order.
    async fn on_all<F, Fut, T>(&self, f: F) -> Result<Vec<T>>
    where
        F: Fn(Rc<Shard<D>>) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = Result<T>> + 'static,
        T: Send + 'static,
    {
        let id = self.inner.id;
        let calls = (0..self.inner.cores).map(|core| {
            let f = f.clone();
            call_on(core, move || admitted(id, f))
        });
        futures::future::join_all(calls)
            .await
            .into_iter()
            .map(|r| r?)
            .collect()
    }

    /// Appends `data` to `zone` and returns the offset (bytes from the zone start) it was
    /// given. With the buffer on, the offset is assigned at once and the data is buffered;
    /// any length up to the zone's remaining capacity is accepted. Pass-through appends go to
    /// the device's Zone Append and must be block multiples within its append limit.
    ///
    /// # Cancel safety
    /// If dropped, the data was appended whole or not at all, and the offset is not
    /// reported. A buffered append is committed in one step; one larger than half the shard
    /// budget is streamed in pieces by a task of its own that finishes even if the call is
    /// dropped. A pass-through append dropped while the device has it is up to the device.
    pub async fn append(&self, zone: u32, data: DmaBuf) -> Result<u64> {
        self.append_returning(zone, data).await.0
    }

    /// [`Ziob::append`], handing the data buffer back for reuse. Cancel safety as
    /// [`Ziob::append`].
    pub async fn append_returning(&self, zone: u32, data: DmaBuf) -> (Result<u64>, Option<DmaBuf>) {
        let span = tracing::debug_span!("append", zone, len = data.len());
        match self
            .on_owner(zone, move |s| async move { Ok(s.append(zone, data).await) })
            .instrument(span)
            .await
        {
            Ok((res, buf)) => (res, Some(buf)),
            Err(e) => (Err(e), None),
        }
    }

    /// Writes `data` at `offset_bytes` of `zone`, which must be the zone's (logical) write
    /// pointer; otherwise Zone Invalid Write, as on the device.
    ///
    /// # Cancel safety
    /// As [`Ziob::append`]: written whole or not at all.
    pub async fn write_at(&self, zone: u32, offset_bytes: u64, data: DmaBuf) -> Result<()> {
        self.write_at_returning(zone, offset_bytes, data).await.0
    }

    /// [`Ziob::write_at`], handing the data buffer back for reuse. Cancel safety as
    /// [`Ziob::append`].
    pub async fn write_at_returning(
        &self,
        zone: u32,
        offset_bytes: u64,
        data: DmaBuf,
    ) -> (Result<()>, Option<DmaBuf>) {
        let span = tracing::debug_span!("write_at", zone, offset = offset_bytes, len = data.len());
        match self
            .on_owner(zone, move |s| async move {
                Ok(s.write_at(zone, offset_bytes, data).await)
            })
            .instrument(span)
            .await
        {
            Ok((res, buf)) => (res, Some(buf)),
            Err(e) => (Err(e), None),
        }
    }

    /// Reads `len` bytes at `offset_bytes` of `zone`. Data still in the buffer comes from
    /// memory (merged with device data where the range straddles what was written back);
    /// bytes past the write pointer read as zeros, as on the device. The range must end
    /// within the zone size (Zone Boundary Error otherwise).
    ///
    /// A range only the device holds (written back, no longer in the owner's memory), of a
    /// zone another core owns, is read by this core itself, without a hop to the owner (a
    /// reset of the zone meanwhile sends it to the owner after all).
    ///
    /// # Cancel safety
    /// A read changes nothing; dropping it is always safe.
    pub async fn read(&self, zone: u32, offset_bytes: u64, len: usize) -> Result<DmaBuf> {
        if let Some((buf, at)) = self.read_direct(zone, offset_bytes, len).await {
            if at == 0 && buf.len() == len {
                return Ok(buf);
            }
            let mut out = DmaBuf::with_capacity(len);
            out.extend_from_slice(&buf[at..at + len]);
            return Ok(out);
        }
        self.on_owner(zone, move |s| async move {
            s.read(zone, offset_bytes, len).await
        })
        .instrument(tracing::debug_span!(
            "read",
            zone,
            offset = offset_bytes,
            len
        ))
        .await
    }

    /// [`read`](Self::read) done at once on this thread, into a `Vec`, when this thread is
    /// the core owning `zone` and the shard can serve the range from memory without
    /// waiting (see `Shard::read_now`); `None` otherwise (closed, another core, a device
    /// read or a wait needed), and the caller reads the ordinary way.
    pub(crate) fn read_now(
        &self,
        zone: u32,
        offset_bytes: u64,
        len: usize,
    ) -> Option<Result<Vec<u8>>> {
        if self.inner.closed.load(Ordering::Acquire) {
            return None;
        }
        let shard = local_shard::<D>(self.inner.id).ok()?;
        let _call = shard.enter().ok()?;
        shard.read_now(zone, offset_bytes, len)
    }

    /// Writes `zone`'s buffered data to the device and makes it durable — by a flush of the
    /// device's cache, or, on a device with durable writes whose zone was durable up to the
    /// write-back, by writing it back with Force Unit Access: when it returns, everything
    /// appended to the zone before the call is durable (other zones: no promise).
    ///
    /// A partial last block is padded with zeros as soon as nothing holds the zone (no
    /// reset, finish or streamed write; no write-back holding that block), decided and
    /// applied in one step at the write pointer of that moment; the flush then waits for
    /// exactly that padded end. Appends made meanwhile are never split or followed by stray
    /// zeros; those after the padding are not covered.
    ///
    /// # Cancel safety
    /// A dropped flush may have padded the partial block and started write-back (which goes
    /// on in the background); it promises nothing durable.
    pub async fn flush(&self, zone: u32) -> Result<()> {
        self.on_owner(zone, move |s| async move { s.flush_zone(zone).await })
            .instrument(tracing::debug_span!("flush", zone))
            .await
    }

    /// Writes `zone`'s buffered data to the device and waits for it, without flushing the
    /// device's cache: everything appended to the zone before the call is on the device, and
    /// durable after the next [`flush_device`](Ziob::flush_device) (or a flush or sync that
    /// flushes the device's cache). A partial last block is padded as by
    /// [`flush`](Ziob::flush). In pass-through mode it returns at once: an append is on the
    /// device when it returns.
    ///
    /// For a caller that makes several zones durable together: write each back, then one
    /// `flush_device`, instead of a flush per zone (a device cache flush each).
    ///
    /// # Cancel safety
    /// As [`flush`](Ziob::flush): the padding and write-back may have started, and go on.
    pub async fn write_back(&self, zone: u32) -> Result<()> {
        self.on_owner(zone, move |s| async move { s.write_back(zone).await })
            .instrument(tracing::debug_span!("write_back", zone))
            .await
    }

    /// Flushes the device's cache once, on core 0: every write the device completed before
    /// the call is durable when it returns — write-backs of [`write_back`](Ziob::write_back)
    /// from every core and pass-through writes (a device cache flush covers the whole device
    /// or namespace). Data still in the buffer is not written back: see
    /// [`sync`](Ziob::sync) for that. Concurrent calls share device flushes.
    ///
    /// # Cancel safety
    /// A dropped call promises nothing; a device flush it started runs to its end.
    pub async fn flush_device(&self) -> Result<()> {
        self.on_owner(0, move |s| async move { s.device_flush().await })
            .instrument(tracing::debug_span!("flush_device"))
            .await
    }

    /// Flushes every zone on every core. Zones holding a kept write-back error and data the
    /// device does not have are listed in [`ZiobError::ZonesFailed`]; every other zone is
    /// synced all the same (see the crate docs, "Write-back errors").
    ///
    /// # Cancel safety
    /// As [`Ziob::flush`], for every zone.
    pub async fn sync(&self) -> Result<()> {
        let results = self
            .on_all(|s| async move { Ok(s.sync().await) })
            .instrument(tracing::debug_span!("sync"))
            .await?;
        ZiobError::merge_sync(results)
    }

    /// Applies a zone management action (open, close, finish, reset, offline) to one zone
    /// or all. Reset discards the zone's buffered data and clears a kept write-back error
    /// once the device has reset the zone (if the device refuses, the zone keeps its data and
    /// the error is returned); finish writes the data back and flushes the device cache
    /// first, then finishes the device zone and flushes again, so a completed finish is
    /// durable and never lands before the data it closes. Open and close change only
    /// the zone state the buffer shows (the device's zones are opened by write-back, see the
    /// crate docs).
    ///
    /// # Cancel safety
    /// Once the call reached the zone's core, the action runs to the end as a task of its
    /// own even if the call is dropped (a reset is never left half-done: the device reset
    /// but the buffer still holding the old data). A dropped call cannot tell whether it got
    /// there, so after dropping a reset, treat the zone's contents as unknown.
    pub async fn zone_action(&self, action: ZoneAction, target: ZoneTarget) -> Result<()> {
        let span = tracing::debug_span!("zone_action", %action, ?target);
        match target {
            ZoneTarget::One(zone) => {
                self.on_owner(zone, move |s| async move { s.action(zone, action).await })
                    .instrument(span)
                    .await
            }
            ZoneTarget::All => self
                .on_all(move |s| async move { s.action_all(action).await })
                .instrument(span)
                .await
                .map(|_| ()),
        }
    }

    /// Report Zones as the buffer shows them: `count` zones from `first`. Dropping it is
    /// always safe.
    pub async fn report(&self, first: u32, count: u32) -> Result<Vec<ZoneInfo>> {
        self.inner.geometry.check_zone(first)?;
        let parts = self
            .on_all(move |s| async move { s.report(first, count).await })
            .instrument(tracing::debug_span!("report", first, count))
            .await?;
        let mut all: Vec<ZoneInfo> = parts.into_iter().flatten().collect();
        all.sort_by_key(|z| z.index);
        Ok(all)
    }

    /// Statistics of every shard, in core order. Dropping it is always safe.
    pub async fn stats(&self) -> Result<Vec<ShardStats>> {
        self.on_all(|s| async move { Ok(s.stats()) }).await
    }

    /// Every core's counters, gauges and latency histograms, per core and merged (see
    /// [`crate::metrics`]); [`MetricsSnapshot::publish`] hands them to a `metrics` recorder.
    /// Dropping it is always safe.
    pub async fn metrics(&self) -> Result<MetricsSnapshot> {
        let cores = self.on_all(|s| async move { Ok(s.metrics()) }).await?;
        Ok(MetricsSnapshot::from_cores(cores))
    }

    /// The shards' bookkeeping as text (zone states, write pointers, resources), for
    /// diagnosing a stuck program or test. Dropping it is always safe.
    pub async fn debug_state(&self) -> Result<String> {
        Ok(self
            .on_all(|s| async move { Ok(s.debug_state()) })
            .await?
            .concat())
    }

    /// Memory the shards hold right now, per core (for tests of the budget). Dropping it is
    /// always safe.
    pub async fn memory_used_bytes(&self) -> Result<Vec<u64>> {
        self.on_all(|s| async move { Ok(s.memory_used_bytes()) })
            .await
    }

    /// Closes the instance: every shard first refuses new calls (they fail with
    /// [`ZiobError::Closed`], from any clone), then waits for the calls already admitted,
    /// then syncs, then stops. So every append acknowledged to any clone is durable once
    /// `close` returns `Ok`. A sync error is returned as by [`Ziob::sync`] (failed zones of all
    /// cores listed in one [`ZiobError::ZonesFailed`]); the instance is closed either way.
    /// Dropping the last handle ([`Ziob`] or [`Client`](crate::Client)) without closing
    /// closes the instance in the background (each shard syncs, then goes away; an error there is only logged,
    /// and if the runtime stops first, unflushed data is lost as in a crash). Use
    /// [`Ziob::abandon`] to drop the shards without syncing.
    ///
    /// # Cancel safety
    /// Once started, each shard's close runs to the end even if this call is dropped; the
    /// instance is closed either way, and a dropped close does not report the sync's result.
    pub async fn close(self) -> Result<()> {
        self.inner.closed.store(true, Ordering::Release);
        let id = self.inner.id;
        let closes = (0..self.inner.cores)
            .map(|core| call_on(core, move || async move { close_shard::<D>(id).await }));
        let results = futures::future::join_all(closes)
            .instrument(tracing::debug_span!("close"))
            .await;
        ZiobError::merge_sync(
            results
                .into_iter()
                .map(|res| res.map_err(ZiobError::from).and_then(|r| r)),
        )
    }

    /// Drops this instance's shards without syncing: buffered data is lost, as in a crash
    /// of the process (for crash tests). Write-backs already issued are let finish (a device
    /// may or may not keep them, like a volatile cache); nothing is issued after. Calls in
    /// flight that wait for a write-back (a flush, a finish) or for memory answer
    /// [`ZiobError::Closed`] instead of waiting for one that will never start.
    ///
    /// # Cancel safety
    /// The instance refuses new calls from the start; a dropped call may leave some shards
    /// in place (they issue no new write-back once removed, and the rest stay until the
    /// runtime stops).
    pub async fn abandon(self) -> Result<()> {
        self.inner.closed.store(true, Ordering::Release);
        let id = self.inner.id;
        for core in 0..self.inner.cores {
            call_on(core, move || async move { remove_shard::<D>(id).await }).await?;
        }
        Ok(())
    }
}

/// Runs `f` with this core's shard of instance `id` as an admitted call (refused with
/// [`ZiobError::Closed`] once the shard is closing; closing waits for it).
async fn admitted<D, F, Fut, T>(id: u64, f: F) -> Result<T>
where
    D: ZonedDevice,
    F: FnOnce(Rc<Shard<D>>) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let shard = local_shard::<D>(id)?;
    let _call = shard.enter()?;
    f(shard).await
}

/// Closes this core's shard of instance `id` in order (see [`Ziob::close`]) as a task of its
/// own, then removes it. A shard already removed is closed: `Ok`.
async fn close_shard<D: ZonedDevice>(id: u64) -> Result<()> {
    let Ok(shard) = local_shard::<D>(id) else {
        return Ok(());
    };
    run_to_completion(async move {
        let res = shard.close_gracefully().await;
        SHARDS.with(|s| s.borrow_mut().remove(&id));
        res
    })
    .await?
}

/// Removes this core's shard of instance `id`: it starts no more write-back and waits for the
/// write-backs in flight. (A reset, finish or pass-through write a caller still has in flight
/// completes on its own.)
async fn remove_shard<D: ZonedDevice>(id: u64) {
    let shard = SHARDS.with(|s| s.borrow_mut().remove(&id));
    if let Some(s) = shard.and_then(|a| a.downcast::<Shard<D>>().ok()) {
        s.close();
        s.quiesce().await;
    }
}

/// One zone of a [`Ziob`] instance.
#[derive(Clone)]
pub struct Zone<D: ZonedDevice = AnyDevice> {
    ziob: Ziob<D>,
    index: u32,
}

impl<D: ZonedDevice> Zone<D> {
    /// The zone index.
    pub fn index(&self) -> u32 {
        self.index
    }
    /// See [`Ziob::append`].
    pub async fn append(&self, data: DmaBuf) -> Result<u64> {
        self.ziob.append(self.index, data).await
    }
    /// See [`Ziob::write_at`].
    pub async fn write_at(&self, offset_bytes: u64, data: DmaBuf) -> Result<()> {
        self.ziob.write_at(self.index, offset_bytes, data).await
    }
    /// See [`Ziob::read`].
    pub async fn read(&self, offset_bytes: u64, len: usize) -> Result<DmaBuf> {
        self.ziob.read(self.index, offset_bytes, len).await
    }
    /// See [`Ziob::flush`].
    pub async fn flush(&self) -> Result<()> {
        self.ziob.flush(self.index).await
    }
    /// Resets the zone (discards its data). Cancel safety as [`Ziob::zone_action`].
    pub async fn reset(&self) -> Result<()> {
        self.ziob
            .zone_action(ZoneAction::Reset, ZoneTarget::One(self.index))
            .await
    }
    /// Finishes the zone (writes back its data, makes it Full and flushes the device cache:
    /// a completed finish is durable). Cancel safety as
    /// [`Ziob::zone_action`].
    pub async fn finish(&self) -> Result<()> {
        self.ziob
            .zone_action(ZoneAction::Finish, ZoneTarget::One(self.index))
            .await
    }
    /// The zone's report entry. Dropping it is always safe.
    pub async fn report(&self) -> Result<ZoneInfo> {
        let mut v = self.ziob.report(self.index, 1).await?;
        v.pop().ok_or(ZiobError::Closed)
    }
}
