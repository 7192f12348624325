//! One mounted zone file system per device per process ([`SharedFs::get`]), with what RocksDB
//! needs on top of zonefs: directories that exist while empty, files created lazily (so the
//! write-lifetime hint RocksDB sets after creating a file still picks the zones), small
//! appends gathered per open file ([`WriteBuf`]), in-process file locks and modification
//! times.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::mem::MaybeUninit;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ziob::backends::ZonedDevice;
use ziob::runtime::prefault::{keep_freed_memory, Prefault};
use ziob::{Client, Runtime, ZiobConfig};
use ziob_zonefs::{BlockingZoneFs, FsError, MkfsOptions, WriteLifetime, ZoneFs};

use crate::behind::Behind;
use crate::error::PluginError;
use crate::memory::{self, Prefaulting};
use crate::read_cache::{Held, PageCarry, ReadCache, PAGE_BYTES};
use crate::uri::FsUri;
use crate::warm::{self, WarmSource, Warmed};

/// Appends gathered in a file open for writing before they go to zonefs in one call (each
/// zonefs call is a round trip to a ZIOB core; RocksDB appends every WAL record on its own).
/// Handed over when [`WRITE_BUF_BYTES`] would be exceeded, on sync and close, and before
/// anything in the process looks at the file (read, size, rename) or the process exits.
///
/// A hand-over made because the buffer is full (or by an append of [`WRITE_BUF_BYTES`] or
/// more) runs *behind* the writer ([`Behind`]): as a task on a ZIOB core, while the writer's
/// thread goes on, so a writer does not wait for the core's round trip on every hand-over.
/// They land in order; a sync, a close and everything that looks at the file (read, size,
/// rename, delete) wait for them first, and their errors come back from the next append,
/// sync or close.
#[derive(Debug, Default)]
pub struct WriteBuf {
    data: Mutex<Gathered>,
}

/// What a [`WriteBuf`] holds.
#[derive(Debug, Default)]
struct Gathered {
    bytes: Vec<u8>,
    /// The hand-overs running behind the writer.
    behind: Behind,
    /// Why gathered bytes were lost (a hand-over failed, maybe on another thread's read):
    /// every later append, sync and close of the file fails with it, so a sync never reports
    /// data durable that never reached the file.
    lost: Option<String>,
    /// Cut off (its file deleted, renamed or created again while open) with nothing of its
    /// own failed: then `lost` says only that, and a release has nothing to report.
    cut_off_cleanly: bool,
    /// The file's last, partial page as handed over so far, for the read cache (locked by
    /// the hand-overs, which run in file order, and by a push once they are done). It holds
    /// views of the buffers of the hand-overs since that page began (gathered: ≤ 128 KiB
    /// each, in an allocation of up to twice that), until a later one completes it.
    carry: Arc<Mutex<PageCarry>>,
}

/// Most bytes a [`WriteBuf`] gathers.
pub const WRITE_BUF_BYTES: usize = 128 << 10;

/// A mounted file system shared by every RocksDB `FileSystem` object of its device.
pub struct SharedFs {
    /// The options it was opened with.
    pub uri: FsUri,
    /// The ZIOB runtime (kept alive for the process).
    runtime: Runtime,
    /// The file system, as blocking calls (RocksDB's threads are plain threads).
    pub fs: BlockingZoneFs,
    /// Created, not yet written files: path → lifetime class. Visible as empty files.
    pending: Mutex<HashMap<String, WriteLifetime>>,
    /// The gathered appends of files open for writing.
    writers: Mutex<HashMap<String, Arc<WriteBuf>>>,
    /// Recently read pages, and the table pages written last ([`caches_on_write`]).
    cache: Arc<ReadCache>,
    /// Directories made with `CreateDir` (a directory also exists while a file lies under it).
    dirs: Mutex<BTreeSet<String>>,
    /// Paths locked with `LockFile`.
    locks: Mutex<HashSet<String>>,
    /// Last change of a file made in this process (seconds since the epoch).
    mtimes: Mutex<HashMap<String, u64>>,
    /// When the file system was mounted (the modification time of files not changed since).
    mounted_at: u64,
    /// What the read cache's warm-up did and when it was started, once it is over
    /// ([`crate::warm`]).
    warmed: OnceLock<(Warmed, Instant)>,
    /// Bytes the warm-up has read into the cache so far.
    warm_read_bytes: AtomicU64,
    /// What the first mount's prefault did.
    prefaulted: OnceLock<MountPrefault>,
}

/// What the first mount's prefault did, and when it started (it was asked for
/// [`memory::prefault_bytes`] of the URI).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MountPrefault {
    /// What it did.
    pub outcome: Prefaulting,
    /// When it started.
    pub started: Instant,
}

