//! kv-demo's own [`Db`] behind the benchmark's [`Engine`] interface.
//!
//! Mapping of the flags to [`Options`]:
//! - `--write_buffer_size` → `write_buffer_bytes` = the flag / shards, so that all shards'
//!   memtables together hold what db_bench's one memtable holds;
//! - `--target_file_size_base` → `target_file_bytes`; `--cache_size` → `cache_bytes`
//!   (one cache for all shards); `--bloom_bits` → `bloom_bits_per_key`;
//! - `--ziob=on|off` → `buffered`; `--ziob_buffer_size` → `buffer_bytes`;
//!   `--shards` → `shards`; `--cores` → the ZIOB runtime's cores (see
//!   [`cores_and_shards`] for the defaults); with fewer shards than cores, ZIOB runs on the
//!   shards' cores only (`crate::open::ziob_config`) unless
//!   `--tables_on_background_core=on`;
//! - `--sync` → `WriteOptions { sync }` on every write.
//!
//! The benchmark threads run as tasks on the runtime's cores ([`Placement::Ziob`]), where
//! a ZIOB application runs its own code; `--run_on=threads` runs them on OS threads as
//! db_bench does.
//!
//! `--db` is a device spec (default `emu:` in a temporary directory). Destroying the store
//! (before a fill, as db_bench's `DestroyDB`) first opens it as a kv-demo store — so a
//! foreign or corrupt device is refused, never wiped — then deletes an `emu:` file or resets
//! every zone of any other device (a `mem:` device is new on each open).

use std::path::PathBuf;

use bytes::Bytes;
use ziob::Runtime;

use super::engine::{Cursor, Engine, EngineError, EngineHost, EngineStats, Placement};
use super::flags::{BenchConfig, BenchName, RunOn};
use crate::{Db, Options, Scan, WriteOptions};

const NAME: &str = "kv-demo";

fn err(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> EngineError {
    EngineError::new(NAME, e)
}

/// An open kv-demo store.
pub struct KvDemoEngine {
    db: Db,
    placement: Placement,
}

/// A kv-demo scan.
pub struct KvDemoCursor(Scan);

impl Cursor for KvDemoCursor {
    async fn next_with<R, F>(&mut self, f: F) -> Result<Option<R>, EngineError>
    where
        R: Send,
        F: FnOnce(&[u8], &[u8]) -> R + Send,
    {
        // In place: no copy of the entry.
        if !self.0.step().await.map_err(err)? {
            return Ok(None);
        }
        Ok(self.0.current().map(|(k, v)| f(k, v)))
    }
}

impl Engine for KvDemoEngine {
    type Cursor = KvDemoCursor;

    async fn put(&self, key: &[u8], value: &[u8], sync: bool) -> Result<(), EngineError> {
        let (k, v) = (Bytes::copy_from_slice(key), Bytes::copy_from_slice(value));
        self.db.put(k, v, &WriteOptions { sync }).await.map_err(err)
    }

    async fn delete(&self, key: &[u8], sync: bool) -> Result<(), EngineError> {
        let k = Bytes::copy_from_slice(key);
        self.db.delete(k, &WriteOptions { sync }).await.map_err(err)
    }

    async fn get(&self, key: &[u8]) -> Result<Option<usize>, EngineError> {
        Ok(self.db.get(key).await.map_err(err)?.map(|v| v.len()))
    }

    async fn cursor(&self, start: Option<&[u8]>) -> Result<KvDemoCursor, EngineError> {
        Ok(KvDemoCursor(
            self.db.scan(start, None, None).await.map_err(err)?,
        ))
    }

    async fn stats(&self) -> EngineStats {
        let s = self.db.stats().await;
        EngineStats {
            user_bytes: s.user_bytes,
            flush_bytes: Some(s.flush_bytes),
            compaction_bytes: Some(s.compaction_write_bytes),
            device_bytes: Some(s.device_bytes),
        }
    }

    async fn shape(&self) -> Option<String> {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        let s = self.db.stats().await;
        let levels: Vec<String> = s
            .levels
            .iter()
            .enumerate()
            .filter(|(_, (n, _))| *n > 0)
            .map(|(l, (n, b))| format!("L{l} {n} tables {:.1} MiB", mib(*b)))
            .collect();
        let tables = if levels.is_empty() {
            "no tables".to_string()
        } else {
            levels.join(", ")
        };
        Some(format!(
            "{tables}; memtables {:.1} MiB; write stalls {}; compaction pauses {}; \
             compaction read {:.1} MiB, written {:.1} MiB",
            mib(s.memtable_bytes),
            s.write_stalls,
            s.compaction_pauses,
            mib(s.compaction_read_bytes),
            mib(s.compaction_write_bytes),
        ))
    }

    fn placement(&self) -> Placement {
        self.placement.clone()
    }
}

/// The ZIOB runtime and device of a kv-demo store, for the driver.
pub struct KvDemoHost {
    runtime: Runtime,
    spec: String,
    emu_path: Option<PathBuf>,
    _tmp: Option<tempfile::TempDir>,
    /// The options of a new store (the device is blank after `destroy`).
    options: Options,
    /// `--shards` as given: 0 = an existing store's own count.
    shards_given: usize,
    use_existing_db: bool,
    run_on: RunOn,
}

/// The runtime cores and shards for `cfg` on a machine of `cpus` CPUs. `--cores` and
/// `--shards` as given; `--shards` 0 = one per core. `--cores` 0 = one per benchmark thread
/// that runs at once (`--threads`, plus readwhilewriting's writer when it is in the list), at
/// most `cpus`, and then `--shards` 0 = one per `--threads`: the writer's core runs no shard,
/// as db_bench's writer thread owns no data.
pub fn cores_and_shards(cfg: &BenchConfig, cpus: usize) -> (usize, usize) {
    if cfg.cores > 0 {
        let shards = if cfg.shards > 0 {
            cfg.shards
        } else {
            cfg.cores
        };
        return (cfg.cores, shards);
    }
    let writer = cfg.benchmarks.contains(&BenchName::Readwhilewriting);
    let cores = (cfg.threads + usize::from(writer)).clamp(1, cpus.max(1));
    let shards = if cfg.shards > 0 {
        cfg.shards
    } else {
        cfg.threads.clamp(1, cores)
    };
    (cores, shards)
}

impl KvDemoHost {
    /// Starts the runtime (`--cores`) and settles the device (`--db` or a temporary `emu:`).
    pub fn new(cfg: &BenchConfig) -> Result<KvDemoHost, EngineError> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (cores, shards) = cores_and_shards(cfg, cpus);
        let (spec, tmp) = match &cfg.db {
            Some(s) => (s.clone(), None),
            None => {
                let t = tempfile::Builder::new()
                    .prefix("kv-demo-")
                    .tempdir()
                    .map_err(err)?;
                (
                    format!("emu:{}", t.path().join("kv-demo.zns").display()),
                    Some(t),
                )
            }
        };
        // `nvme:` needs 128-byte submission entries on every core.
        let mut builder = ziob::backends::runtime_builder_for(&spec).cores(cores);
        if let Some(us) = cfg.idle_spin_us {
            builder = builder.idle_spin(std::time::Duration::from_micros(us));
        }
        let runtime = builder.build().map_err(err)?;
        // The file alone, without the spec's options (`emu:PATH,direct=0`).
        let emu_path = match ziob::backends::DeviceSpec::parse(&spec).map_err(err)? {
            ziob::backends::DeviceSpec::Emu { path, .. } => Some(path),
            _ => None,
        };
        let options = Options {
            shards,
            write_buffer_bytes: (cfg.write_buffer_size / shards as u64).max(1) as usize,
            target_file_bytes: cfg.target_file_size,
            cache_bytes: cfg.cache_size,
            bloom_bits_per_key: cfg.bloom_bits,
            buffered: cfg.ziob_buffered,
            buffer_bytes: cfg.ziob_buffer_size,
            tables_on_background_core: cfg.tables_on_background_core,
            ..Options::default()
        };
        Ok(KvDemoHost {
            runtime,
            spec,
            emu_path,
            _tmp: tmp,
            options,
            shards_given: cfg.shards,
            use_existing_db: cfg.use_existing_db,
            run_on: cfg.run_on,
        })
    }

    /// Opens the store with `shards` (0 = an existing store's own count).
    fn open_db(&self, shards: usize) -> Result<Db, EngineError> {
        let options = Options {
            shards,
            ..self.options.clone()
        };
        futures::executor::block_on(Db::open(self.runtime.handle(), &self.spec, options))
            .map_err(err)
    }
}

