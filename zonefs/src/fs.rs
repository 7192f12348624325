//! [`ZoneFs`]: the file operations over the mounted state.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::lock::Mutex;
use ziob::backends::DeviceError;
use ziob::{Client, ZiobError};

use crate::commit::{GroupCommit, Waited};
use crate::error::{FsError, Result};
use crate::fsck::{self, FsckReport};
use crate::gc::{self, FsStats, GcReport};
use crate::layout::Layout;
use crate::lifetime::{slot_of, WriteLifetime};
use crate::mount::{self, MkfsOptions, MountReport};
use crate::path::{child_of, normalize, normalize_dir};
use crate::records::{Delta, Extent, Move};
use crate::space::SpaceUsage;
use crate::stat::FileStat;
use crate::tree::Tree;
use crate::zones::{ZoneTable, ZoneUse};

/// A mounted zone file system. `Clone + Send + Sync`; every method's future is `Send`.
///
/// The state is under one async mutex held only for bookkeeping: reads look up their extents
/// under it and read without it; appends of different lifetime classes run their device
/// appends in parallel (one at a time per class); `sync` writes back without it; metadata
/// commits share journal writes (group commit). A read racing a delete, rename-over or GC relocation of its file
/// never returns bytes of a reset zone: if a zone it read was reset meanwhile it looks the
/// extents up again (the file's new extents, or [`FsError::NotFound`] once it is gone). A
/// [`FileReader`](crate::FileReader) ([`open_reader`](ZoneFs::open_reader)) keeps its file's
/// extents and skips the lookup until one of their zones is reset.
#[derive(Clone)]
pub struct ZoneFs {
    client: Client,
    layout: Layout,
    state: Arc<Mutex<State>>,
    report: Arc<MountReport>,
    resets: Arc<ResetCounts>,
    group: Arc<GroupCommit>,
    /// One lock per open-zone slot, held across an append.
    slot_locks: Arc<Vec<Mutex<()>>>,
    /// Per class slot, the core whose zones it opens while one is free ([`NO_CORE`]: the
    /// lowest free zone); see [`place_class_on_core`](ZoneFs::place_class_on_core).
    slot_cores: Arc<[AtomicUsize]>,
}

/// A slot of [`ZoneFs::slot_cores`] with no core preferred.
const NO_CORE: usize = usize::MAX;

/// A delta applied in memory and queued for the journal.
struct Staged {
    /// Its sequence number in the journal queue.
    seq: u64,
    /// Zones it left without live data: reset once it is durable.
    dead: BTreeSet<u32>,
}

/// How many times each zone was reset since the mount. A reader notes the counts of the
/// zones it reads (with the extents, under the state lock) and reads again if one moved:
/// resets bump the count before they are issued, so an unchanged count after the read means
/// the bytes read predate any reset.
struct ResetCounts(Vec<AtomicU64>);

impl ResetCounts {
    fn new(zones: u32) -> ResetCounts {
        ResetCounts((0..zones).map(|_| AtomicU64::new(0)).collect())
    }

    /// `zone`'s count.
    fn count(&self, zone: u32) -> u64 {
        self.0[zone as usize].load(Ordering::SeqCst)
    }

    /// `zone` is about to be reset.
    fn note(&self, zone: u32) {
        self.0[zone as usize].fetch_add(1, Ordering::SeqCst);
    }
}

/// A file's extents in file order, the reset count of each one's zone and the file's size,
/// taken together under the state lock: a [`FileReader`](crate::FileReader) reads through it
/// without the lock while [`ZoneFs::extents_unchanged`] holds for the extents it reads.
#[derive(Debug, Clone)]
pub(crate) struct ExtentView {
    pub(crate) extents: Vec<Extent>,
    /// The reset count of each extent's zone when the view was taken.
    pub(crate) resets: Vec<u64>,
    /// The file offset where each extent ends (so the last is the file's size).
    pub(crate) ends: Vec<u64>,
}

impl ExtentView {
    /// The file's size when the view was taken.
    pub(crate) fn size(&self) -> u64 {
        self.ends.last().copied().unwrap_or(0)
    }

    /// The extents holding bytes of `offset..end` (a binary search: a WAL synced after
    /// every write has an extent per sync); none for an empty range.
    pub(crate) fn covering(&self, offset: u64, end: u64) -> std::ops::Range<usize> {
        let first = self.ends.partition_point(|&e| e <= offset);
        if end <= offset {
            return first..first;
        }
        let last = self.ends.partition_point(|&e| e < end);
        first..(last + 1).min(self.ends.len()).max(first)
    }

    /// The `(zone, offset, len)` pieces of the file range `offset..end` (clipped at the
    /// view's size), one per extent of `range` = [`covering`](Self::covering)`(offset, end)`,
    /// in order (so `resets[range]` are their counts): [`pieces_of`] without its walk over
    /// every extent before the range.
    pub(crate) fn pieces(
        &self,
        range: std::ops::Range<usize>,
        offset: u64,
        end: u64,
    ) -> Vec<(u32, u64, u64)> {
        range
            .map(|i| {
                let (e, t) = (&self.extents[i], self.ends[i]);
                let s = t - e.len;
                let from = offset.max(s);
                (e.zone, e.offset + (from - s), end.min(t) - from)
            })
            .collect()
    }
}

impl std::fmt::Debug for ZoneFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZoneFs")
            .field("layout", &self.layout)
            .field("mount", &self.report)
            .finish()
    }
}

struct State {
    tree: Tree,
    zones: ZoneTable,
    /// Mounted read-only: nothing is written to the device.
    read_only: bool,
    /// Bytes counted since the mount.
    stats: FsStats,
}

impl State {
    /// Fails a write on a read-only mount.
    fn check_write(&self, op: &'static str) -> Result<()> {
        if self.read_only {
            return Err(FsError::ReadOnly { op });
        }
        Ok(())
    }
}

