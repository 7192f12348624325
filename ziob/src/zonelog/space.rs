//! [`LogSpace`]: a range of zones shared by named logs, with the free-zone allocator.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use super::allocator::{NoZone, ZoneAllocator};
use super::chain::Chain;
use super::layout::Layout;
use super::log::{LogInner, ZoneLog};
use super::name::validate_log_name;
use super::record::frame_len;
use super::recovery::{recover, SpaceRecovery};
use super::zone_header::{encode_zone_header, zone_header_len};
use crate::client::Client;
use crate::error::{Result, ZiobError};

/// Default bytes read at once when reading many records: 128 KiB.
pub const READ_WINDOW_BYTES_DEFAULT: u64 = 128 << 10;

/// Settings of a [`LogSpace`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSpaceOptions {
    /// The zones the space owns; the default, `0..u32::MAX`, means every zone of the
    /// device (an end of `u32::MAX` is clamped to the zone count). The space may reset any
    /// zone in it that holds no log's data.
    pub zones: Range<u32>,
    /// Bytes read at once when reading or streaming many records (rounded up to blocks).
    pub read_window_bytes: u64,
}

impl Default for LogSpaceOptions {
    fn default() -> Self {
        LogSpaceOptions {
            zones: 0..u32::MAX,
            read_window_bytes: READ_WINDOW_BYTES_DEFAULT,
        }
    }
}

/// The shared state of a space.
pub(crate) struct SpaceInner {
    pub client: Client,
    pub layout: Layout,
    pub zones: Range<u32>,
    alloc: Mutex<ZoneAllocator>,
    logs: Mutex<BTreeMap<String, Arc<LogInner>>>,
    /// Held while a log is created or removed.
    admin: futures::lock::Mutex<()>,
    /// Zones dropped from logs (truncated or removed) and not reset yet, in the order they
    /// must be reset: each log's oldest first, so a crash or a dropped call never leaves
    /// an older zone of a log with a newer one reset (a gap when the space reopens).
    reset_queue: Mutex<VecDeque<u32>>,
    /// Held while the queue is worked off (one zone reset at a time, in order).
    reset_lock: futures::lock::Mutex<()>,
    recovery: SpaceRecovery,
}

/// A range of zones holding named [`ZoneLog`]s, with a free-zone allocator.
/// `Clone + Send + Sync`; every future it returns is `Send`.
///
/// Each zone a log uses starts with a zone header naming the log and the zone's sequence
/// number within it, so [`open`](LogSpace::open) finds every log by reading the first bytes
/// of each non-empty zone of the range: no metadata zone. Zones are handed out lowest
/// index first (of a log's preferred core first, [`LogSpace::open_log_on_core`]), within
/// the device's active-zone limit as the instance presents it (none
/// with the buffer on: the buffer lifts it; the device's Max Active / Max Open Resources
/// pass-through). Each log keeps one zone active (the one it appends to); zones it left
/// are finished (Full).
///
/// Open one space per zone range at a time (two spaces over the same zones would hand out
/// the same free zones); clone it to share it.
///
/// ```
/// use ziob::zonelog::{LogSpace, LogSpaceOptions};
/// use ziob::{Client, Runtime, ZiobConfig};
/// let rt = Runtime::builder().cores(2).build().unwrap();
/// futures::executor::block_on(async {
///     let spec = "mem:zones=16,zone_size=64K";
///     let client = Client::open(rt.handle(), spec, ZiobConfig::default()).await.unwrap();
///     let space = LogSpace::open(client.clone(), LogSpaceOptions::default()).await.unwrap();
///     let wal = space.open_log("wal").await.unwrap();
///     let p = wal.append(b"first").await.unwrap();
///     wal.append(b"second").await.unwrap();
///     wal.sync().await.unwrap(); // both durable
///     let recs = wal.read_from(p, 10).await.unwrap();
///     assert_eq!(&recs[1].1[..], b"second");
///     client.close().await.unwrap();
/// });
/// ```
#[derive(Clone)]
pub struct LogSpace {
    inner: Arc<SpaceInner>,
}

impl std::fmt::Debug for LogSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogSpace")
            .field("zones", &self.inner.zones)
            .field("logs", &self.logs())
            .finish()
    }
}

