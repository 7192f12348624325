//! fjall (the pure-Rust LSM most Rust services would pick) behind the benchmark's
//! [`Engine`] interface; feature `peers`.
//!
//! Mapping of the flags (fjall 3 has no bits-per-key-per-level or L1 size knobs beyond
//! these):
//! - `--write_buffer_size` → the keyspace's `max_memtable_size`;
//! - `--cache_size` → the database's block cache (`cache_size`);
//! - `--bloom_bits` → a bloom filter of that many bits per key on every level
//!   (`FilterPolicy::all(Bloom(BitsPerKey))`), none when 0;
//! - `--target_file_size_base` → leveled compaction's table target size;
//! - compression off for data and index blocks and the journal (`--compression_type=none`);
//! - `--sync=0`: fjall's default (each write is handed to the OS: page cache, like
//!   RocksDB's WAL at sync=0); `--sync=1`: `persist(SyncData)` after each write.
//!
//! `--db` is a directory; without it a temporary one. Write amplification is not counted
//! (fjall exposes no flush/compaction byte counters); user bytes are.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use fjall::config::{BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry};
use fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use super::engine::{Cursor, Engine, EngineError, EngineHost, EngineStats, Placement};
use super::flags::BenchConfig;

const NAME: &str = "fjall";

fn err(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> EngineError {
    EngineError::new(NAME, e)
}

/// An open fjall database with the one keyspace the benchmark uses.
pub struct FjallEngine {
    db: Database,
    ks: Keyspace,
    user_bytes: AtomicU64,
}

/// A fjall range iterator.
pub struct FjallCursor(fjall::Iter);

impl Cursor for FjallCursor {
    async fn next_with<R, F>(&mut self, f: F) -> Result<Option<R>, EngineError>
    where
        R: Send,
        F: FnOnce(&[u8], &[u8]) -> R + Send,
    {
        match self.0.next() {
            None => Ok(None),
            Some(g) => {
                let (k, v) = g.into_inner().map_err(err)?;
                Ok(Some(f(&k, &v)))
            }
        }
    }
}

impl FjallEngine {
    fn persist(&self, sync: bool) -> Result<(), EngineError> {
        if sync {
            self.db.persist(PersistMode::SyncData).map_err(err)?;
        }
        Ok(())
    }
}

impl Engine for FjallEngine {
    type Cursor = FjallCursor;

    async fn put(&self, key: &[u8], value: &[u8], sync: bool) -> Result<(), EngineError> {
        self.ks.insert(key, value).map_err(err)?;
        self.user_bytes
            .fetch_add((key.len() + value.len()) as u64, Ordering::Relaxed);
        self.persist(sync)
    }

    async fn delete(&self, key: &[u8], sync: bool) -> Result<(), EngineError> {
        self.ks.remove(key).map_err(err)?;
        self.user_bytes
            .fetch_add(key.len() as u64, Ordering::Relaxed);
        self.persist(sync)
    }

    async fn get(&self, key: &[u8]) -> Result<Option<usize>, EngineError> {
        Ok(self.ks.get(key).map_err(err)?.map(|v| v.len()))
    }

    async fn cursor(&self, start: Option<&[u8]>) -> Result<FjallCursor, EngineError> {
        Ok(FjallCursor(match start {
            None => self.ks.iter(),
            Some(s) => self.ks.range::<&[u8], _>(s..),
        }))
    }

    async fn stats(&self) -> EngineStats {
        EngineStats {
            user_bytes: self.user_bytes.load(Ordering::Relaxed),
            ..EngineStats::default()
        }
    }

    fn placement(&self) -> Placement {
        Placement::Threads
    }
}

/// fjall's directory: opened, closed and destroyed for the driver.
pub struct FjallHost {
    dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    cfg: Arc<BenchConfig>,
}

impl FjallHost {
    /// The host for `cfg` (`--db` or a temporary directory).
    pub fn new(cfg: &BenchConfig) -> Result<FjallHost, EngineError> {
        let (dir, tmp) = match &cfg.db {
            Some(d) => (PathBuf::from(d), None),
            None => {
                let t = tempfile::Builder::new()
                    .prefix("kv-demo-fjall-")
                    .tempdir()
                    .map_err(err)?;
                (t.path().join("db"), Some(t))
            }
        };
        Ok(FjallHost {
            dir,
            _tmp: tmp,
            cfg: Arc::new(cfg.clone()),
        })
    }
}

impl EngineHost for FjallHost {
    type Engine = FjallEngine;

    fn open(&mut self) -> Result<FjallEngine, EngineError> {
        let c = &self.cfg;
        let db = Database::builder(&self.dir)
            .cache_size(c.cache_size)
            .journal_compression(CompressionType::None)
            .open()
            .map_err(err)?;
        let filter = if c.bloom_bits == 0 {
            FilterPolicy::disabled()
        } else {
            FilterPolicy::all(FilterPolicyEntry::Bloom(
                BloomConstructionPolicy::BitsPerKey(c.bloom_bits as f32),
            ))
        };
        let (memtable, target) = (c.write_buffer_size, c.target_file_size);
        let ks = db
            .keyspace("kv", move || {
                KeyspaceCreateOptions::default()
                    .max_memtable_size(memtable)
                    .filter_policy(filter)
                    .data_block_compression_policy(CompressionPolicy::disabled())
                    .index_block_compression_policy(CompressionPolicy::disabled())
                    .compaction_strategy(Arc::new(
                        fjall::compaction::Leveled::default().with_table_target_size(target),
                    ))
            })
            .map_err(err)?;
        Ok(FjallEngine {
            db,
            ks,
            user_bytes: AtomicU64::new(0),
        })
    }

    fn close(&mut self, engine: FjallEngine) -> Result<(), EngineError> {
        engine.db.persist(PersistMode::SyncAll).map_err(err)?;
        drop(engine);
        Ok(())
    }

    fn destroy(&mut self) -> Result<(), EngineError> {
        match std::fs::read_dir(&self.dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(err(format!("{}: {e}", self.dir.display()))),
            Ok(mut entries) => {
                if entries.next().is_none() {
                    return Ok(());
                }
                // fjall keeps a `version` marker file at the root of its directory.
                if !self.dir.join("version").is_file() {
                    return Err(err(format!(
                        "{} is not empty and not a fjall database: not deleting it",
                        self.dir.display()
                    )));
                }
                std::fs::remove_dir_all(&self.dir)
                    .map_err(|e| err(format!("{}: {e}", self.dir.display())))
            }
        }
    }

    fn describe(&self) -> String {
        self.dir.display().to_string()
    }
}