/// The write failed because the zone is full (or its write pointer moved past what the layer
/// tracked).
pub(crate) fn is_zone_full(e: &ZiobError) -> bool {
    matches!(
        e,
        ZiobError::Device(DeviceError::ZoneFull { .. } | DeviceError::BoundaryError { .. })
    )
}

impl ZoneFs {
    /// Formats the device behind `client` (see [`MkfsOptions`]). Refuses a device that is
    /// not empty ([`FsError::DeviceInUse`]) unless `force`.
    pub async fn mkfs(client: &Client, opts: MkfsOptions) -> Result<()> {
        mount::mkfs(client, opts).await
    }

    /// Mounts the file system on `client`'s device: reads the newest valid journal zone,
    /// replays its deltas, cuts files whose last sync a crash interrupted after its journal
    /// write but before its data was durable ([`MountReport::files_cut`]: only the last
    /// batch's extents are cut, to the zone's write pointer), rolls the journal to a fresh
    /// zone, and rebuilds the zone table (resetting data zones no file uses). A device
    /// without a file system, with something else on it, or with a damaged journal gives a
    /// typed error; it is never reformatted.
    pub async fn mount(client: Client) -> Result<ZoneFs> {
        let m = mount::mount(&client).await?;
        Ok(Self::from_mounted(client, m, false))
    }

    /// Mounts the file system without writing anything to the device (for `ls`, `df`,
    /// `fsck`): the journal is read and replayed as by [`mount`](ZoneFs::mount), but no zone
    /// is reset or finished and the journal does not roll. Extents that a read-write mount
    /// refuses (outside the written zones) do not fail it: [`fsck`](ZoneFs::fsck) reports
    /// them. Every call that would write (`create`, `create_unsynced`, `append`, `sync`,
    /// `sync_all`, `sync_metadata`, `delete`, `rename`, `gc`) fails with
    /// [`FsError::ReadOnly`]. In `df` a written zone counts as used up to its write pointer
    /// (a read-write mount takes it back for its class or finishes it).
    pub async fn mount_read_only(client: Client) -> Result<ZoneFs> {
        let m = mount::mount_read_only(&client).await?;
        Ok(Self::from_mounted(client, m, true))
    }

    fn from_mounted(client: Client, m: mount::Mounted, read_only: bool) -> ZoneFs {
        ZoneFs {
            client,
            layout: m.layout,
            state: Arc::new(Mutex::new(State {
                tree: m.tree,
                zones: m.zones,
                read_only,
                stats: FsStats::default(),
            })),
            report: Arc::new(m.report),
            resets: Arc::new(ResetCounts::new(m.layout.geometry.zone_count)),
            group: Arc::new(GroupCommit::new(m.journal)),
            slot_locks: Arc::new((0..m.layout.all_slots()).map(|_| Mutex::new(())).collect()),
            slot_cores: (0..m.layout.all_slots())
                .map(|_| AtomicUsize::new(NO_CORE))
                .collect(),
        }
    }

    /// Files of class `class` get their new zones from those `core` owns
    /// ([`owner_core`](ziob::placement::owner_core)) while one is free, else the lowest free
    /// zone; `None` (the default) takes the lowest free zone. Their appends then run on
    /// `core` with no hop to another core when the caller is there (a store's background
    /// core, say). The zone open now is kept. Classes that share an open zone (fewer
    /// active zones than classes, see [`WriteLifetime`]) share the setting: the last call
    /// for any of them sets it. The active-zone limit holds wherever the zones lie: the
    /// layer keeps its active zones within the smallest core's share of the device's limit
    /// ([`resource_share`](ziob::placement::resource_share)).
    pub fn place_class_on_core(&self, class: WriteLifetime, core: Option<usize>) {
        let slot = self.slot_of(class);
        self.slot_cores[slot].store(core.unwrap_or(NO_CORE), Ordering::Relaxed);
    }

    /// The open-zone slot files of `class` append to (what [`ZoneUse::Open`] names).
    pub fn slot_of(&self, class: WriteLifetime) -> usize {
        slot_of(class, self.layout.slots)
    }

    /// Whether this mount is read-only ([`mount_read_only`](ZoneFs::mount_read_only)).
    pub async fn is_read_only(&self) -> bool {
        self.state.lock().await.read_only
    }

    /// Checks the file system: every file's extents against the data zones' bounds and write
    /// pointers (as the device reports them now) and against each other (no two share a
    /// byte), the live bytes tracked per zone against the extents, free zones against the
    /// device, and the current journal zone on the device against the mounted files. Reads
    /// only. Run it on a [`mount_read_only`](ZoneFs::mount_read_only) mount to check a device
    /// a read-write mount refuses.
    pub async fn fsck(&self) -> Result<FsckReport> {
        let st = self.state.lock().await;
        self.group.check()?;
        // The journal on the device must hold every delta the state has.
        if let Some(seq) = self.group.last_pending() {
            self.group
                .wait_locked(&self.client, &self.layout, &st.tree, seq)
                .await?;
        }
        let journal = self.group.journal().await;
        fsck::check(
            &self.client,
            &self.layout,
            &st.tree,
            &st.zones,
            &journal,
            st.read_only,
            &self.report.files_cut,
        )
        .await
    }

    /// What the mount found.
    pub fn mount_report(&self) -> &MountReport {
        &self.report
    }

    /// The client below.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The file system's zones: `0..zone_count()` of the device (set by
    /// [`MkfsOptions::zone_count`]); the zones past it are never touched.
    pub fn zone_count(&self) -> u32 {
        self.layout.geometry.zone_count
    }

    /// Active zones the file system leaves to others on the device
    /// ([`MkfsOptions::reserved_active_zones`], recorded by mkfs).
    pub fn reserved_active_zones(&self) -> u32 {
        self.layout.reserved_active
    }

