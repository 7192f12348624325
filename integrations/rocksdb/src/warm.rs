//! Warming the read cache at mount: a background thread reads the newest tables into the
//! [`ReadCache`](crate::read_cache::ReadCache), as a database's buffer pool is loaded at
//! startup (InnoDB's `innodb_buffer_pool_load_at_startup`).
//!
//! A store on a local file system starts with its recent files in the OS page cache, which
//! outlives the process; the plugin's read cache does not. Without a warm-up every process
//! reads each page once from the zones before it is served from memory. So after a mount
//! with the cache on, one thread (`ziob-rocksdb-warm`) walks the file tree, takes the table
//! files (`*.sst`) newest first (RocksDB numbers its files in creation order) and reads their
//! whole pages into the cache in reads of [`READ_BYTES`], until `warm=` bytes are read (by
//! default half the cache, so that what the workload reads itself has room too) or the tables
//! end. Every `*.sst` under the root counts, ranked by file number across directories (which
//! orders one database's tables; with several databases on one device the ranking mixes
//! them); blob files (`*.blob`) are not warmed. It reads like a cache miss does
//! (`SharedFs::read_at`): a file deleted or renamed
//! meanwhile is skipped, and pages of a file changed since are never served. The thread runs
//! beside the mount's prefault (it starts first: its reads wait on the device, the prefault
//! on the CPU) and beside RocksDB, which can read and write at once; its reads share the ZIOB
//! core with RocksDB's. With `prefault=auto` the prefault leaves out, before each of its
//! pieces, what the warm-up has read so far. It logs what it read and how long it took
//! (`RUST_LOG=ziob_rocksdb=info`).

use std::time::Instant;

use crate::error::PluginError;
use crate::read_cache::PAGE_BYTES;

/// What the warm-up needs of a mounted file system (`SharedFs` implements it).
pub trait WarmSource {
    /// Whether reads go through a read cache at all.
    fn caches_reads(&self) -> bool;
    /// The names directly under `dir` (`""` = the root).
    fn children(&self, dir: &str) -> Result<Vec<String>, PluginError>;
    /// Whether `path` is a file (not a directory).
    fn file_exists(&self, path: &str) -> Result<bool, PluginError>;
    /// Bytes of `path` the file layer holds (without what a writer still gathers).
    fn stored_size(&self, path: &str) -> Result<u64, PluginError>;
    /// Reads the whole pages of `path` in `[offset, offset + len)` into the read cache
    /// (`offset` a page boundary).
    fn warm_pages(&self, path: &str, offset: u64, len: usize) -> Result<(), PluginError>;
    /// Told once the warm-up of [`start`] is over, with what it did and when [`start`] was
    /// called.
    fn warmed(&self, warmed: Warmed, started: Instant);
}

/// Bytes per read of the warm-up (whole cache pages).
pub const READ_BYTES: u64 = 8 * PAGE_BYTES;
/// Most directory levels the walk descends (RocksDB keeps its files in one directory).
const DEPTH_MAX: usize = 8;

/// The table files under the root, newest first: `*.sst` ordered by RocksDB's file number
/// (the digits of the name), the rest of the tree ignored.
pub fn tables_newest_first(fs: &impl WarmSource) -> Vec<String> {
    let mut tables: Vec<(u64, String)> = Vec::new();
    let mut dirs = vec![(String::new(), 0usize)];
    while let Some((dir, depth)) = dirs.pop() {
        let Ok(names) = fs.children(&dir) else {
            continue;
        };
        for name in names {
            let path = if dir.is_empty() {
                name.clone()
            } else {
                format!("{dir}/{name}")
            };
            if let Some(number) = table_number(&name) {
                tables.push((number, path));
            } else if depth < DEPTH_MAX && !fs.file_exists(&path).unwrap_or(true) {
                dirs.push((path, depth + 1));
            }
        }
    }
    tables.sort_by(|a, b| b.cmp(a));
    tables.into_iter().map(|(_, p)| p).collect()
}

/// RocksDB's number of a table file name (`000123.sst` → 123); `None` for other names.
fn table_number(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".sst")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// What a warm-up did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Warmed {
    /// Table files read (wholly or in part).
    pub files: usize,
    /// Bytes of whole pages the warm-up covered: read into the cache, or found there.
    pub bytes: u64,
}

/// Reads the newest tables' pages into `fs`'s read cache, at most `budget` bytes (see the
/// module docs). Runs on the calling thread; [`start`] runs it on a thread of its own.
pub fn warm(fs: &impl WarmSource, budget: u64) -> Warmed {
    let mut done = Warmed::default();
    if budget < PAGE_BYTES || !fs.caches_reads() {
        return done;
    }
    for path in tables_newest_first(fs) {
        let size = match fs.stored_size(&path) {
            Ok(size) => size,
            Err(e) => {
                tracing::debug!(path, "warm-up skips a table: {e}");
                continue;
            }
        };
        let whole = size / PAGE_BYTES * PAGE_BYTES;
        let mut offset = 0;
        while offset < whole && budget - done.bytes >= PAGE_BYTES {
            // Whole pages, at least one: both bounds are at least a page here.
            let left = READ_BYTES.min(whole - offset).min(budget - done.bytes);
            let len = left / PAGE_BYTES * PAGE_BYTES;
            match fs.warm_pages(&path, offset, len as usize) {
                Ok(()) => done.bytes += len,
                // Deleted or renamed meanwhile, or a read error: the workload's own reads
                // see it; the warm-up only skips the file.
                Err(e) => {
                    tracing::debug!(path, offset, "warm-up skips the rest of a table: {e}");
                    break;
                }
            }
            offset += len;
        }
        if offset > 0 {
            done.files += 1;
        }
        if budget - done.bytes < PAGE_BYTES {
            break;
        }
    }
    done
}

