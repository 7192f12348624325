//! The `kv-demo` benchmark: RocksDB db_bench 7.8.3's benchmarks, flags and output, driving
//! kv-demo's `Db` or (feature `peers`) fjall through one small [`engine::Engine`] trait.
//!
//! - [`flags`]: the command line (db_bench's flag names) and its checks;
//! - [`keys`], [`values`], [`rng`]: keys, values and random draws bit for bit as db_bench
//!   makes them, so one `--seed` gives both tools the same workload;
//! - [`driver`]: the benchmarks (fill, overwrite, reads, scans, seeks, deletes, reads while
//!   writing) on `--threads` threads or ZIOB tasks;
//! - [`stats`]: db_bench's result line and `--histogram` summary;
//! - [`progress`]: a progress bar on a terminal;
//! - [`memory`]: the memory the binary faults in before the store opens (`--prefault_memory`);
//! - [`write_rate`]: db_bench's `--benchmark_write_rate_limit`;
//! - the engines: [`kv_engine`] (kv-demo's `Db` on a ZIOB device) and `fjall_engine`.

pub mod driver;
pub mod engine;
#[cfg(feature = "peers")]
pub mod fjall_engine;
pub mod flags;
pub mod keys;
pub mod kv_engine;
pub mod memory;
pub mod progress;
pub mod rng;
pub mod stats;
pub mod values;
pub mod write_rate;

use std::io::Write;

pub use driver::{run, BenchResult, DriverError};
pub use engine::{Cursor, Engine, EngineError, EngineHost, EngineStats, Placement};
pub use flags::{BenchConfig, BenchName, EngineName, FlagError, Flags, Prefault};

/// Why `kv-demo` stopped.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A flag is invalid.
    #[error(transparent)]
    Flags(#[from] FlagError),
    /// A benchmark failed.
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// The engine could not be set up.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Runs the benchmarks of `flags` with the chosen engine, the report on `out` and a progress
/// bar on stderr when it is a terminal.
pub fn run_flags(flags: &Flags, out: &mut dyn Write) -> Result<Vec<BenchResult>, CliError> {
    let cfg = flags.check()?;
    match cfg.engine {
        EngineName::KvDemo => {
            let mut host = kv_engine::KvDemoHost::new(&cfg)?;
            Ok(run(&cfg, &mut host, out, true)?)
        }
        #[cfg(feature = "peers")]
        EngineName::Fjall => {
            let mut host = fjall_engine::FjallHost::new(&cfg)?;
            Ok(run(&cfg, &mut host, out, true)?)
        }
        #[cfg(not(feature = "peers"))]
        EngineName::Fjall => Err(FlagError::FjallNotBuilt.into()),
    }
}