    /// The most zones this mount keeps active at once (the journal's, one per class slot and
    /// garbage collection's): at most the instance's active-zone limit minus
    /// [`MkfsOptions::reserved_active_zones`].
    pub fn max_active_zones(&self) -> usize {
        self.layout.active_zones()
    }

    /// Creates an empty file at `path` whose data goes to the zones of class `lifetime`.
    /// Durable when it returns. [`FsError::AlreadyExists`] if `path` names a file.
    pub async fn create(&self, path: &str, lifetime: WriteLifetime) -> Result<()> {
        let staged = self.stage_create(path, lifetime).await?;
        self.finish(staged).await
    }

    /// Creates an empty file as [`create`](ZoneFs::create) does, visible at once, but
    /// returns without waiting for the journal: the file becomes durable with the next
    /// journal commit — its own [`sync`](ZoneFs::sync), a
    /// [`sync_metadata`](ZoneFs::sync_metadata) or [`sync_all`](ZoneFs::sync_all), or any
    /// create, delete or rename called after this returned. A crash before that may lose the file
    /// and what was appended to it (as a file created without an fsync of its directory).
    pub async fn create_unsynced(&self, path: &str, lifetime: WriteLifetime) -> Result<()> {
        self.stage_create(path, lifetime).await.map(drop)
    }

    /// Applies and queues the creation of an empty file at `path`.
    async fn stage_create(&self, path: &str, lifetime: WriteLifetime) -> Result<Staged> {
        let path = normalize(path)?;
        let mut st = self.state.lock().await;
        st.check_write("create")?;
        self.group.check()?;
        if st.tree.lookup(&path).is_some() {
            return Err(FsError::AlreadyExists(path));
        }
        let delta = Delta::Create {
            id: st.tree.next_id(),
            lifetime,
            path,
        };
        self.stage(&mut st, &delta)
    }

    /// Waits until every metadata change made so far (a create, delete, rename or a sync's
    /// extents) is durable: what [`create_unsynced`](ZoneFs::create_unsynced) left to a later
    /// commit. Returns at once when nothing waits for the journal.
    pub async fn sync_metadata(&self) -> Result<()> {
        {
            let st = self.state.lock().await;
            st.check_write("sync_metadata")?;
        }
        self.group.check()?;
        match self.group.last_pending() {
            Some(seq) => {
                self.finish(Staged {
                    seq,
                    dead: BTreeSet::new(),
                })
                .await
            }
            None => Ok(()),
        }
    }

    /// Appends `data` to the file at `path`. The data is readable at once and durable after
    /// the next [`sync`](ZoneFs::sync) of the file.
    pub async fn append(&self, path: &str, data: &[u8]) -> Result<()> {
        self.append_bytes(path, Bytes::copy_from_slice(data)).await
    }

    /// [`append`](ZoneFs::append) of bytes the caller hands over: on a device that takes
    /// appends of any length (ZIOB's buffer) they go to the device without another copy.
    pub async fn append_bytes(&self, path: &str, data: Bytes) -> Result<()> {
        self.append_at(path, data).await.map(drop)
    }

