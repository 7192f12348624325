//! One mounted zone file system per device per process ([`SharedFs::get`]), with what RocksDB
//! needs on top of zonefs: directories that exist while empty, files created lazily (so the
//! write-lifetime hint RocksDB sets after creating a file still picks the zones), in-process
//! file locks and modification times.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use ziob::{Client, Runtime, ZiobConfig};
use ziob_zonefs::{BlockingZoneFs, FsError, MkfsOptions, WriteLifetime, ZoneFs};

use crate::error::PluginError;
use crate::uri::FsUri;

/// A mounted file system shared by every RocksDB `FileSystem` object of its device.
pub struct SharedFs {
    /// The options it was opened with.
    pub uri: FsUri,
    /// The ZIOB runtime (kept alive for the process).
    _runtime: Runtime,
    /// The file system, as blocking calls (RocksDB's threads are plain threads).
    pub fs: BlockingZoneFs,
    /// Created, not yet written files: path → lifetime class. Visible as empty files.
    pending: Mutex<HashMap<String, WriteLifetime>>,
    /// Directories made with `CreateDir` (a directory also exists while a file lies under it).
    dirs: Mutex<BTreeSet<String>>,
    /// Paths locked with `LockFile`.
    locks: Mutex<HashSet<String>>,
    /// Last change of a file made in this process (seconds since the epoch).
    mtimes: Mutex<HashMap<String, u64>>,
    /// When the file system was mounted (the modification time of files not changed since).
    mounted_at: u64,
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

impl SharedFs {
    /// The file system of `uri`'s device, opened (created, formatted, mounted) on first use
    /// and shared after. The same device asked for with other options is an error.
    pub fn get(uri: &str) -> Result<&'static SharedFs, PluginError> {
        let parsed = FsUri::parse(uri)?;
        let mut reg = lock(registry());
        if let Some(fs) = reg.get(&parsed.spec) {
            if fs.uri != parsed {
                return Err(PluginError::InvalidArgument(format!(
                    "{} is already open in this process as {} (one set of options per device)",
                    parsed.spec, fs.uri
                )));
            }
            return Ok(fs);
        }
        let fs: &'static SharedFs = Box::leak(Box::new(SharedFs::open(parsed.clone())?));
        reg.insert(parsed.spec, fs);
        Ok(fs)
    }

    /// Opens the device: an absent `emu:` file is created; a blank device is formatted; a
    /// zone file system is mounted; anything else is refused (never reformatted).
    fn open(uri: FsUri) -> Result<SharedFs, PluginError> {
        let runtime = ziob::backends::runtime_builder_for(&uri.spec)
            .cores(uri.cores)
            .build()
            .map_err(|e| PluginError::Io(format!("starting the ZIOB runtime: {e}")))?;
        let config = if uri.buffered {
            ZiobConfig::default()
        } else {
            ZiobConfig::pass_through()
        };
        if let Some(path) = uri.emu_path() {
            if !std::path::Path::new(path).exists() {
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
                    .map_err(|e| PluginError::Io(format!("creating {path}: {e}")))?;
            }
        }
        let client = futures::executor::block_on(Client::open(runtime.handle(), &uri.spec, config))
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
        tracing::info!(uri = %uri, report = ?fs.mount_report(), "ziob-rocksdb: mounted");
        Ok(SharedFs {
            uri,
            _runtime: runtime,
            fs: fs.blocking(),
            pending: Mutex::default(),
            dirs: Mutex::default(),
            locks: Mutex::default(),
            mtimes: Mutex::default(),
            mounted_at: now_secs(),
        })
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
        if self.fs.exists(path)? {
            self.fs.delete(path)?;
        }
        lock(&self.pending).insert(path.to_string(), lifetime);
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

    /// Creates a pending file on the device (a no-op for a file already there).
    pub fn materialize(&self, path: &str) -> Result<(), PluginError> {
        let mut pending = lock(&self.pending);
        if let Some(lifetime) = pending.get(path).copied() {
            match self.fs.create(path, lifetime) {
                Ok(()) | Err(FsError::AlreadyExists(_)) => {}
                Err(e) => return Err(e.into()),
            }
            pending.remove(path);
        }
        Ok(())
    }

    /// Creates every pending file under `dir` (a directory fsync).
    pub fn materialize_under(&self, dir: &str) -> Result<(), PluginError> {
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
        Ok(())
    }

    /// Appends to a file (created on the device first if pending).
    pub fn append(&self, path: &str, data: &[u8]) -> Result<(), PluginError> {
        self.materialize(path)?;
        self.fs.append(path, data)?;
        Ok(())
    }

    /// Makes a file durable up to its size (created on the device first if pending).
    pub fn sync(&self, path: &str) -> Result<(), PluginError> {
        self.materialize(path)?;
        self.fs.sync(path)?;
        self.touch(path);
        Ok(())
    }

    /// Whether a file (not a directory) is at `path`.
    pub fn file_exists(&self, path: &str) -> Result<bool, PluginError> {
        Ok(lock(&self.pending).contains_key(path) || self.fs.exists(path)?)
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

    /// Size of a file (0 for a pending one).
    pub fn size(&self, path: &str) -> Result<u64, PluginError> {
        if lock(&self.pending).contains_key(path) {
            return Ok(0);
        }
        Ok(self.fs.size(path)?)
    }

    /// Deletes a file.
    pub fn delete(&self, path: &str) -> Result<(), PluginError> {
        lock(&self.mtimes).remove(path);
        if lock(&self.pending).remove(path).is_some() {
            return Ok(());
        }
        self.fs.delete(path)?;
        Ok(())
    }

    /// Renames a file, replacing the target.
    pub fn rename(&self, from: &str, to: &str) -> Result<(), PluginError> {
        self.materialize(from)?;
        lock(&self.pending).remove(to);
        self.fs.rename(from, to)?;
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

#[cfg(test)]
mod tests {
    use super::clean;

    #[test]
    fn cleans_paths() {
        assert_eq!(clean("/tmp//db/./000001.log"), "tmp/db/000001.log");
        assert_eq!(clean("/"), "");
        assert_eq!(clean("db/"), "db");
    }
}