/// Starts the warm-up of `fs` on a thread of its own (nothing when `budget` is 0 or the
/// cache is off).
pub fn start(fs: &'static (impl WarmSource + Sync), budget: u64) {
    if budget < PAGE_BYTES || !fs.caches_reads() {
        return;
    }
    let started = Instant::now();
    let spawned = std::thread::Builder::new()
        .name("ziob-rocksdb-warm".into())
        .spawn(move || {
            let w = warm(fs, budget);
            fs.warmed(w, started);
        });
    if let Err(e) = spawned {
        tracing::warn!("ziob-rocksdb: no thread to warm the read cache: {e}");
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use super::*;

    /// A file tree of sizes; records the warm reads and fails those of `gone`.
    struct Tree {
        files: BTreeMap<String, u64>,
        gone: Option<String>,
        reads: Mutex<Vec<(String, u64, usize)>>,
    }

    impl Tree {
        fn new(files: &[(&str, u64)]) -> Tree {
            Tree {
                files: files.iter().map(|(p, s)| (p.to_string(), *s)).collect(),
                gone: None,
                reads: Mutex::default(),
            }
        }
        fn reads(&self) -> Vec<(String, u64, usize)> {
            self.reads.lock().unwrap().clone()
        }
    }

    impl WarmSource for Tree {
        fn caches_reads(&self) -> bool {
            true
        }
        fn children(&self, dir: &str) -> Result<Vec<String>, PluginError> {
            let prefix = if dir.is_empty() {
                String::new()
            } else {
                format!("{dir}/")
            };
            let mut out: Vec<String> = self
                .files
                .keys()
                .filter_map(|p| p.strip_prefix(&prefix))
                .filter_map(|r| r.split('/').next())
                .map(str::to_string)
                .collect();
            out.dedup();
            Ok(out)
        }
        fn file_exists(&self, path: &str) -> Result<bool, PluginError> {
            Ok(self.files.contains_key(path))
        }
        fn stored_size(&self, path: &str) -> Result<u64, PluginError> {
            self.files
                .get(path)
                .copied()
                .ok_or_else(|| PluginError::NotFound(path.to_string()))
        }
        fn warmed(&self, _: Warmed, _: Instant) {}
        fn warm_pages(&self, path: &str, offset: u64, len: usize) -> Result<(), PluginError> {
            assert!(offset.is_multiple_of(PAGE_BYTES) && (len as u64).is_multiple_of(PAGE_BYTES));
            assert!(
                offset + len as u64 <= self.files[path],
                "read past the file"
            );
            if self.gone.as_deref() == Some(path) {
                return Err(PluginError::NotFound(path.to_string()));
            }
            self.reads
                .lock()
                .unwrap()
                .push((path.to_string(), offset, len));
            Ok(())
        }
    }

    const P: u64 = PAGE_BYTES;

    #[test]
    fn newest_tables_first_in_whole_pages_within_the_budget() {
        let t = Tree::new(&[
            ("db/000009.sst", 3 * P + 100),
            ("db/000012.sst", READ_BYTES + 2 * P),
            ("db/000010.log", 10 * P),
            ("db/MANIFEST-000005", 10 * P),
            ("db/sub/000011.sst", P - 1),
            ("other/000003.sst", 2 * P),
        ]);
        assert_eq!(
            tables_newest_first(&t),
            [
                "db/000012.sst",
                "db/sub/000011.sst",
                "db/000009.sst",
                "other/000003.sst"
            ]
        );
        let w = warm(&t, u64::MAX);
        assert_eq!(
            t.reads(),
            vec![
                ("db/000012.sst".to_string(), 0, READ_BYTES as usize),
                ("db/000012.sst".to_string(), READ_BYTES, 2 * P as usize),
                ("db/000009.sst".to_string(), 0, 3 * P as usize),
                ("other/000003.sst".to_string(), 0, 2 * P as usize),
            ],
            "whole pages only; a table shorter than a page is not read"
        );
        assert_eq!(
            w,
            Warmed {
                files: 3,
                bytes: READ_BYTES + 7 * P
            }
        );

        let t = Tree::new(&[("db/000001.sst", 100 * P), ("db/000002.sst", 100 * P)]);
        let w = warm(&t, 3 * P + 1);
        assert_eq!(
            t.reads(),
            vec![("db/000002.sst".to_string(), 0, 3 * P as usize)]
        );
        assert_eq!(w.bytes, 3 * P);
        assert_eq!(
            warm(&t, 150 * P).bytes,
            150 * P,
            "the budget ends in the second table"
        );
        assert_eq!(
            warm(&t, P - 1),
            Warmed::default(),
            "a budget under a page reads nothing"
        );
    }

    #[test]
    fn a_table_that_fails_is_skipped() {
        let mut t = Tree::new(&[("000001.sst", 2 * P), ("000002.sst", 2 * P)]);
        t.gone = Some("000002.sst".into());
        let w = warm(&t, u64::MAX);
        assert_eq!(
            t.reads(),
            vec![("000001.sst".to_string(), 0, 2 * P as usize)]
        );
        assert_eq!(
            w,
            Warmed {
                files: 1,
                bytes: 2 * P
            }
        );
    }

    #[test]
    fn table_numbers_come_from_rocksdb_names_only() {
        assert_eq!(table_number("000123.sst"), Some(123));
        assert_eq!(table_number("123.sst"), Some(123));
        assert_eq!(table_number("MANIFEST-000005"), None);
        assert_eq!(table_number("000007.log"), None);
        assert_eq!(table_number("x.sst"), None);
        assert_eq!(table_number(".sst"), None);
        assert_eq!(table_number("+5.sst"), None);
    }
}