impl LogSpace {
    /// Opens the space over `opts.zones` of `client`'s instance and recovers every log in
    /// it: each log's zones are ordered by sequence number, its last zone is read through
    /// and cut at the first torn or corrupt record (what follows is dropped, reported in
    /// [`recovery`](LogSpace::recovery) and logged as a warning; the log goes on in a
    /// fresh zone). Zones in the range with no valid zone header are reset before use.
    ///
    /// # Errors
    /// [`ZiobError::Config`] for a zone range outside the device or zones of 4 GiB or
    /// more; the device's errors.
    pub async fn open(client: Client, opts: LogSpaceOptions) -> Result<LogSpace> {
        let geometry = client.geometry();
        let mut zones = opts.zones.clone();
        if zones.end == u32::MAX {
            zones.end = geometry.zone_count;
        }
        if zones.is_empty() || zones.end > geometry.zone_count {
            return Err(ZiobError::Config(format!(
                "log space zones {zones:?} must be a non-empty range within the device's {} zones",
                geometry.zone_count
            )));
        }
        if geometry.zone_capacity_bytes > u32::MAX as u64 {
            return Err(ZiobError::Config(format!(
                "zone capacity {} bytes: zone logs need zones below 4 GiB (positions hold a 32-bit offset)",
                geometry.zone_capacity_bytes
            )));
        }
        let (buffered, presented) = client
            .with_ziob(|z| async move { Ok((z.config().buffered, *z.view_geometry())) })
            .await?;
        let layout = Layout::new(&geometry, buffered, opts.read_window_bytes);
        let limit = match (presented.max_active_zones, presented.max_open_zones) {
            (Some(a), Some(o)) => Some(a.min(o)),
            (a, o) => a.or(o),
        };
        let recovered = recover(&client, &layout, zones.clone(), limit).await?;
        let logs = recovered
            .logs
            .into_iter()
            .map(|(name, (chain, rec))| {
                let log = Arc::new(LogInner::new(&name, chain, Some(rec)));
                (name, log)
            })
            .collect();
        Ok(LogSpace {
            inner: Arc::new(SpaceInner {
                client,
                layout,
                zones,
                alloc: Mutex::new(recovered.allocator),
                logs: Mutex::new(logs),
                admin: futures::lock::Mutex::new(()),
                reset_queue: Mutex::new(VecDeque::new()),
                reset_lock: futures::lock::Mutex::new(()),
                recovery: recovered.report,
            }),
        })
    }

    /// What recovery found when the space was opened.
    pub fn recovery(&self) -> &SpaceRecovery {
        &self.inner.recovery
    }

    /// The zones of the space.
    pub fn zones(&self) -> Range<u32> {
        self.inner.zones.clone()
    }

    /// The client the space works through.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// Zones of the space no log uses (Empty ones and ones to reset before use).
    pub fn free_zones(&self) -> usize {
        let queued = self.inner.queue().len();
        let a = self.inner.allocator();
        a.free_count() + a.stale_count() + queued
    }

    /// The log named `name`, created (with its first zone) when missing.
    ///
    /// # Errors
    /// [`ZiobError::InvalidLogName`] unless `name` is 1..=64 bytes of `[A-Za-z0-9._-]`;
    /// [`ZiobError::NoSpace`] when a new log finds no zone.
    ///
    /// # Cancel safety
    /// If dropped while creating, the log does not exist (a zone it took is reset before
    /// reuse).
    pub async fn open_log(&self, name: &str) -> Result<ZoneLog> {
        self.open_log_placed(name, None).await
    }

    /// [`open_log`](Self::open_log), and the log takes its zones from those `core` owns
    /// ([`placement::owner_core`](crate::placement::owner_core)) from now on, while one is
    /// free (else any): its appends and syncs then run on `core` with no hop to another
    /// core when the caller is there. A new log's first zone is one of them as well.
    /// `core` at or past the instance's core count prefers nothing.
    ///
    /// # Errors
    /// As [`open_log`](Self::open_log).
    pub async fn open_log_on_core(&self, name: &str, core: usize) -> Result<ZoneLog> {
        self.open_log_placed(name, Some(core)).await
    }

    async fn open_log_placed(&self, name: &str, core: Option<usize>) -> Result<ZoneLog> {
        validate_log_name(name)?;
        let prefer = |log: &LogInner| {
            if let Some(c) = core {
                log.core.store(c, std::sync::atomic::Ordering::Relaxed);
            }
        };
        if let Some(log) = self.inner.logs().get(name) {
            prefer(log);
            return Ok(self.handle(log.clone()));
        }
        let _admin = self.inner.admin.lock().await;
        if let Some(log) = self.inner.logs().get(name) {
            prefer(log);
            return Ok(self.handle(log.clone()));
        }
        let header = zone_header_len(name);
        if header + frame_len(0) as u64 > self.inner.layout.capacity_bytes {
            return Err(ZiobError::Config(format!(
                "zones of {} bytes cannot hold a zone log",
                self.inner.layout.capacity_bytes
            )));
        }
        let zone = self.inner.take_zone(name, 0, None, core).await?;
        let mut chain = Chain::new(header);
        chain.push_open(0, zone);
        let log = Arc::new(LogInner::new(name, chain, None));
        prefer(&log);
        self.inner.logs().insert(name.to_string(), log.clone());
        tracing::debug!(log = name, zone, "zone log created");
        Ok(self.handle(log))
    }