/// Whether the pages written to `path` go to the read cache as well: RocksDB's table files
/// (`*.sst`, `*.blob`), which it reads back at random soon after writing them (a compaction's
/// inputs, the reads of fresh keys). Its WAL and MANIFEST are read only when a database
/// opens, so their pages would only push tables' pages out.
pub fn caches_on_write(path: &str) -> bool {
    path.ends_with(".sst") || path.ends_with(".blob")
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A path as zonefs keys it: components joined by `/`, empty and `.` components dropped.
pub fn clean(path: &str) -> String {
    path.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect::<Vec<_>>()
        .join("/")
}

fn registry() -> &'static Mutex<HashMap<String, &'static SharedFs>> {
    static R: OnceLock<Mutex<HashMap<String, &'static SharedFs>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// Whether `asked` names the device opened as `open` with the same options. `prefault=` and
/// `warm=` acted at the first mount and are no options of the open device; `cache=auto` was
/// sized from the memory available at the first open, so asked again it is the same option
/// whatever the memory now.
fn same_device_options(open: &FsUri, asked: &FsUri) -> bool {
    let asked = FsUri {
        prefault: open.prefault,
        warm_bytes: open.warm_bytes,
        // (Against an explicit size, `auto` still differs in `cache_auto`.)
        cache_bytes: if asked.cache_auto {
            open.cache_bytes
        } else {
            asked.cache_bytes
        },
        ..asked.clone()
    };
    *open == asked
}

impl SharedFs {
    /// The file system of `uri`'s device, opened (created, formatted, mounted) on first use
    /// and shared after. The same device asked for with other options is an error.
    pub fn get(uri: &str) -> Result<&'static SharedFs, PluginError> {
        let parsed = FsUri::parse(uri)?;
        let mut reg = lock(registry());
        if let Some(fs) = reg.get(&parsed.spec) {
            if !same_device_options(&fs.uri, &parsed) {
                return Err(PluginError::InvalidArgument(format!(
                    "{} is already open in this process as {} (one set of options per device)",
                    parsed.spec, fs.uri
                )));
            }
            return Ok(fs);
        }
        let (fs, freed_memory_kept) = SharedFs::open(parsed.clone())?;
        let fs: &'static SharedFs = Box::leak(Box::new(fs));
        reg.insert(parsed.spec, fs);
        // The prefault takes up to seconds: other devices' opens and `sync_all` need not
        // wait for it (a second `get` of this device meanwhile shares the mount at once).
        drop(reg);
        // The warm-up's reads wait on the device and the prefault's page touching on the
        // CPU: started first, the warm-up is mostly over when the prefault is, instead of
        // running into RocksDB's first reads.
        warm::start(fs, fs.uri.warm_budget());
        fs.prefault(freed_memory_kept);
        Ok(fs)
    }

    /// Makes the mount's prefault (see [`memory`]) and logs what it did. With
    /// `prefault=auto` it leaves out what the warm-up, running meanwhile, has faulted in for
    /// the cache before each piece (so the two together touch the budget once); a size asked
    /// for is made whole. `kept`: whether the allocator keeps freed memory (asked for before
    /// the runtime's threads started).
    fn prefault(&self, kept: bool) {
        let started = Instant::now();
        let auto = self.uri.prefault == Prefault::Auto;
        let less = || {
            if auto {
                self.warm_read_bytes.load(Ordering::Relaxed)
            } else {
                0
            }
        };
        let outcome = memory::prefault_mounted(memory::prefault_bytes(&self.uri), kept, less);
        let _ = self.prefaulted.set(MountPrefault { outcome, started });
        match outcome {
            Prefaulting::Done(p) => tracing::info!(
                uri = %self.uri,
                bytes = p.bytes,
                capped_bytes = p.capped_bytes,
                left_out_bytes = p.left_out_bytes,
                // Pages the warm-up faulted in meanwhile count here too.
                resident_growth = ?p.resident_growth,
                took = ?p.took,
                "ziob-rocksdb: prefaulted"
            ),
            other => {
                tracing::info!(uri = %self.uri, prefault = ?other, "ziob-rocksdb: no prefault")
            }
        }
    }

    /// Opens the device: an absent `emu:` file is created; a blank device is formatted; a
    /// zone file system is mounted; anything else is refused (never reformatted). Also says
    /// whether the allocator now keeps freed memory, which the prefault needs.
    fn open(uri: FsUri) -> Result<(SharedFs, bool), PluginError> {
        let prefault_bytes = memory::prefault_bytes(&uri);
        // Asked for before the runtime's threads start (mimalloc reads its options without
        // synchronisation); the prefault itself waits for a successful mount.
        let kept = prefault_bytes > 0 && keep_freed_memory();
        let runtime = ziob::backends::runtime_builder_for(&uri.spec)
            .cores(uri.cores)
            .busy_poll(uri.busy_poll)
            .build()
            .map_err(|e| PluginError::Io(format!("starting the ZIOB runtime: {e}")))?;
        let config = if uri.buffered {
            ZiobConfig::default()
        } else {
            ZiobConfig::pass_through()
        };
        if let Some(path) = uri.emu_path() {
            if !path.exists() {
                let mut g = ziob::Geometry::new(uri.emu_zones, uri.emu_zone_bytes);
                g.max_append_bytes = g.max_append_bytes.min(uri.emu_zone_bytes);
                let spec = uri.spec.clone();
                runtime
                    .block_on(move || async move {
                        ziob::backends::create_device(&spec, &g)
                            .await
                            .map(drop)
                            .map_err(|e| e.to_string())
                    })
                    .map_err(|e| PluginError::Io(e.to_string()))?
                    .map_err(|e| PluginError::Io(format!("creating {}: {e}", path.display())))?;
            }
        }
        let spec = uri.spec.clone();
        let device = runtime
            .block_on(move || async move {
                ziob::backends::open_device(&spec)
                    .await
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| PluginError::Io(format!("opening {}: {e}", uri.spec)))?
            .map_err(|e| PluginError::Io(format!("opening {}: {e}", uri.spec)))?;
        let config = ZiobConfig {
            writeback_unit_bytes: Some(ZiobConfig::fit_unit_bytes(
                uri.unit_bytes,
                device.geometry(),
            )),
            ..config
        };
        let client =
            futures::executor::block_on(Client::with_device(runtime.handle(), device, config))
                .map_err(|e| PluginError::Io(format!("opening {}: {e}", uri.spec)))?;
        let fs = match futures::executor::block_on(ZoneFs::mount(client.clone())) {
            Ok(fs) => fs,
            Err(FsError::NotFormatted) => {
                futures::executor::block_on(ZoneFs::mkfs(&client, MkfsOptions::default()))
                    .map_err(|e| PluginError::from_fs(e, &uri.spec))?;
                futures::executor::block_on(ZoneFs::mount(client))
                    .map_err(|e| PluginError::from_fs(e, &uri.spec))?
            }
            Err(e) => return Err(PluginError::from_fs(e, &uri.spec)),
        };
        tracing::info!(
            uri = %uri,
            cache_bytes = uri.cache_bytes,
            writeback_unit_bytes = ?fs.client().config().writeback_unit_bytes,
            report = ?fs.mount_report(),
            "ziob-rocksdb: mounted"
        );
        let cache = Arc::new(ReadCache::new(
            usize::try_from(uri.cache_bytes).unwrap_or(usize::MAX),
        ));
        let fs = SharedFs {
            uri,
            runtime,
            fs: fs.blocking(),
            pending: Mutex::default(),
            writers: Mutex::default(),
            cache,
            dirs: Mutex::default(),
            locks: Mutex::default(),
            mtimes: Mutex::default(),
            mounted_at: now_secs(),
            warmed: OnceLock::new(),
            warm_read_bytes: AtomicU64::new(0),
            prefaulted: OnceLock::new(),
        };
        Ok((fs, kept))
    }

    /// Syncs every file of every mounted device. The C++ shim runs it at a normal process exit
    /// (a static destructor), so that data written without `Sync` outlives the process as it
    /// would in the page cache.
    ///
    /// Runs on a thread of its own: at exit the calling thread's thread-locals (which the
    /// blocking calls use) may already be gone.
    pub fn sync_all_mounted() {
        let all: Vec<&'static SharedFs> = lock(registry()).values().copied().collect();
        if all.is_empty() {
            return;
        }
        let worker = std::thread::Builder::new()
            .name("ziob-rocksdb-exit-sync".into())
            .spawn(move || {
                for fs in all {
                    if let Err(e) = fs.push_all() {
                        eprintln!("ziob-rocksdb: writing {} at exit failed: {e}", fs.uri.spec);
                    }
                    if let Err(e) = fs.fs.sync_all() {
                        eprintln!("ziob-rocksdb: syncing {} at exit failed: {e}", fs.uri.spec);
                    }
                }
            });
        match worker {
            Ok(w) => {
                if w.join().is_err() {
                    eprintln!("ziob-rocksdb: syncing at exit panicked");
                }
            }
            Err(e) => eprintln!("ziob-rocksdb: no thread to sync at exit: {e}"),
        }
    }

    fn touch(&self, path: &str) {
        lock(&self.mtimes).insert(path.to_string(), now_secs());
    }

    /// Starts a new empty file at `path` (replacing one there): visible at once, created on
    /// the device at its first write or sync ([`materialize`](Self::materialize)).
    pub fn create_lazy(&self, path: &str, lifetime: WriteLifetime) -> Result<(), PluginError> {
        self.detach_writer(path, "created again");
        let old_len = self.len_for_cache(path);
        let replaced: Result<(), PluginError> = (|| {
            if self.fs.exists(path)? {
                self.fs.delete(path)?;
            }
            lock(&self.pending).insert(path.to_string(), lifetime);
            Ok(())
        })();
        // After the change: a read racing with it may have kept the old bytes.
        self.cache.forget(path, old_len);
        replaced?;
        self.touch(path);
        Ok(())
    }

    /// Changes the lifetime class of a file not written yet; `false` if it is on the device
    /// already (then its class stays).
    pub fn set_pending_lifetime(&self, path: &str, lifetime: WriteLifetime) -> bool {
        match lock(&self.pending).get_mut(path) {
            Some(l) => {
                *l = lifetime;
                true
            }
            None => false,
        }
    }

    /// Creates a pending file on the device (a no-op for a file already there). The creation
    /// is durable with the file's first sync or a directory fsync
    /// ([`ZoneFs::create_unsynced`](ziob_zonefs::ZoneFs::create_unsynced)), so that a writer
    /// does not wait for the journal (a device flush) when it starts a new file.
    pub fn materialize(&self, path: &str) -> Result<(), PluginError> {
        let mut pending = lock(&self.pending);
        if let Some(lifetime) = pending.get(path).copied() {
            match self.fs.create_unsynced(path, lifetime) {
                Ok(()) | Err(FsError::AlreadyExists(_)) => {}
                Err(e) => return Err(e.into()),
            }
            pending.remove(path);
        }
        Ok(())
    }

    /// A directory fsync: creates every pending file under `dir` and makes every creation,
    /// deletion and rename so far durable.
    pub fn fsync_dir(&self, dir: &str) -> Result<(), PluginError> {
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let paths: Vec<String> = lock(&self.pending)
            .keys()
            .filter(|p| p.starts_with(&prefix))
            .cloned()
            .collect();
        for p in paths {
            self.materialize(&p)?;
        }
        Ok(self.fs.sync_metadata()?)
    }

    /// A new gathering buffer for `path`, open for writing (replacing an older writer's).
    pub fn writer(&self, path: &str) -> Arc<WriteBuf> {
        // A writer still open on the path (the file reopened for appending) is cut off: its
        // later appends would land behind the new writer's.
        self.detach_writer(path, "opened for writing again");
        let wb = Arc::new(WriteBuf::default());
        lock(&self.writers).insert(path.to_string(), wb.clone());
        wb
    }

    /// Cuts an open writer off `path` (the file is deleted, renamed or created again): what it
    /// gathered is dropped and its later appends, syncs and closes fail, so they never land
    /// in a file that takes the path afterwards.
    fn detach_writer(&self, path: &str, why: &str) {
        let wb = lock(&self.writers).remove(path);
        if let Some(wb) = wb {
            let mut b = lock(&wb.data);
            // A hand-over still running lands before the change (its append returned before
            // the caller made the change); its error, if any, is kept in the writer's.
            let earlier = Self::settle(path, &mut b).err();
            // The first failure's own words, not a later hand-over's "an earlier one failed".
            let cause = b.lost.take().or(earlier.map(|e| e.to_string()));
            b.bytes.clear();
            b.cut_off_cleanly = cause.is_none();
            b.lost = Some(match cause {
                None => format!("the file was {why} while open for writing"),
                Some(c) => format!(
                    "the file was {why} while open for writing, after an append to it failed: {c}"
                ),
            });
        }
    }

    /// Releases a writer the caller dropped without closing it: hands over what it gathered
    /// and drops its entry. A writer only cut off (its file deleted, renamed or created again
    /// while open, nothing of its own failed) has nothing to report: as with a POSIX file
    /// unlinked while open, what it wrote after that went nowhere, and its appends since
    /// were refused to their caller.
    pub fn release_writer(&self, path: &str, wb: &Arc<WriteBuf>) -> Result<(), PluginError> {
        let out = match self.push_buf(path, wb) {
            Err(_) if lock(&wb.data).cut_off_cleanly => Ok(()),
            other => other,
        };
        self.forget_writer(path, wb);
        out
    }

    /// Drops `path`'s writer entry if it is `wb` (after [`push`](Self::push_buf)).
    pub fn forget_writer(&self, path: &str, wb: &Arc<WriteBuf>) {
        let mut w = lock(&self.writers);
        if w.get(path).is_some_and(|cur| Arc::ptr_eq(cur, wb)) {
            w.remove(path);
        }
    }

    /// Appends through the gathering buffer `wb` of `path`.
    pub fn buffered_append(
        &self,
        path: &str,
        wb: &WriteBuf,
        data: &[u8],
    ) -> Result<(), PluginError> {
        let mut b = lock(&wb.data);
        Self::check_lost(path, &b)?;
        if let Err(e) = b.behind.collect_ended(path) {
            b.lost.get_or_insert_with(|| e.to_string());
            return Err(e);
        }
        if b.bytes.len() + data.len() <= WRITE_BUF_BYTES {
            b.bytes.extend_from_slice(data);
            return Ok(());
        }
        self.hand_over_behind(path, &mut b)?;
        if data.len() >= WRITE_BUF_BYTES {
            // Handed over at once, behind the writer as well (after the gathered bytes).
            self.start_behind(path, &mut b, Bytes::copy_from_slice(data))
        } else {
            b.bytes.extend_from_slice(data);
            Ok(())
        }
    }

    fn check_lost(path: &str, b: &Gathered) -> Result<(), PluginError> {
        match &b.lost {
            Some(why) => Err(PluginError::Io(format!(
                "earlier appends to /{path} were lost: {why}"
            ))),
            None => Ok(()),
        }
    }

    /// Waits until every hand-over of `path`'s writer is in the file. An error among them
    /// (the file then holds an unknown part of those bytes) is returned once as it is and
    /// then stays in `b.lost`.
    fn settle(path: &str, b: &mut Gathered) -> Result<(), PluginError> {
        if let Err(e) = b.behind.wait_all(path) {
            b.lost.get_or_insert_with(|| e.to_string());
            return Err(e);
        }
        Self::check_lost(path, b)
    }

    /// Starts appending `data` to `path` behind the writer (see [`Behind::start`]). A
    /// table's whole pages go to the read cache once they are in the file
    /// ([`caches_on_write`]).
    fn start_behind(&self, path: &str, b: &mut Gathered, data: Bytes) -> Result<(), PluginError> {
        Self::check_lost(path, b)?;
        let started = self.materialize(path).and_then(|()| {
            let fs = self.fs.fs().clone();
            let owned = path.to_string();
            // Looked up before the append, as a read does: a delete, rename or re-create
            // meanwhile forgets it, and the pages kept under it are never found.
            let cache = (self.cache.is_on() && caches_on_write(path))
                .then(|| (self.cache.clone(), self.cache.generation(path)));
            let carry = b.carry.clone();
            b.behind
                .start(&self.runtime.handle(), path, move || async move {
                    let Some((cache, generation)) = cache else {
                        return Ok(fs.append_bytes(&owned, data).await?);
                    };
                    let offset = fs.append_at(&owned, data.clone()).await?;
                    // The bytes are in the file: the cache's upkeep must not fail the write.
                    let kept = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        cache.insert_written(generation, offset, &data, &mut lock(&carry))
                    }));
                    if kept.is_err() {
                        tracing::warn!(path = owned, "ziob-rocksdb: read cache upkeep panicked");
                        *lock(&carry) = PageCarry::default();
                    }
                    Ok(())
                })
        });
        if let Err(e) = &started {
            b.lost.get_or_insert_with(|| e.to_string());
        }
        started
    }

    /// Hands what `b` gathered over behind the writer and empties it (also on error; the
    /// error goes to the caller and stays in `b.lost`).
    fn hand_over_behind(&self, path: &str, b: &mut Gathered) -> Result<(), PluginError> {
        Self::check_lost(path, b)?;
        if b.bytes.is_empty() {
            return Ok(());
        }
        // A full gathering moves over whole; a small one (a sync's or a close's tail) is
        // copied, so the buffer keeps its capacity.
        let data = if b.bytes.len() >= WRITE_BUF_BYTES / 2 {
            Bytes::from(std::mem::replace(
                &mut b.bytes,
                Vec::with_capacity(WRITE_BUF_BYTES),
            ))
        } else {
            let small = Bytes::copy_from_slice(&b.bytes);
            b.bytes.clear();
            small
        };
        self.start_behind(path, b, data)
    }

    /// Hands over what `wb` gathered for `path` and waits until every hand-over of it is in
    /// the file (an error if gathered bytes were lost); a table's last, partial page then
    /// goes to the read cache as its tail (a sync, a close, and whatever looks at the file
    /// push).
    pub fn push_buf(&self, path: &str, wb: &WriteBuf) -> Result<(), PluginError> {
        let mut b = lock(&wb.data);
        self.hand_over_behind(path, &mut b)?;
        Self::settle(path, &mut b)?;
        // The file ends there for now: its last, partial page is its tail (a table's
        // footer, index and filter, read when RocksDB opens it).
        self.cache.insert_carried_tail(&mut lock(&b.carry));
        Ok(())
    }

    /// Hands over the gathered appends of `path`'s writer, if it has one.
    pub(crate) fn push(&self, path: &str) -> Result<(), PluginError> {
        let wb = lock(&self.writers).get(path).cloned();
        match wb {
            Some(wb) => self.push_buf(path, &wb),
            None => Ok(()),
        }
    }

    /// Hands over the gathered appends of every writer.
    pub fn push_all(&self) -> Result<(), PluginError> {
        let all: Vec<(String, Arc<WriteBuf>)> = lock(&self.writers)
            .iter()
            .map(|(p, w)| (p.clone(), w.clone()))
            .collect();
        // Every writer, even after one failed (its error comes back at the end).
        let mut first = Ok(());
        for (p, w) in all {
            if let Err(e) = self.push_buf(&p, &w) {
                first = first.and(Err(e));
            }
        }
        first
    }

    /// Makes a file durable up to its size (created on the device first if pending).
    pub fn sync(&self, path: &str) -> Result<(), PluginError> {
        self.push(path)?;
        self.materialize(path)?;
        self.fs.sync(path)?;
        self.touch(path);
        Ok(())
    }

    /// Whether a file (not a directory) is at `path`.
    pub fn file_exists(&self, path: &str) -> Result<bool, PluginError> {
        // The `pending` lock only for the lookup: not across the file system's call.
        let pending = lock(&self.pending).contains_key(path);
        Ok(pending || self.fs.exists(path)?)
    }

    /// Whether a directory is at `dir`: the root, one made with `CreateDir`, or a path prefix
    /// of a file.
    pub fn dir_exists(&self, dir: &str) -> Result<bool, PluginError> {
        if dir.is_empty() || lock(&self.dirs).contains(dir) {
            return Ok(true);
        }
        Ok(!self.children(dir)?.is_empty())
    }

    /// The names directly under `dir`: files, pending files and directories, sorted, once.
    pub fn children(&self, dir: &str) -> Result<Vec<String>, PluginError> {
        let mut names: BTreeSet<String> = self.fs.list(dir)?.into_iter().collect();
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let under = |p: &String| {
            p.strip_prefix(&prefix)
                .and_then(|r| r.split('/').next())
                .filter(|n| !n.is_empty())
                .map(str::to_string)
        };
        names.extend(lock(&self.pending).keys().filter_map(under));
        names.extend(lock(&self.dirs).iter().filter_map(under));
        Ok(names.into_iter().collect())
    }

    /// Records a directory.
    pub fn create_dir(&self, dir: &str) {
        if !dir.is_empty() {
            lock(&self.dirs).insert(dir.to_string());
        }
    }

    /// Removes an empty directory.
    pub fn delete_dir(&self, dir: &str) -> Result<(), PluginError> {
        if !self.children(dir)?.is_empty() {
            return Err(PluginError::Io(format!("directory not empty: /{dir}")));
        }
        if !lock(&self.dirs).remove(dir) {
            return Err(PluginError::NotFound(format!("no such directory: /{dir}")));
        }
        Ok(())
    }

    /// Size of a file, with what its writer gathered (handed over first: a pending file
    /// with gathered bytes is created then; one with none is empty).
    pub fn size(&self, path: &str) -> Result<u64, PluginError> {
        self.push(path)?;
        if lock(&self.pending).contains_key(path) {
            return Ok(0);
        }
        Ok(self.fs.size(path)?)
    }

    /// Whether reads go through the plugin's read cache.
    pub(crate) fn caches_reads(&self) -> bool {
        self.cache.is_on()
    }

    /// What the read cache's warm-up after the mount did, once it is over (`None` before,
    /// and when it did not run: `warm=0` or no cache; see [`crate::warm`]).
    pub fn warmed(&self) -> Option<Warmed> {
        self.warmed.get().map(|(w, _)| *w)
    }

    /// When the warm-up was started: known once it is over (`None` before, or without one).
    /// For tests and diagnostics.
    pub fn warm_started(&self) -> Option<Instant> {
        self.warmed.get().map(|(_, started)| *started)
    }

    /// What the first mount's prefault did (`None` until it is over). For tests and
    /// diagnostics.
    pub fn prefaulted(&self) -> Option<MountPrefault> {
        self.prefaulted.get().copied()
    }

    /// Whether the read cache holds the page of `path` that holds byte `offset` (under the
    /// path's current generation): for tests and diagnostics.
    pub fn is_cached(&self, path: &str, offset: u64) -> bool {
        self.cache
            .current_generation(path)
            .is_some_and(|generation| self.cache.get(generation, offset / PAGE_BYTES).is_some())
    }

    /// Reads up to `out.len()` bytes at `offset` of `path` through the read cache (which
    /// must be on) into `out` and says how many (fewer only at the end of the file): a hit
    /// copies just those bytes from the cached pages, a miss reads as [`read_at`](Self::read_at)
    /// does and copies from what it read.
    pub(crate) fn read_cached_into(
        &self,
        path: &str,
        offset: u64,
        out: &mut [MaybeUninit<u8>],
    ) -> Result<usize, PluginError> {
        let generation = self.cache.generation(path);
        if self.cache.copy_into(generation, offset, out) {
            return Ok(out.len());
        }
        let data = self.read_missed(path, generation, offset, out.len())?;
        let n = data.len().min(out.len());
        out[..n].write_copy_of_slice(&data[..n]);
        Ok(n)
    }

    /// Whether every byte of `[offset, offset + len)` that `path` holds is in the read cache,
    /// so that reading it costs no round trip: what RocksDB's `Prefetch` asks (it then reads
    /// block by block, as from the page cache after a readahead; else it reads ahead into a
    /// buffer of its own). False without a read cache, when nothing of the path was kept, or
    /// when the file is not on the device. It looks at the cache only, unless the kept bytes
    /// stop at a tail: then whether the file ends there (its size, under the file layer's
    /// lock).
    pub fn is_range_cached(&self, path: &str, offset: u64, len: usize) -> bool {
        let Some(generation) = self.cache.current_generation(path) else {
            return false;
        };
        match self.cache.held(generation, offset, len) {
            Held::All => true,
            Held::Not => false,
            Held::UpTo(end) => self.fs.size(path).is_ok_and(|size| size <= end),
        }
    }

    /// Reads up to `len` bytes at `offset` (a pending file is empty), through the read cache:
    /// a read whose pages are all cached costs no round trip; a miss reads the whole pages it
    /// touches in one call and keeps them, the file's tail included (see [`ReadCache`]), unless
    /// it spans more than [`ReadCache::max_span`].
    pub fn read_at(&self, path: &str, offset: u64, len: usize) -> Result<Bytes, PluginError> {
        if len == 0 || !self.cache.is_on() {
            return self.read_direct(path, offset, len);
        }
        let generation = self.cache.generation(path);
        if let Some(hit) = self.cache.get_range(generation, offset, len) {
            return Ok(hit);
        }
        self.read_missed(path, generation, offset, len)
    }

    /// [`read_at`](Self::read_at) after its cache lookup missed, keeping what it read under
    /// `generation` (looked up before).
    fn read_missed(
        &self,
        path: &str,
        generation: u64,
        offset: u64,
        len: usize,
    ) -> Result<Bytes, PluginError> {
        const P: u64 = PAGE_BYTES;
        if len == 0 {
            return Ok(Bytes::new());
        }
        let end = offset.saturating_add(len as u64);
        let (first, last) = (offset / P, (end - 1) / P);
        let span = (last - first + 1) * P;
        if span > self.cache.max_span() {
            return self.read_direct(path, offset, len);
        }
        let data = self.read_direct(path, first * P, span as usize)?;
        self.cache
            .insert_read(generation, first * P, &data, span as usize);
        let from = (offset - first * P) as usize;
        let to = (from + len).min(data.len());
        Ok(if from >= to {
            Bytes::new()
        } else {
            data.slice(from..to)
        })
    }

    /// Reads up to `len` bytes at `offset` from the file layer (a pending file is empty).
    fn read_direct(&self, path: &str, offset: u64, len: usize) -> Result<Bytes, PluginError> {
        self.push(path)?;
        match self.fs.read_at(path, offset, len) {
            Err(FsError::NotFound(_)) if lock(&self.pending).contains_key(path) => Ok(Bytes::new()),
            other => Ok(other?),
        }
    }

    /// The length of `path` whose cached pages a change of it drops at once
    /// ([`ReadCache::forget`]): its size on the device, 0 when nothing of it can be cached
    /// (the cache is off, or the path has no generation) or the file is not there.
    fn len_for_cache(&self, path: &str) -> u64 {
        // No generation: nothing of it is cached (a new file, a WAL never read).
        if self.cache.current_generation(path).is_none() {
            return 0;
        }
        self.fs.size(path).unwrap_or(0)
    }

    /// Deletes a file.
    pub fn delete(&self, path: &str) -> Result<(), PluginError> {
        lock(&self.mtimes).remove(path);
        self.detach_writer(path, "deleted");
        let len = self.len_for_cache(path);
        let deleted = if lock(&self.pending).remove(path).is_some() {
            Ok(())
        } else {
            self.fs.delete(path).map_err(PluginError::from)
        };
        // After the change: a read racing with it may have kept the old bytes.
        self.cache.forget(path, len);
        deleted
    }

    /// Renames a file, replacing the target.
    pub fn rename(&self, from: &str, to: &str) -> Result<(), PluginError> {
        self.push(from)?;
        self.detach_writer(from, "renamed");
        self.detach_writer(to, "renamed over");
        let (from_len, to_len) = (self.len_for_cache(from), self.len_for_cache(to));
        let renamed: Result<(), PluginError> = (|| {
            self.materialize(from)?;
            lock(&self.pending).remove(to);
            self.fs.rename(from, to)?;
            Ok(())
        })();
        // After the change: a read racing with it may have kept the old bytes of `to`.
        self.cache.forget(from, from_len);
        self.cache.forget(to, to_len);
        renamed?;
        let mut m = lock(&self.mtimes);
        let t = m.remove(from).unwrap_or_else(now_secs);
        m.insert(to.to_string(), t);
        Ok(())
    }

    /// Modification time (seconds since the epoch): the last change made in this process, or
    /// the mount time.
    pub fn mtime(&self, path: &str) -> Result<u64, PluginError> {
        if !self.file_exists(path)? {
            return Err(PluginError::NotFound(format!("no such file: /{path}")));
        }
        Ok(lock(&self.mtimes)
            .get(path)
            .copied()
            .unwrap_or(self.mounted_at))
    }

    /// Takes the in-process lock on `path` (creating the file if absent).
    pub fn lock_file(&self, path: &str) -> Result<(), PluginError> {
        if !lock(&self.locks).insert(path.to_string()) {
            return Err(PluginError::Io(format!(
                "lock /{path}: already held in this process"
            )));
        }
        let made = (|| {
            if !self.file_exists(path)? {
                self.fs.create(path, WriteLifetime::NotSet)?;
            }
            Ok(())
        })();
        if made.is_err() {
            lock(&self.locks).remove(path);
        }
        made
    }

    /// Releases a lock.
    pub fn unlock_file(&self, path: &str) -> Result<(), PluginError> {
        if lock(&self.locks).remove(path) {
            Ok(())
        } else {
            Err(PluginError::Io(format!("unlock /{path}: not locked")))
        }
    }

    /// Bytes still writable.
    pub fn free_bytes(&self) -> Result<u64, PluginError> {
        Ok(self.fs.df()?.free_bytes)
    }
}