impl EngineHost for KvDemoHost {
    type Engine = KvDemoEngine;

    fn open(&mut self) -> Result<KvDemoEngine, EngineError> {
        // Without --use_existing_db the device was just destroyed: a new store of the shards
        // chosen for this run. With it, an existing store keeps its own count unless
        // --shards names one (a store made by a run of other --threads still opens).
        let shards = if self.use_existing_db {
            self.shards_given
        } else {
            self.options.shards
        };
        Ok(KvDemoEngine {
            db: self.open_db(shards)?,
            placement: match self.run_on {
                RunOn::Cores => Placement::Ziob(self.runtime.handle()),
                RunOn::Threads => Placement::Threads,
            },
        })
    }

    fn close(&mut self, engine: KvDemoEngine) -> Result<(), EngineError> {
        futures::executor::block_on(engine.db.close()).map_err(err)
    }

    fn destroy(&mut self) -> Result<(), EngineError> {
        if self.spec.starts_with("mem:") {
            return Ok(());
        }
        if let Some(p) = &self.emu_path {
            if !p.exists() {
                return Ok(());
            }
        }
        // Only a device that opens as a kv-demo store (of any shard count) is destroyed.
        let db = self.open_db(0)?;
        futures::executor::block_on(db.close()).map_err(err)?;
        match &self.emu_path {
            Some(p) => std::fs::remove_file(p).map_err(|e| err(format!("{}: {e}", p.display()))),
            None => futures::executor::block_on(async {
                let c = ziob::Client::open(
                    self.runtime.handle(),
                    &self.spec,
                    ziob::ZiobConfig::default(),
                )
                .await?;
                c.zone_action(ziob::ZoneAction::Reset, ziob::ZoneTarget::All)
                    .await?;
                c.close().await
            })
            .map_err(err),
        }
    }

    fn describe(&self) -> String {
        self.spec.clone()
    }
}