    /// The names of the space's logs, sorted.
    pub fn logs(&self) -> Vec<String> {
        self.inner.logs().keys().cloned().collect()
    }

    /// Removes the log `name` and resets its zones (oldest first: a crash part-way leaves
    /// the log truncated, not damaged). Handles to it then fail with
    /// [`ZiobError::NoSuchLog`].
    ///
    /// # Cancel safety
    /// If dropped after it started, the log is gone; zones not reset yet are reset before
    /// they are used again.
    pub async fn remove_log(&self, name: &str) -> Result<()> {
        validate_log_name(name)?;
        let _admin = self.inner.admin.lock().await;
        let log = self
            .inner
            .logs()
            .get(name)
            .cloned()
            .ok_or_else(|| ZiobError::NoSuchLog {
                name: name.to_string(),
            })?;
        let _roll = log.roll.lock().await;
        let victims: Vec<u32> = {
            let mut c = log.chain();
            c.removed = true;
            let v = c.zones.values().map(|z| z.zone).collect();
            c.zones.clear();
            v
        };
        self.inner.logs().remove(name);
        log.changed.notify(usize::MAX);
        self.inner.reset_zones(victims).await
    }

    fn handle(&self, log: Arc<LogInner>) -> ZoneLog {
        ZoneLog {
            space: self.inner.clone(),
            log,
        }
    }
}

/// Gives zones back to the allocator as stale (to reset before reuse) unless disarmed.
struct GiveBack<'a> {
    space: &'a SpaceInner,
    zones: Vec<u32>,
}

impl Drop for GiveBack<'_> {
    fn drop(&mut self) {
        let mut a = self.space.allocator();
        for &z in &self.zones {
            a.release_stale(z);
        }
    }
}

impl SpaceInner {
    pub(crate) fn allocator(&self) -> MutexGuard<'_, ZoneAllocator> {
        self.alloc.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn logs(&self) -> MutexGuard<'_, BTreeMap<String, Arc<LogInner>>> {
        self.logs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a zone for zone `seq` of log `name` (one `core` owns, if one is free): resets
    /// it if it holds stale data and writes the zone header at its start.
    /// `prev`: the log's zone before it and where its records end (recorded in the header).
    pub(crate) async fn take_zone(
        &self,
        name: &str,
        seq: u32,
        prev: Option<(u32, u32)>,
        core: Option<usize>,
    ) -> Result<u32> {
        // Zones dropped from logs are reset first (in order), and are then free to take.
        self.drain_resets().await?;
        let owned_by_core = |z: u32| core == Some(self.client.owner_core(z));
        let grant = self.allocator().take(owned_by_core).map_err(|e| ZiobError::NoSpace {
            log: name.to_string(),
            detail: match e {
                NoZone::Exhausted { used } => format!(
                    "all {} zones of the space ({:?}) are in use ({used} by logs, the rest unusable); truncate or remove logs",
                    self.zones.len(),
                    self.zones
                ),
                NoZone::ActiveLimit { limit } => format!(
                    "the device allows {limit} active zones and all are taken (each log keeps one); remove logs or turn the buffer on"
                ),
            },
        })?;
        let mut give_back = GiveBack {
            space: self,
            zones: vec![grant.zone],
        };
        if grant.needs_reset {
            self.client.reset(grant.zone).await?;
        }
        let header: Bytes = self
            .layout
            .append_bytes(encode_zone_header(name, seq, prev));
        let off = self.client.append(grant.zone, header).await?;
        if off != 0 {
            return Err(ZiobError::LogCorrupt {
                log: name.to_string(),
                position: super::position::Position::new(seq, 0).into_raw(),
                detail: format!(
                    "the zone header went to byte {off} of zone {}, not its start (was the zone written by someone else?)",
                    grant.zone
                ),
            });
        }
        give_back.zones.clear();
        Ok(grant.zone)
    }

    fn queue(&self) -> MutexGuard<'_, VecDeque<u32>> {
        self.reset_queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `zones` (dropped from a log, oldest first) for a reset and works the queue
    /// off. If this fails or is dropped, the zones stay queued and the next call that
    /// resets or takes a zone resets them first, in order.
    pub(crate) async fn reset_zones(&self, zones: Vec<u32>) -> Result<()> {
        self.queue().extend(zones);
        self.drain_resets().await
    }

    /// Resets the queued zones in order and frees them.
    async fn drain_resets(&self) -> Result<()> {
        if self.queue().is_empty() {
            return Ok(());
        }
        let _order = self.reset_lock.lock().await;
        loop {
            let Some(zone) = self.queue().front().copied() else {
                return Ok(());
            };
            self.client.reset(zone).await?;
            self.queue().pop_front();
            self.allocator().release_reset(zone);
        }
    }
}