/// The read cache's warm-up reads through the file layer ([`crate::warm`]).
impl WarmSource for SharedFs {
    fn caches_reads(&self) -> bool {
        self.cache.is_on()
    }

    fn children(&self, dir: &str) -> Result<Vec<String>, PluginError> {
        SharedFs::children(self, dir)
    }

    fn file_exists(&self, path: &str) -> Result<bool, PluginError> {
        SharedFs::file_exists(self, path)
    }

    fn stored_size(&self, path: &str) -> Result<u64, PluginError> {
        Ok(self.fs.size(path)?)
    }

    /// Unless every page is cached already; unlike a read, it hands nothing over from the
    /// file's writer (what the file layer holds is final).
    fn warm_pages(&self, path: &str, offset: u64, len: usize) -> Result<(), PluginError> {
        const P: u64 = PAGE_BYTES;
        if !offset.is_multiple_of(P) {
            return Err(PluginError::InvalidArgument(format!(
                "warm-up of {path} at {offset}, not a page boundary"
            )));
        }
        let generation = self.cache.generation(path);
        let first = offset / P;
        let count = (len as u64).div_ceil(P);
        if (first..first + count).all(|i| self.cache.get(generation, i).is_some()) {
            return Ok(());
        }
        let data = self.fs.read_at(path, offset, len)?;
        self.cache.insert_range(generation, offset, &data);
        self.warm_read_bytes
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn warmed(&self, warmed: Warmed, started: Instant) {
        tracing::info!(
            uri = %self.uri,
            files = warmed.files,
            bytes = warmed.bytes,
            took = ?started.elapsed(),
            "ziob-rocksdb: read cache warmed"
        );
        let _ = self.warmed.set((warmed, started));
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use futures::channel::oneshot;

    use super::*;

    /// A later open matches the first one's options except `prefault=` and `warm=`, and an
    /// `auto` read cache matches `auto` whatever size the memory available gives it now.
    #[test]
    fn reopening_compares_the_device_options_and_auto_by_name() {
        let open = |u: &str, auto_bytes: u64| {
            let mut u = FsUri::parse(u).unwrap();
            if u.cache_auto {
                u.cache_bytes = auto_bytes;
            }
            u
        };
        let first = open("ziob://nvme:/dev/ng0n1", 100 << 20);
        assert!(same_device_options(
            &first,
            &open("ziob://nvme:/dev/ng0n1", 300 << 20)
        ));
        assert!(same_device_options(
            &first,
            &open(
                "ziob://nvme:/dev/ng0n1?cache=auto&prefault=auto&warm=0",
                64 << 20
            )
        ));
        for other in ["cache=100M", "cache=0", "cores=2", "buffer=off"] {
            let asked = open(&format!("ziob://nvme:/dev/ng0n1?{other}"), 100 << 20);
            assert!(!same_device_options(&first, &asked), "{other}");
        }
        let fixed = open("ziob://nvme:/dev/ng0n1?cache=100M", 0);
        assert!(
            !same_device_options(&fixed, &first),
            "explicit against auto"
        );
        assert!(same_device_options(&fixed, &fixed.clone()));
    }

    /// A small emu device under the temp dir for one test (`tag`), created and mounted; its
    /// file, for the test to remove.
    fn small_fs(tag: &str) -> (&'static SharedFs, std::path::PathBuf) {
        small_fs_with(tag, "")
    }

    /// [`small_fs`] with more URI options (`&`-separated, e.g. `&warm=0`).
    fn small_fs_with(tag: &str, opts: &str) -> (&'static SharedFs, std::path::PathBuf) {
        let file = std::env::temp_dir().join(format!(
            "ziob-rocksdb-unit-{tag}-{}.zns",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&file);
        let fs = SharedFs::get(&format!(
            "ziob://emu:{}?zones=8&zone_size=4M{opts}",
            file.display()
        ))
        .unwrap();
        (fs, file)
    }

    /// The mount configures its zone write buffer with the `unit=` asked for (4 MiB by
    /// default), at most a zone's capacity.
    #[test]
    fn the_mount_configures_the_asked_unit_within_a_zone() {
        let unit = |fs: &SharedFs| fs.fs.fs().client().config().writeback_unit_bytes;
        let (fs, asked) = small_fs_with("unit-asked", "&unit=1M");
        assert_eq!(unit(fs), Some(1 << 20));
        // The second `zone_size=` wins: zones of 2 MiB, below the default unit.
        let (fs, capped) = small_fs_with("unit-capped", "&zone_size=2M");
        assert_eq!(fs.uri.unit_bytes, crate::uri::UNIT_BYTES_DEFAULT);
        assert_eq!(unit(fs), Some(2 << 20), "at most the zone capacity");
        let _ = std::fs::remove_file(asked);
        let _ = std::fs::remove_file(capped);
    }

    /// `prefault=` and `warm=` act at the first mount only: a later open of the same device
    /// may give any value, and `cache=auto` matches the first open's `auto`, while another
    /// value of a device option is refused.
    #[test]
    fn a_later_open_may_differ_in_prefault_and_warm_only() {
        let (fs, file) = small_fs("prefault-option");
        let uri = format!("ziob://emu:{}?zones=8&zone_size=4M", file.display());
        for option in [
            "prefault=0",
            "prefault=auto",
            "prefault=8M",
            "warm=0",
            "warm=1M",
            // The first open's default read cache is `auto`: asked for again, it is the same
            // option whatever memory is available now.
            "cache=auto",
        ] {
            let again = SharedFs::get(&format!("{uri}&{option}")).unwrap();
            assert!(std::ptr::eq(fs, again), "{option}");
        }
        for other in ["cores=2", "cache=64M", "unit=1M"] {
            assert!(
                matches!(
                    SharedFs::get(&format!("{uri}&{other}")),
                    Err(PluginError::InvalidArgument(_))
                ),
                "{other}"
            );
        }
        let _ = std::fs::remove_file(&file);
    }

    /// A table's pages are all in the read cache once its hand-overs are in the file and it
    /// is synced, each with the file's bytes (the last, partial one as the tail), so reading
    /// them back needs no device read; a WAL's are not kept. Seeded appends of random lengths
    /// (gathered, and some handed over whole).
    #[test]
    fn a_tables_written_pages_are_kept_in_the_read_cache() {
        const P: usize = PAGE_BYTES as usize;
        let (fs, file) = small_fs_with("write-through", "&warm=0");
        assert!(fs.cache.is_on(), "emu with direct I/O has the read cache");
        for seed in 0..3u64 {
            for (p, table) in [
                (format!("db/{:06}.sst", 20 + seed), true),
                (format!("db/{:06}.log", 20 + seed), false),
            ] {
                fs.create_lazy(&p, WriteLifetime::Short).unwrap();
                let wb = fs.writer(&p);
                let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut model = Vec::new();
                while model.len() < 24 * P {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let len = 1 + (x % (160 << 10)) as usize;
                    let data: Vec<u8> = (model.len()..model.len() + len)
                        .map(|o| (o as u64 * 7 + seed) as u8)
                        .collect();
                    fs.buffered_append(&p, &wb, &data).unwrap();
                    model.extend_from_slice(&data);
                }
                fs.push_buf(&p, &wb).unwrap();
                let g = fs.cache.generation(&p);
                let whole = model.len() / P;
                let mut kept = 0;
                for i in 0..whole {
                    if let Some(page) = fs.cache.get(g, i as u64) {
                        assert_eq!(&page[..], &model[i * P..(i + 1) * P], "{p} page {i}");
                        kept += 1;
                    }
                }
                let tail = fs.cache.get(g, whole as u64);
                if table {
                    // Every page, also those no single hand-over covers whole (the carry
                    // completes them), and the last, partial one as the tail.
                    assert_eq!(kept, whole, "{p}: {kept} of {whole} pages kept");
                    let tail = tail.expect("the tail is kept at the sync");
                    assert_eq!(&tail[..], &model[whole * P..], "{p}: the tail");
                } else {
                    assert_eq!(kept, 0, "{p}: a WAL's pages are not kept");
                    assert!(tail.is_none(), "{p}: a WAL's tail is not kept");
                }
                for i in 0..50usize {
                    let at = (i * 7919 * 13) % model.len();
                    let len = (i * 4099) % 9000 + 1;
                    let got = fs.read_at(&p, at as u64, len).unwrap();
                    assert_eq!(
                        &got[..],
                        &model[at..(at + len).min(model.len())],
                        "{p} read {i}"
                    );
                }
                fs.forget_writer(&p, &wb);
                // Deleted: its pages leave the cache at once, their buffers kept for reuse.
                let (held, free) = (fs.cache.bytes(), fs.cache.pool_stats().free_buffers);
                fs.delete(&p).unwrap();
                if table {
                    let whole_bytes = (model.len() / P * P) as isize;
                    let dropped = held as isize - fs.cache.bytes() as isize;
                    assert!(dropped >= whole_bytes, "{p}: {dropped} bytes dropped");
                    assert!(
                        fs.cache.pool_stats().free_buffers >= free + whole,
                        "{p}: buffers kept"
                    );
                }
            }
        }
        let _ = std::fs::remove_file(&file);
    }

    /// A table written, closed and reopened for appending twice (each new writer starts at
    /// an unaligned offset with a fresh carry): every page the cache keeps holds the file's
    /// bytes, every page a writer covered from its first page boundary on is kept, and so is
    /// the tail it left.
    #[test]
    fn a_table_reopened_for_appending_keeps_only_its_bytes() {
        const P: usize = PAGE_BYTES as usize;
        let (fs, file) = small_fs_with("reopen-carry", "&warm=0");
        let p = "db/000041.sst";
        fs.create_lazy(p, WriteLifetime::Short).unwrap();
        let byte = |o: usize| (o * 7 % 251) as u8;
        let mut model: Vec<u8> = Vec::new();
        for len in [3 * P + 1234, 5 * P + 77, 100, 2 * P] {
            let started = model.len();
            // As `ziob_wfile_open` with reopen = 1: a new writer on the existing file.
            let wb = fs.writer(p);
            let data: Vec<u8> = (started..started + len).map(byte).collect();
            for chunk in data.chunks(3000) {
                fs.buffered_append(p, &wb, chunk).unwrap();
            }
            model.extend_from_slice(&data);
            fs.push_buf(p, &wb).unwrap();
            fs.forget_writer(p, &wb);
            let g = fs.cache.generation(p);
            let last = model.len() / P;
            for i in 0..=last {
                if let Some(page) = fs.cache.get(g, i as u64) {
                    let want = &model[i * P..(i * P + page.len()).min(model.len())];
                    assert!(page[..] == *want, "after {started}+{len}: page {i} wrong");
                }
            }
            for i in started.div_ceil(P)..last {
                assert!(
                    fs.cache.get(g, i as u64).is_some(),
                    "{started}+{len}: page {i}"
                );
            }
            if !model.len().is_multiple_of(P) && started <= last * P {
                let tail = fs.cache.get(g, last as u64).expect("the tail");
                assert_eq!(tail.len(), model.len() % P, "{started}+{len}: the tail");
            }
        }
        let _ = std::fs::remove_file(&file);
    }

    /// What `Prefetch` is told is cached is what reads serve from memory: pages a read
    /// kept, the file's tail once a read found the file ending in it, a range reaching past
    /// the end of the file when the part before it is kept; a page never read is not.
    #[test]
    fn a_range_is_cached_once_reads_kept_its_pages_and_tail() {
        const P: u64 = PAGE_BYTES;
        // No warm-up: it could read the table's pages into the cache meanwhile.
        let (fs, file) = small_fs_with("range-cached", "&warm=0");
        let p = "db/000031.sst";
        fs.create_lazy(p, WriteLifetime::Short).unwrap();
        let wb = fs.writer(p);
        let model: Vec<u8> = (0..3 * P + 1000).map(|o| (o % 253) as u8).collect();
        fs.buffered_append(p, &wb, &model).unwrap();
        fs.push_buf(p, &wb).unwrap();
        fs.forget_writer(p, &wb);
        // Whatever the writes kept, gone: a fresh generation.
        fs.cache.forget(p, 0);
        assert!(!fs.is_range_cached(p, 0, 100));
        assert_eq!(&fs.read_at(p, 0, 100).unwrap()[..], &model[..100]);
        assert!(fs.is_range_cached(p, 0, P as usize));
        assert!(
            !fs.is_range_cached(p, 0, P as usize + 1),
            "page 1 was never read"
        );
        assert!(!fs.is_range_cached(p, 3 * P, 10), "the tail was never read");
        let tail = fs.read_at(p, 3 * P + 10, 20).unwrap();
        assert_eq!(
            &tail[..],
            &model[(3 * P + 10) as usize..(3 * P + 30) as usize]
        );
        assert!(fs.is_range_cached(p, 3 * P, 1000));
        assert!(
            fs.is_range_cached(p, 3 * P + 500, 1 << 20),
            "up to the end of the file"
        );
        assert!(
            !fs.is_range_cached(p, 10 * P, 100),
            "past the end: nothing kept there"
        );
        assert!(
            !fs.is_range_cached(p, 2 * P, 2 * P as usize),
            "page 2 was never read"
        );
        assert!(!fs.is_range_cached("db/000032.sst", 0, 10), "no such file");
        fs.delete(p).unwrap();
        assert!(!fs.is_range_cached(p, 0, 100), "deleted");
        let _ = std::fs::remove_file(&file);
    }

    /// A writer cut off (its file deleted, renamed over or created again) while a hand-over
    /// of it is still queued: the change waits for it, so it lands in the old file, never in
    /// the one that takes the path next. A gate hand-over holds the queue still while
    /// another thread changes the path and writes the new file; without the wait, the
    /// queued bytes land in the new file once the gate opens.
    #[test]
    fn a_change_of_path_waits_for_the_old_writers_queued_hand_overs() {
        let (fs, file) = small_fs("cut-off");
        for how in ["delete", "rename over", "create again"] {
            let p = "db/000011.sst";
            fs.create_lazy(p, WriteLifetime::Short).unwrap();
            let wb = fs.writer(p);
            fs.materialize(p).unwrap();
            let (open_gate, gate) = oneshot::channel::<()>();
            {
                let mut b = lock(&wb.data);
                b.behind
                    .start(&fs.runtime.handle(), p, move || async move {
                        let _ = gate.await;
                        Ok(())
                    })
                    .unwrap();
                fs.start_behind(p, &mut b, Bytes::from_static(b"stale"))
                    .unwrap();
            }
            let changer = std::thread::spawn(move || {
                match how {
                    "delete" => fs.delete(p).unwrap(),
                    "rename over" => {
                        fs.create_lazy("db/other", WriteLifetime::Short).unwrap();
                        fs.materialize("db/other").unwrap();
                        fs.rename("db/other", p).unwrap();
                    }
                    _ => {}
                }
                fs.create_lazy(p, WriteLifetime::Short).unwrap();
                let new = fs.writer(p);
                fs.buffered_append(p, &new, b"new").unwrap();
                fs.push_buf(p, &new).unwrap();
                fs.sync(p).unwrap();
                fs.forget_writer(p, &new);
            });
            let start = Instant::now();
            while !changer.is_finished() && start.elapsed() < Duration::from_millis(300) {
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = open_gate.send(());
            changer.join().unwrap();
            // Wherever the old writer's bytes went, they are there now.
            let _ = lock(&wb.data).behind.wait_all(p);
            assert_eq!(&fs.read_at(p, 0, 100).unwrap()[..], b"new", "{how}");
            assert!(
                fs.push_buf(p, &wb).is_err(),
                "{how}: the old writer is cut off"
            );
        }
        let _ = std::fs::remove_file(&file);
    }

    /// A writer released without a close (RocksDB's info logger, say) reports nothing when
    /// its file was only deleted, renamed or created again while it was open, and still
    /// reports a failure of its own (a hand-over that failed before the cut-off).
    #[test]
    fn a_released_writer_reports_only_a_failure_of_its_own() {
        let (fs, file) = small_fs("release");
        for how in ["delete", "rename", "create again"] {
            for failed in [false, true] {
                let p = "db/LOG";
                fs.create_lazy(p, WriteLifetime::Short).unwrap();
                let wb = fs.writer(p);
                fs.buffered_append(p, &wb, b"line 1\n").unwrap();
                if failed {
                    let mut b = lock(&wb.data);
                    b.behind
                        .start(&fs.runtime.handle(), p, || async {
                            Err(PluginError::Io("device gone".into()))
                        })
                        .unwrap();
                }
                match how {
                    "delete" => fs.delete(p).unwrap(),
                    // A rename hands the writer's bytes over first: its failure fails it.
                    "rename" => assert_eq!(fs.rename(p, "db/LOG.old").is_err(), failed),
                    _ => fs.create_lazy(p, WriteLifetime::Short).unwrap(),
                }
                // Its appends after the cut-off are refused to their caller either way.
                assert!(fs.buffered_append(p, &wb, b"line 2\n").is_err());
                let released = fs.release_writer(p, &wb);
                if failed {
                    let e = released.expect_err("its own failure is reported");
                    assert!(e.to_string().contains("device gone"), "{how}: {e}");
                } else {
                    assert!(released.is_ok(), "{how}: {released:?}");
                }
                let _ = fs.delete(p);
                let _ = fs.delete("db/LOG.old");
            }
        }
        let _ = std::fs::remove_file(&file);
    }

    #[test]
    fn cleans_paths() {
        assert_eq!(clean("/tmp//db/./000001.log"), "tmp/db/000001.log");
        assert_eq!(clean("/"), "");
        assert_eq!(clean("db/"), "db");
    }
}