    /// [`append_bytes`](ZoneFs::append_bytes) that returns where the data went: the file
    /// offset of its first byte (the file's size when this append's turn came). A file's
    /// appends run one at a time, so `offset..offset + data.len()` holds exactly `data` once
    /// this returns `Ok`.
    pub async fn append_at(&self, path: &str, data: Bytes) -> Result<u64> {
        let path = normalize(path)?;
        let (id, slot) = {
            let st = self.state.lock().await;
            st.check_write("append")?;
            self.group.check()?;
            let id = st.tree.existing(&path)?;
            let lifetime = st.tree.node(id).expect("indexed").lifetime;
            (id, slot_of(lifetime, self.layout.slots))
        };
        // One append at a time per class slot (so per open zone, and per file: a file's
        // appends stay in order); appends of other classes and reads go on meanwhile.
        let _slot = self.slot_locks[slot].lock().await;
        // The file's size when its turn came (taken with the first piece's lock: a file's
        // appends take this slot's lock, so nothing else grows it meanwhile).
        let mut start = None;
        let mut rest = data;
        while !rest.is_empty() {
            let (zone, written, piece, bytes, in_flight) = {
                let mut st = self.state.lock().await;
                self.group.check()?;
                let Some(node) = st.tree.node(id) else {
                    return Err(FsError::NotFound(path));
                };
                let size = node.size();
                start.get_or_insert(size);
                let zone = match st.zones.open_zone(slot) {
                    Some(z) => z,
                    None => self.take_zone(&mut st, slot).await?,
                };
                let written = st.zones.get(zone).written;
                let room = self.layout.capacity() - written;
                let piece = self.layout.piece(rest.len() as u64, room) as usize;
                if piece == 0 {
                    self.leave_zone(&mut st, zone).await?;
                    continue;
                }
                let footprint = self.layout.footprint(piece as u64) as usize;
                let bytes = if footprint == piece {
                    rest.slice(..piece)
                } else {
                    let mut padded = BytesMut::with_capacity(footprint);
                    padded.extend_from_slice(&rest[..piece]);
                    padded.resize(footprint, 0);
                    padded.freeze()
                };
                let in_flight = st.zones.begin_append(zone);
                (zone, written, piece, bytes, in_flight)
            };
            let footprint = bytes.len() as u64;
            // The device append runs without the state lock.
            let res = self.client.append(zone, bytes).await;
            let mut st = self.state.lock().await;
            drop(in_flight);
            match res {
                Ok(offset) => {
                    let end = offset + footprint;
                    st.stats.data_bytes += end.saturating_sub(written);
                    let Some(node) = st.tree.node_mut(id) else {
                        // Deleted meanwhile: the bytes are dead.
                        st.zones.note_append(zone, end, 0);
                        let z = st.zones.get(zone);
                        if z.live == 0 && !st.zones.is_appending(zone) {
                            // The delete must be durable before the zone's bytes go.
                            if let Some(seq) = self.group.last_pending() {
                                self.group
                                    .wait_locked(&self.client, &self.layout, &st.tree, seq)
                                    .await?;
                            }
                            self.reset_zone(&mut st, zone).await?;
                        } else if end >= self.layout.capacity() {
                            st.zones.close(zone);
                        }
                        return Err(FsError::NotFound(path));
                    };
                    node.push(zone, offset, piece as u64);
                    st.zones.note_append(zone, end, piece as u64);
                    st.stats.user_bytes += piece as u64;
                    if end >= self.layout.capacity() {
                        st.zones.close(zone);
                    }
                    rest = rest.slice(piece..);
                }
                // Write-back padding moved the write pointer past what we tracked.
                Err(e) if is_zone_full(&e) => {
                    if st.zones.open_zone(slot) == Some(zone) {
                        self.leave_zone(&mut st, zone).await?;
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        match start {
            Some(at) => Ok(at),
            // Nothing to append: where it would have gone.
            None => {
                let st = self.state.lock().await;
                match st.tree.node(id) {
                    Some(node) => Ok(node.size()),
                    None => Err(FsError::NotFound(path)),
                }
            }
        }
    }

    /// A free zone opened for class slot `slot`. Runs garbage collection first when free
    /// zones are below [`GC_FREE_PERCENT`](crate::GC_FREE_PERCENT) of the data zones; when no free zone is left
    /// beyond the one kept for GC, waits for GC to free one, and fails with
    /// [`FsError::NoSpace`] only when GC cannot.
    async fn take_zone(&self, st: &mut State, slot: usize) -> Result<u32> {
        let policy = gc::Policy::of(&self.layout, &st.zones);
        if policy.below_threshold(&st.zones) {
            for _ in 0..gc::BACKGROUND_VICTIMS {
                let Some(victim) = policy.background_victim(&st.zones) else {
                    break;
                };
                self.relocate(st, victim).await?;
                if !policy.below_threshold(&st.zones) {
                    break;
                }
            }
        }
        let mut tries = st.zones.usable_count() * 2 + 2;
        while st.zones.free_count() <= policy.reserve {
            let victim = policy.urgent_victim(&st.zones);
            match victim {
                Some(v) if tries > 0 => {
                    tries -= 1;
                    self.relocate(st, v).await?;
                }
                _ => {
                    return Err(FsError::NoSpace(format!(
                        "no free data zone, and garbage collection cannot free one (no zone has \
                         {} bytes of garbage)",
                        policy.urgent_garbage
                    )))
                }
            }
        }
        let core = Some(self.slot_cores[slot].load(Ordering::Relaxed)).filter(|&c| c != NO_CORE);
        let client = &self.client;
        let owned_by_core = |z: u32| core == Some(client.owner_core(z));
        Ok(st.zones.open_new(slot, owned_by_core).expect("a free zone"))
    }

    /// Runs garbage collection now: relocates the live data of up to `max_victims` zones
    /// with the most garbage (at least one block each; zones still open for appends are left
    /// alone) and resets them, as a writer short of free zones would. Durable when it
    /// returns. Returns what it did.
    pub async fn gc(&self, max_victims: usize) -> Result<GcReport> {
        let mut st = self.state.lock().await;
        st.check_write("gc")?;
        self.group.check()?;
        let before = st.stats;
        let min = self.layout.block();
        for _ in 0..max_victims {
            let Some(v) = st.zones.gc_victim(self.layout.capacity(), min) else {
                break;
            };
            self.relocate(&mut st, v).await?;
        }
        Ok(GcReport {
            zones_reclaimed: st.stats.gc_zones - before.gc_zones,
            bytes_moved: st.stats.gc_bytes - before.gc_bytes,
        })
    }

    /// Counters since the mount: bytes appended by users, bytes written to data zones
    /// (with padding), moved by GC, written to the journal; zones GC reclaimed.
    pub async fn stats(&self) -> FsStats {
        let stats = self.state.lock().await.stats;
        FsStats {
            journal_bytes: self.group.journal().await.appended,
            ..stats
        }
    }

    /// Garbage collection of `victim`: copies every live extent in it (synced or not, in
    /// zone order) to the GC slot's zone, flushes that zone, journals one `Relocate` delta
    /// swapping the synced extents (unsynced ones are swapped in memory: they are not in the
    /// journal), then resets the victim. A crash before the delta is durable leaves the
    /// victim as it was (the copies are dead bytes in the GC zone); after, the victim holds
    /// no journaled extent and the next mount resets it.
    async fn relocate(&self, st: &mut State, victim: u32) -> Result<()> {
        let mut live: Vec<(u64, usize, Extent, bool)> = st
            .tree
            .nodes()
            .flat_map(|(id, n)| {
                n.extents
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| e.zone == victim)
                    .map(move |(i, e)| (*id, i, *e, i < n.synced))
            })
            .collect();
        live.sort_by_key(|(_, _, e, _)| e.offset);
        let gc_slot = self.layout.gc_slot;
        let (mut synced, mut unsynced) = (Vec::new(), Vec::new());
        let mut touched = BTreeSet::new();
        for (id, _, from, is_synced) in live {
            let mut to: Vec<Extent> = Vec::new();
            let mut done = 0u64;
            while done < from.len {
                let zone = match st.zones.open_zone(gc_slot) {
                    Some(z) => z,
                    None => st.zones.open_new(gc_slot, |_| false).ok_or_else(|| {
                        FsError::NoSpace("no free zone for garbage collection".into())
                    })?,
                };
                let written = st.zones.get(zone).written;
                let room = self.layout.capacity() - written;
                let want = (from.len - done).min(gc::COPY_CHUNK_BYTES);
                let n = self.layout.piece(want, room);
                if n == 0 {
                    self.leave_zone(st, zone).await?;
                    continue;
                }
                let data = self.read_piece(from.zone, from.offset + done, n).await?;
                let mut bytes = BytesMut::from(&data[..]);
                bytes.resize(self.layout.footprint(n) as usize, 0);
                let footprint = bytes.len() as u64;
                match self.client.append(zone, bytes.freeze()).await {
                    Ok(offset) => {
                        // Live only once the move is applied (below): a relocation dropped
                        // or failed before leaves dead copies, not live bytes of no file.
                        st.zones.note_append(zone, offset + footprint, 0);
                        st.stats.gc_bytes += n;
                        st.stats.data_bytes += (offset + footprint).saturating_sub(written);
                        touched.insert(zone);
                        match to.last_mut() {
                            Some(l) if l.zone == zone && l.offset + l.len == offset => l.len += n,
                            _ => to.push(Extent {
                                zone,
                                offset,
                                len: n,
                            }),
                        }
                        if offset + footprint >= self.layout.capacity() {
                            st.zones.close(zone);
                        }
                        done += n;
                    }
                    Err(e) if is_zone_full(&e) => self.leave_zone(st, zone).await?,
                    Err(e) => return Err(e.into()),
                }
            }
            let m = Move { id, from, to };
            if is_synced {
                synced.push(m);
            } else {
                unsynced.push(m);
            }
        }
        // Flushed, not only written back: the mount cuts only the last batch's Sync extents,
        // so a Relocate must name durable copies (a copy past its zone's write pointer would
        // be corruption), and the victim's reset follows the delta's commit.
        for z in touched {
            let upto = st.zones.get(z).written;
            self.client.flush(z).await?;
            st.zones.note_on_device(z, upto);
        }
        let copies: Vec<Extent> = synced
            .iter()
            .chain(&unsynced)
            .flat_map(|m: &Move| m.to.iter().copied())
            .collect();
        if !unsynced.is_empty() {
            let freed = st
                .tree
                .apply(&Delta::Relocate { moves: unsynced })
                .map_err(|e| FsError::Corrupt {
                    reason: format!("internal: {}", e.0),
                })?;
            for e in freed {
                st.zones.free_bytes(e.zone, e.len);
            }
        }
        let staged = if synced.is_empty() {
            None
        } else {
            Some(self.stage(st, &Delta::Relocate { moves: synced })?)
        };
        for e in copies {
            st.zones.add_live(e.zone, e.len);
        }
        if let Some(staged) = staged {
            self.finish_locked(st, staged).await?;
        } else if let Some(seq) = self.group.last_pending() {
            // Nothing journaled moved, but a queued delta (a delete of a file with bytes in
            // the victim) must be durable before the victim's bytes go.
            self.group
                .wait_locked(&self.client, &self.layout, &st.tree, seq)
                .await?;
        }
        if st.zones.get(victim).live == 0 && st.zones.get(victim).usage != ZoneUse::Free {
            self.reset_zone(st, victim).await?;
        }
        st.stats.gc_zones += 1;
        tracing::debug!(victim, "zone garbage collected");
        Ok(())
    }

    /// Resets data zone `zone` (call under the state lock, once no journaled extent is in
    /// it). The table marks it free *before* the reset is issued: a caller dropping this
    /// future leaves the zone's contents unknown (the reset may run anyway), and a free zone
    /// is reopened from a fresh write pointer and on-device offset, whereas one left open
    /// with its old on-device offset would let a later sync skip the write-back of new bytes
    /// appended at its start. Readers see the reset count move before the reset.
    async fn reset_zone(&self, st: &mut State, zone: u32) -> Result<()> {
        self.resets.note(zone);
        st.zones.reset_done(zone);
        self.client.reset(zone).await?;
        Ok(())
    }

    /// Finishes `zone` (no more appends to it; it stops being active).
    async fn leave_zone(&self, st: &mut State, zone: u32) -> Result<()> {
        self.client.finish(zone).await?;
        st.zones.close(zone);
        st.zones.note_append(zone, self.layout.capacity(), 0);
        Ok(())
    }

    /// Makes the file at `path` durable up to its current size: writes back the data zones
    /// holding its unsynced extents (without holding the state lock, so appends and other
    /// syncs go on meanwhile), then journals its extents that are on the device (Sync delta,
    /// group commit). The commit's device cache flush makes data and delta durable together:
    /// one device flush per sync (shared with concurrent syncs). A crash before it may keep
    /// the delta but not all of the data (a device's cache need not keep write order): the
    /// mount then cuts the file where its data ends (see [`ZoneFs::mount`]). When this
    /// returns, a crash keeps at least this size and content, and every metadata change
    /// queued before it (the file's creation by
    /// [`create_unsynced`](ZoneFs::create_unsynced) among them) is durable too.
    pub async fn sync(&self, path: &str) -> Result<()> {
        let path = normalize(path)?;
        let (id, write_backs) = {
            let st = self.state.lock().await;
            st.check_write("sync")?;
            self.group.check()?;
            let id = st.tree.existing(&path)?;
            (id, self.write_backs_for(&st, &[id]))
        };
        self.run_write_backs(&write_backs).await?;
        let staged = {
            let mut st = self.state.lock().await;
            self.group.check()?;
            self.note_write_backs(&mut st, &write_backs);
            if st.tree.node(id).is_none() {
                // Deleted (or renamed over) meanwhile.
                return Err(FsError::NotFound(path));
            }
            let extents = durable_unsynced(&mut st, id);
            if extents.is_empty() {
                // Nothing of its own to journal; its creation (maybe unsynced) and every
                // change before it are made durable all the same.
                drop(st);
                return self.sync_metadata().await;
            }
            self.stage(&mut st, &Delta::Sync { id, extents })?
        };
        self.finish(staged).await
    }

    /// Syncs every file with unsynced data (as [`sync`](ZoneFs::sync) on each) and makes
    /// every queued metadata change durable ([`sync_metadata`](ZoneFs::sync_metadata)): what
    /// a clean shutdown does before closing the client. Unsynced appends are otherwise lost
    /// at the next mount, even after a clean close of the client.
    pub async fn sync_all(&self) -> Result<()> {
        let (mut ids, write_backs) = {
            let st = self.state.lock().await;
            st.check_write("sync_all")?;
            self.group.check()?;
            let ids: Vec<u64> = st
                .tree
                .nodes()
                .filter(|(_, n)| n.extents.len() > n.synced)
                .map(|(id, _)| *id)
                .collect();
            let write_backs = self.write_backs_for(&st, &ids);
            (ids, write_backs)
        };
        ids.sort_unstable();
        self.run_write_backs(&write_backs).await?;
        let last = {
            let mut st = self.state.lock().await;
            self.group.check()?;
            self.note_write_backs(&mut st, &write_backs);
            let mut last = None;
            for id in ids {
                if st.tree.node(id).is_none() {
                    continue;
                }
                let extents = durable_unsynced(&mut st, id);
                if !extents.is_empty() {
                    last = Some(self.stage(&mut st, &Delta::Sync { id, extents })?);
                }
            }
            last
        };
        if let Some(staged) = last {
            self.finish(staged).await?;
        }
        // Creations left unsynced, and any other change still queued.
        self.sync_metadata().await
    }

    /// The write-backs that put the unsynced extents of files `ids` on the device: per zone,
    /// how far it is written now and its reset count.
    fn write_backs_for(&self, st: &State, ids: &[u64]) -> Vec<(u32, u64, u64)> {
        let mut zones = BTreeSet::new();
        for id in ids {
            let node = st.tree.node(*id).expect("indexed");
            for e in &node.extents[node.synced..] {
                if st.zones.on_device(e.zone) < e.offset + e.len {
                    zones.insert(e.zone);
                }
            }
        }
        zones
            .into_iter()
            .map(|z| (z, st.zones.get(z).written, self.resets.count(z)))
            .collect()
    }

    /// Writes the zones of `write_backs` back (without the state lock), without the device
    /// cache flush: the journal commit that follows flushes the cache once for all of them.
    async fn run_write_backs(&self, write_backs: &[(u32, u64, u64)]) -> Result<()> {
        futures::future::try_join_all(
            write_backs
                .iter()
                .map(|(z, _, _)| self.client.write_back(*z)),
        )
        .await?;
        Ok(())
    }

    /// Records finished write-backs (under the state lock); a zone reset meanwhile is
    /// skipped.
    fn note_write_backs(&self, st: &mut State, write_backs: &[(u32, u64, u64)]) {
        for &(z, upto, resets) in write_backs {
            if self.resets.count(z) == resets {
                st.zones.note_on_device(z, upto);
            }
        }
    }

    /// Reads up to `len` bytes at `offset` of the file at `path` (fewer at its end; none past
    /// it). Sees every append made, synced or not.
    pub async fn read_at(&self, path: &str, offset: u64, len: usize) -> Result<Bytes> {
        let path = crate::path::checked(path)?;
        loop {
            // The pieces and the reset count of each zone they lie in, taken together.
            let (pieces, seen) = {
                let st = self.state.lock().await;
                self.group.check()?;
                let id = st.tree.existing(path)?;
                let pieces = pieces_of(
                    &st.tree.node(id).expect("indexed").extents,
                    offset,
                    len as u64,
                );
                let seen: Vec<u64> = pieces.iter().map(|p| self.resets.count(p.0)).collect();
                (pieces, seen)
            };
            if let Some(res) = self.read_checked(&pieces, &seen).await {
                return res;
            }
        }
    }

    /// Reads `pieces` in order into one buffer, `None` if the zone of a piece was reset
    /// since its count was `seen` (one count per piece, taken with the pieces under the
    /// state lock): a delete, rename over or GC relocation ran meanwhile, so what was read
    /// may be zeros, another file's bytes or an error, and the caller looks again.
    pub(crate) async fn read_checked(
        &self,
        pieces: &[(u32, u64, u64)],
        seen: &[u64],
    ) -> Option<Result<Bytes>> {
        let res = self.read_pieces(pieces).await;
        pieces
            .iter()
            .zip(seen)
            .all(|(p, n)| self.resets.count(p.0) == *n)
            .then_some(res)
    }

    /// The id of the file at `path` and its [`ExtentView`], taken together.
    pub(crate) async fn open_view(&self, path: &str) -> Result<(u64, ExtentView)> {
        let path = crate::path::checked(path)?;
        let st = self.state.lock().await;
        self.group.check()?;
        let id = st.tree.existing(path)?;
        Ok((id, self.view_locked(&st, id).expect("indexed")))
    }

    /// The [`ExtentView`] of file `id`; [`FsError::NotFound`] (naming `path`) once it is
    /// gone.
    pub(crate) async fn view_of(&self, id: u64, path: &str) -> Result<ExtentView> {
        let st = self.state.lock().await;
        self.group.check()?;
        self.view_locked(&st, id)
            .ok_or_else(|| FsError::NotFound(path.to_string()))
    }

    fn view_locked(&self, st: &State, id: u64) -> Option<ExtentView> {
        let node = st.tree.node(id)?;
        let extents = node.extents.clone();
        let resets = extents.iter().map(|e| self.resets.count(e.zone)).collect();
        let ends = extents
            .iter()
            .scan(0u64, |end, e| {
                *end += e.len;
                Some(*end)
            })
            .collect();
        Some(ExtentView {
            extents,
            resets,
            ends,
        })
    }

    /// Whether no zone of the extents `range` of `view` was reset since the view was taken:
    /// then every byte read from them, before this answers, is the file's.
    pub(crate) fn extents_unchanged(
        &self,
        view: &ExtentView,
        range: std::ops::Range<usize>,
    ) -> bool {
        range.into_iter().all(|i| self.extent_unchanged(view, i))
    }

    /// [`GroupCommit::check`] without a lock while no journal write failed: reads through
    /// a reader fail as every read does after one.
    pub(crate) fn check_journal_now(&self) -> Result<()> {
        self.group.check_now()
    }

    /// Whether the zone of extent `i` of `view` was not reset since the view was taken: then
    /// every byte read from that extent, before this answers, is the file's.
    pub(crate) fn extent_unchanged(&self, view: &ExtentView, i: usize) -> bool {
        self.resets.count(view.extents[i].zone) == view.resets[i]
    }

    /// Whether reads must be of whole blocks (a pass-through instance, see `read_piece`).
    pub(crate) fn reads_whole_blocks(&self) -> bool {
        self.layout.whole_blocks
    }

    /// Reads `pieces` in order into one buffer.
    async fn read_pieces(&self, pieces: &[(u32, u64, u64)]) -> Result<Bytes> {
        if pieces.len() == 1 {
            let (z, off, n) = pieces[0];
            return self.read_piece(z, off, n).await;
        }
        let mut out = BytesMut::with_capacity(pieces.iter().map(|p| p.2 as usize).sum());
        for &(z, off, n) in pieces {
            out.extend_from_slice(&self.read_piece(z, off, n).await?);
        }
        Ok(out.freeze())
    }

    /// Reads `n` bytes at `off` of `zone`; a pass-through instance reads whole blocks (its
    /// appends were padded to whole blocks, so they are written) and cuts the range out.
    async fn read_piece(&self, zone: u32, off: u64, n: u64) -> Result<Bytes> {
        if !self.layout.whole_blocks {
            return Ok(self.client.read(zone, off, n as usize).await?);
        }
        let bs = self.layout.block();
        let start = off / bs * bs;
        let end = (off + n).div_ceil(bs) * bs;
        let data = self
            .client
            .read(zone, start, (end - start) as usize)
            .await?;
        let from = (off - start) as usize;
        Ok(data.slice(from..from + n as usize))
    }

    /// The size of the file at `path`: every byte appended (synced or not).
    pub async fn size(&self, path: &str) -> Result<u64> {
        let path = normalize(path)?;
        let st = self.state.lock().await;
        let id = st.tree.existing(&path)?;
        Ok(st.tree.node(id).expect("indexed").size())
    }

    /// The size, lifetime class and extent count of the file at `path`.
    pub async fn stat(&self, path: &str) -> Result<FileStat> {
        let path = normalize(path)?;
        let st = self.state.lock().await;
        let id = st.tree.existing(&path)?;
        Ok(FileStat::of(st.tree.node(id).expect("indexed")))
    }

    /// Whether a file exists at `path`.
    pub async fn exists(&self, path: &str) -> Result<bool> {
        let path = normalize(path)?;
        Ok(self.state.lock().await.tree.lookup(&path).is_some())
    }

    /// Deletes the file at `path`. Durable when it returns; zones left with no live data are
    /// reset then.
    pub async fn delete(&self, path: &str) -> Result<()> {
        let path = normalize(path)?;
        let mut st = self.state.lock().await;
        st.check_write("delete")?;
        self.group.check()?;
        let id = st.tree.existing(&path)?;
        let staged = self.stage(&mut st, &Delta::Delete { id })?;
        drop(st);
        self.finish(staged).await
    }

    /// Renames the file at `from` to `to`, atomically replacing a file at `to` (whose zones
    /// are reset if it held their last live data). Durable when it returns.
    pub async fn rename(&self, from: &str, to: &str) -> Result<()> {
        let from = normalize(from)?;
        let to = normalize(to)?;
        let mut st = self.state.lock().await;
        st.check_write("rename")?;
        self.group.check()?;
        let id = st.tree.existing(&from)?;
        if from == to {
            // Nothing to change; durable when it returns all the same (the file's creation
            // may still be queued).
            drop(st);
            return self.sync_metadata().await;
        }
        let staged = self.stage(&mut st, &Delta::Rename { id, path: to })?;
        drop(st);
        self.finish(staged).await
    }

    /// The names directly under `dir` (`""` or `/` = the root): files and subdirectories
    /// (a directory exists while a path lies under it), sorted, each once.
    pub async fn list(&self, dir: &str) -> Result<Vec<String>> {
        let dir = normalize_dir(dir)?;
        let st = self.state.lock().await;
        let mut out: Vec<String> = Vec::new();
        let start = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        for p in st.tree.paths_from(&start) {
            if !p.starts_with(&start) {
                break;
            }
            if let Some(name) = child_of(&dir, p) {
                if out.last().map(String::as_str) != Some(name) {
                    out.push(name.to_string());
                }
            }
        }
        Ok(out)
    }

    /// Space accounting over the data zones.
    pub async fn df(&self) -> SpaceUsage {
        let st = self.state.lock().await;
        SpaceUsage::of(&st.zones, self.layout.capacity())
    }

    /// Every data zone with its use, written and live bytes (for `fsck`-like tools and tests).
    pub async fn zones(&self) -> Vec<(u32, ZoneUse, u64, u64)> {
        let st = self.state.lock().await;
        st.zones
            .iter()
            .map(|(i, z)| (i, z.usage, z.written, z.live))
            .collect()
    }

    /// Applies `delta` in memory and queues it for the journal (call under the state lock).
    fn stage(&self, st: &mut State, delta: &Delta) -> Result<Staged> {
        let freed = st.tree.apply(delta).map_err(|e| FsError::Corrupt {
            reason: format!("internal: {}", e.0),
        })?;
        let seq = self.group.enqueue(delta.encode());
        let mut dead = BTreeSet::new();
        for e in freed {
            if st.zones.free_bytes(e.zone, e.len) {
                dead.insert(e.zone);
            }
        }
        Ok(Staged { seq, dead })
    }

    /// Waits until `staged` is durable (journal writes shared with concurrent callers: group
    /// commit), then resets the zones it left without live data — only then, and once every
    /// delta queued by then is durable too, so a crash never finds a journaled extent in a
    /// reset zone. Call without the state lock.
    async fn finish(&self, staged: Staged) -> Result<()> {
        let waited = self
            .group
            .wait(&self.client, &self.layout, staged.seq)
            .await?;
        if waited == Waited::NeedsRoll || !staged.dead.is_empty() {
            let mut st = self.state.lock().await;
            self.finish_locked(&mut st, staged).await?;
        }
        Ok(())
    }

    /// [`finish`](ZoneFs::finish) under the state lock.
    async fn finish_locked(&self, st: &mut State, staged: Staged) -> Result<()> {
        // Before a zone goes, every delta applied so far must be durable, not only this
        // one: a later one may have emptied the zone again after others filled it (an
        // append, a journaled Sync, then a delete still queued).
        let upto = match self.group.last_pending() {
            Some(last) if !staged.dead.is_empty() => last.max(staged.seq),
            _ => staged.seq,
        };
        self.group
            .wait_locked(&self.client, &self.layout, &st.tree, upto)
            .await?;
        for z in staged.dead {
            // Deltas since may have put live data in it, or reset it already.
            let dz = st.zones.get(z);
            // An append in flight to it resets it itself if its file is gone by then.
            if dz.live == 0
                && dz.written > 0
                && matches!(dz.usage, ZoneUse::Open(_) | ZoneUse::Closed)
                && !st.zones.is_appending(z)
            {
                self.reset_zone(st, z).await?;
            }
        }
        Ok(())
    }
}

/// The unsynced extents of file `id` that are on the device, from its first unsynced one on
/// (the Sync delta that makes them durable); an extent on the device only in part is split
/// there.
fn durable_unsynced(st: &mut State, id: u64) -> Vec<Extent> {
    let State { tree, zones, .. } = st;
    let node = tree.node_mut(id).expect("checked");
    let mut out = Vec::new();
    let mut i = node.synced;
    while i < node.extents.len() {
        let e = node.extents[i];
        let on_device = zones.on_device(e.zone);
        if e.offset + e.len <= on_device {
            out.push(e);
            i += 1;
            continue;
        }
        if e.offset < on_device {
            let head = on_device - e.offset;
            node.extents[i].len = head;
            node.extents.insert(
                i + 1,
                Extent {
                    zone: e.zone,
                    offset: on_device,
                    len: e.len - head,
                },
            );
            out.push(node.extents[i]);
        }
        break;
    }
    out
}

/// The `(zone, offset, len)` pieces of the file range `offset..offset + len` (clipped at the
/// file's end).
pub(crate) fn pieces_of(extents: &[Extent], offset: u64, len: u64) -> Vec<(u32, u64, u64)> {
    let mut out = Vec::new();
    let end = offset.saturating_add(len);
    let mut pos = 0u64;
    for e in extents {
        let (s, t) = (pos, pos + e.len);
        pos = t;
        if t <= offset {
            continue;
        }
        if s >= end {
            break;
        }
        let from = offset.max(s);
        let to = end.min(t);
        out.push((e.zone, e.offset + (from - s), to - from));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_range() {
        let ex = [
            Extent {
                zone: 3,
                offset: 100,
                len: 10,
            },
            Extent {
                zone: 4,
                offset: 0,
                len: 5,
            },
        ];
        assert_eq!(pieces_of(&ex, 0, 15), vec![(3, 100, 10), (4, 0, 5)]);
        assert_eq!(pieces_of(&ex, 8, 4), vec![(3, 108, 2), (4, 0, 2)]);
        assert_eq!(pieces_of(&ex, 12, 100), vec![(4, 2, 3)]);
        assert!(pieces_of(&ex, 15, 10).is_empty());
        assert!(pieces_of(&ex, 0, 0).is_empty());
    }

    proptest::proptest! {
        /// A view's pieces of any range are `pieces_of`'s non-empty ones, one per extent
        /// `covering` gives.
        #[test]
        fn view_pieces_are_pieces_of(
            lens in proptest::collection::vec(1u64..50, 0..20),
            offset in 0u64..600,
            len in 0u64..300,
        ) {
            let extents: Vec<Extent> = lens
                .iter()
                .enumerate()
                .map(|(i, &len)| Extent { zone: i as u32, offset: 7 * i as u64, len })
                .collect();
            let ends = extents
                .iter()
                .scan(0u64, |end, e| {
                    *end += e.len;
                    Some(*end)
                })
                .collect();
            let resets = vec![0; extents.len()];
            let view = ExtentView { extents, resets, ends };
            let end = offset + len;
            let range = view.covering(offset, end);
            let pieces = view.pieces(range.clone(), offset, end);
            proptest::prop_assert_eq!(pieces.len(), range.len());
            // `pieces_of` also gives an empty piece for an empty range inside an extent,
            // which reads nothing; the view gives none.
            let walked: Vec<_> = pieces_of(&view.extents, offset, len)
                .into_iter()
                .filter(|p| p.2 > 0)
                .collect();
            proptest::prop_assert_eq!(pieces, walked);
        }
    }
}
