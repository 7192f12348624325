//! The `kv-demo` command line: db_bench's flag names, forms (`--num=1000`, `--histogram`,
//! `--sync=1`) and defaults (except `--num`, `--write_buffer_size` and `--db`, see
//! [`Flags`]), checked into a [`BenchConfig`] with typed errors.

use clap::{Parser, ValueEnum};
pub use ziob::runtime::prefault::Prefault;

/// One db_bench benchmark kv-demo runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "lower")]
pub enum BenchName {
    /// Keys `0..num` in order into a fresh store.
    Fillseq,
    /// `num` uniformly random keys of `[0, num)` into a fresh store.
    Fillrandom,
    /// `num` uniformly random keys over the existing store.
    Overwrite,
    /// `reads` point reads of uniformly random keys; prints `(N of M found)`.
    Readrandom,
    /// One forward scan from the first key, `reads` entries at most.
    Readseq,
    /// readrandom on `--threads` threads while one more thread writes random keys.
    Readwhilewriting,
    /// `reads` seeks to uniformly random keys (found = the first key at or after is it).
    Seekrandom,
    /// `deletes` deletes of uniformly random keys.
    Deleterandom,
}

impl BenchName {
    /// Every benchmark, in the default order.
    pub const ALL: [BenchName; 8] = [
        BenchName::Fillseq,
        BenchName::Fillrandom,
        BenchName::Overwrite,
        BenchName::Readrandom,
        BenchName::Readseq,
        BenchName::Readwhilewriting,
        BenchName::Seekrandom,
        BenchName::Deleterandom,
    ];

    /// db_bench's name.
    pub fn name(self) -> &'static str {
        match self {
            BenchName::Fillseq => "fillseq",
            BenchName::Fillrandom => "fillrandom",
            BenchName::Overwrite => "overwrite",
            BenchName::Readrandom => "readrandom",
            BenchName::Readseq => "readseq",
            BenchName::Readwhilewriting => "readwhilewriting",
            BenchName::Seekrandom => "seekrandom",
            BenchName::Deleterandom => "deleterandom",
        }
    }

    /// Whether db_bench starts it from a fresh (destroyed) store.
    pub fn fresh(self) -> bool {
        matches!(self, BenchName::Fillseq | BenchName::Fillrandom)
    }
}

/// The store the benchmark drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineName {
    /// kv-demo's own `Db` on a ZIOB device (`--db=<device spec>`).
    #[value(name = "kv-demo")]
    KvDemo,
    /// fjall, the pure-Rust LSM, in a directory (`--db=<dir>`; needs the `peers` feature).
    Fjall,
}

/// `on` / `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// A gflags boolean: `--flag` alone is true; `--flag=1|0|true|false|yes|no`.
pub fn gflags_bool(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "t" | "yes" | "y" => Ok(true),
        "0" | "false" | "f" | "no" | "n" => Ok(false),
        _ => Err(format!("`{text}` is not a boolean (use 0/1 or true/false)")),
    }
}

/// A byte count: a whole number, optionally with K/M/G/T (powers of 1024).
pub fn byte_size(text: &str) -> Result<u64, String> {
    ziob::backends::parse_size_bytes(text)
}

/// kv-demo's benchmark: RocksDB db_bench's flags and output, driving kv-demo's `Db` (or
/// fjall with `--engine=fjall`). With no arguments it runs every benchmark with 100000 keys
/// on a fresh `emu:` device in a temporary directory. A `--db=emu:PATH` that does not exist
/// is created (64 zones × 64 MiB); a fill benchmark deletes and recreates the device unless
/// `--use_existing_db`, as db_bench destroys its database.
#[derive(Debug, Clone, Parser)]
#[command(name = "kv-demo", version)]
pub struct Flags {
    /// Comma list of benchmarks, run in the given order
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "fillseq,fillrandom,overwrite,readrandom,readseq,readwhilewriting,seekrandom,deleterandom"
    )]
    pub benchmarks: Vec<BenchName>,
    /// Number of keys (db_bench's default is 1000000; kv-demo's is smaller so that a run
    /// without arguments is short)
    #[arg(long, default_value_t = 100_000)]
    pub num: u64,
    /// Read operations per thread; negative = `--num`
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub reads: i64,
    /// Delete operations per thread (deleterandom); negative = `--num`
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub deletes: i64,
    /// Key size in bytes (the key number big-endian, then '0' padding)
    #[arg(long = "key_size", default_value_t = 16)]
    pub key_size: usize,
    /// Value size in bytes
    #[arg(long = "value_size", default_value_t = 100)]
    pub value_size: usize,
    /// Values shrink to this fraction when compressed (db_bench's generator)
    #[arg(long = "compression_ratio", default_value_t = 0.5)]
    pub compression_ratio: f64,
    /// Compression of stored blocks: only `none` (kv-demo does not compress)
    #[arg(long = "compression_type", default_value = "none")]
    pub compression_type: String,
    /// Concurrent threads (tasks) per benchmark, each doing the full operation count
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Seed base of the key generators; 0 = from the clock (printed)
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print latency percentiles per operation kind
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false",
          default_missing_value = "true", value_parser = gflags_bool)]
    pub histogram: bool,
    /// Print the store's write statistics at the end (user, flush, compaction and device
    /// bytes written)
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false",
          default_missing_value = "true", value_parser = gflags_bool)]
    pub statistics: bool,
    /// Keep the store: fills are skipped, as db_bench does
    #[arg(long = "use_existing_db", num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", value_parser = gflags_bool)]
    pub use_existing_db: bool,
    /// Every write is durable when it returns (WAL synced)
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false",
          default_missing_value = "true", value_parser = gflags_bool)]
    pub sync: bool,
    /// Memtable bytes (K/M/G allowed), split evenly over kv-demo's shards so that the
    /// total equals db_bench's one memtable; kv-demo's default 16 MiB (db_bench: 64 MiB)
    #[arg(long = "write_buffer_size", default_value = "16M", value_parser = byte_size)]
    pub write_buffer_size: u64,
    /// Target SSTable bytes (kv-demo's default 16 MiB)
    #[arg(long = "target_file_size_base", default_value = "16M", value_parser = byte_size)]
    pub target_file_size_base: u64,
    /// Block cache bytes, shared by all shards (db_bench's default 8 MiB)
    #[arg(long = "cache_size", default_value = "8M", value_parser = byte_size)]
    pub cache_size: u64,
    /// Bytes (keys + values) per second that all threads of a write benchmark write
    /// together, readwhilewriting's writer included; 0 = no limit (db_bench's default).
    /// Deletes are not limited
    #[arg(long = "benchmark_write_rate_limit", default_value_t = 0)]
    pub benchmark_write_rate_limit: u64,
    /// Bloom filter bits per key; negative or 0 = no filter (db_bench's default -1)
    #[arg(long = "bloom_bits", default_value_t = -1, allow_negative_numbers = true)]
    pub bloom_bits: i32,
    /// Device spec (`emu:PATH`, `mem:`, `nvme:…`, `zbd:…`) for kv-demo, a directory for
    /// fjall; default a fresh one in a temporary directory, removed at the end
    #[arg(long)]
    pub db: Option<String>,
    /// kv-demo: ZIOB's zone write buffer on or off
    #[arg(long, value_enum, default_value = "on")]
    pub ziob: OnOff,
    /// kv-demo: `on` = with more cores than shards, tables take zones of the background
    /// core (where flushes and compactions run) and ZIOB runs on every core; `off` = ZIOB on
    /// the shards' cores only, tables on the lowest free zones (docs/KV-BENCH.md section 17)
    #[arg(long = "tables_on_background_core", value_enum, default_value = "off")]
    pub tables_on_background_core: OnOff,
    /// kv-demo: ZIOB buffer budget per core (K/M/G); 0 = ZIOB's default
    #[arg(long = "ziob_buffer_size", default_value = "0", value_parser = byte_size)]
    pub ziob_buffer_size: u64,
    /// kv-demo: how long (µs) an idle runtime core polls before it sleeps in the kernel;
    /// default the runtime's (0 = sleep at once), at most 10000
    #[arg(long = "idle_spin_us")]
    pub idle_spin_us: Option<u64>,
    /// kv-demo: runtime cores (one shard each unless --shards); 0 = one per benchmark thread
    /// that runs at once (--threads, plus readwhilewriting's writer if it is in the list), at
    /// most the CPUs this process may use, with one shard per --threads: a thread-per-core
    /// store sized to its load
    #[arg(long, default_value_t = 0)]
    pub cores: usize,
    /// kv-demo: shards of a new store; 0 = one per runtime core when --cores is given, else
    /// one per --threads (with --use_existing_db, 0 = the store's own count)
    #[arg(long, default_value_t = 0)]
    pub shards: usize,
    /// kv-demo: where the benchmark threads run: `cores` = tasks on the ZIOB runtime's
    /// cores (thread i on core i % cores), `threads` = OS threads as db_bench's
    #[arg(long = "run_on", value_enum, default_value = "cores")]
    pub run_on: RunOn,
    /// The store to drive
    #[arg(long, value_enum, default_value = "kv-demo")]
    pub engine: EngineName,
    /// Memory the `kv-demo` binary faults in before the store opens (K/M/G; at most half of
    /// the memory available), so that the kernel's first touch of each page falls outside
    /// the timed benchmarks: `auto` = the configured buffers (memtables, block cache, on
    /// each zone core ZIOB's buffer and the runtime's free I/O buffers, working buffers),
    /// 0 = none. Only when the binary's allocator keeps freed memory (mimalloc with a
    /// negative purge delay: the binary's own, unless `MIMALLOC_PURGE_DELAY` sets another)
    #[arg(long = "prefault_memory", default_value = "auto", value_parser = prefault_size)]
    pub prefault_memory: Prefault,
}

/// Parses `--prefault_memory`: `auto` or a size.
fn prefault_size(text: &str) -> Result<Prefault, String> {
    if text == "auto" {
        return Ok(Prefault::Auto);
    }
    byte_size(text).map(Prefault::Bytes)
}

/// Where kv-demo's benchmark threads run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RunOn {
    /// Tasks on the ZIOB runtime's cores.
    Cores,
    /// OS threads blocking on the store's futures.
    Threads,
}

/// A command line that parses but cannot run.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FlagError {
    /// A value out of its range.
    #[error("--{flag}={value}: {why}")]
    Invalid {
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        why: &'static str,
    },
    /// `--engine=fjall` in a build without the `peers` feature.
    #[error("--engine=fjall needs a kv-demo built with the `peers` feature (cargo build -p kv-demo --features peers)")]
    FjallNotBuilt,
}

/// The checked benchmark settings.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchConfig {
    /// Benchmarks in order.
    pub benchmarks: Vec<BenchName>,
    /// Keys.
    pub num: u64,
    /// Reads per thread.
    pub reads: u64,
    /// Deletes per thread.
    pub deletes: u64,
    /// Key bytes.
    pub key_size: usize,
    /// Value bytes.
    pub value_size: usize,
    /// db_bench's `--compression_ratio` for the value generator.
    pub compression_ratio: f64,
    /// Threads per benchmark.
    pub threads: usize,
    /// Seed base (never 0 here: a 0 flag is replaced by the clock).
    pub seed: u64,
    /// The seed came from the clock (`--seed=0`).
    pub seed_from_clock: bool,
    /// Latency histograms.
    pub histogram: bool,
    /// Write statistics at the end.
    pub statistics: bool,
    /// Keep the store; skip fills.
    pub use_existing_db: bool,
    /// Synced writes.
    pub sync: bool,
    /// Total memtable bytes.
    pub write_buffer_size: u64,
    /// Target table bytes.
    pub target_file_size: u64,
    /// Block cache bytes.
    pub cache_size: u64,
    /// Bloom bits per key (0 = none).
    pub bloom_bits: u32,
    /// Write bytes per second of all threads together (0 = no limit).
    pub write_rate_limit: u64,
    /// Where the store lives (None = a temporary place).
    pub db: Option<String>,
    /// ZIOB buffer on.
    pub ziob_buffered: bool,
    /// ZIOB buffer budget per core (0 = default).
    pub ziob_buffer_size: u64,
    /// Tables on the background core (see `Options::tables_on_background_core`).
    pub tables_on_background_core: bool,
    /// Idle spin of the runtime's cores in µs (None = the runtime's default).
    pub idle_spin_us: Option<u64>,
    /// Runtime cores (0 = see `kv_engine::cores_and_shards`).
    pub cores: usize,
    /// Shards (0 = see `kv_engine::cores_and_shards`).
    pub shards: usize,
    /// Where kv-demo's benchmark threads run.
    pub run_on: RunOn,
    /// Engine.
    pub engine: EngineName,
}

impl Flags {
    /// Checks the flags (typed errors name the flag).
    pub fn check(&self) -> Result<BenchConfig, FlagError> {
        let invalid = |flag: &'static str, value: String, why: &'static str| FlagError::Invalid {
            flag,
            value,
            why,
        };
        if self.num == 0 {
            return Err(invalid("num", "0".into(), "must be at least 1"));
        }
        if self.key_size == 0 {
            return Err(invalid("key_size", "0".into(), "must be at least 1"));
        }
        if self.threads == 0 {
            return Err(invalid("threads", "0".into(), "must be at least 1"));
        }
        if let Some(us) = self.idle_spin_us {
            if u128::from(us) > ziob::runtime::IDLE_SPIN_MAX.as_micros() {
                return Err(invalid(
                    "idle_spin_us",
                    us.to_string(),
                    "must be at most 10000",
                ));
            }
        }
        if !(self.compression_ratio > 0.0 && self.compression_ratio <= 1.0) {
            return Err(invalid(
                "compression_ratio",
                self.compression_ratio.to_string(),
                "must be in (0, 1]",
            ));
        }
        if !self.compression_type.eq_ignore_ascii_case("none") {
            return Err(invalid(
                "compression_type",
                self.compression_type.clone(),
                "kv-demo stores blocks uncompressed: only `none`",
            ));
        }
        if self.write_buffer_size == 0 {
            return Err(invalid(
                "write_buffer_size",
                "0".into(),
                "must be more than 0",
            ));
        }
        if self.benchmarks.is_empty() {
            return Err(invalid("benchmarks", String::new(), "name at least one"));
        }
        if self.engine == EngineName::Fjall && !cfg!(feature = "peers") {
            return Err(FlagError::FjallNotBuilt);
        }
        let (seed, seed_from_clock) = if self.seed == 0 {
            let micros = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_micros() as u64)
                .unwrap_or(1);
            (micros.max(1), true)
        } else {
            (self.seed, false)
        };
        let count = |v: i64| if v < 0 { self.num } else { v as u64 };
        Ok(BenchConfig {
            benchmarks: self.benchmarks.clone(),
            num: self.num,
            reads: count(self.reads),
            deletes: count(self.deletes),
            key_size: self.key_size,
            value_size: self.value_size,
            compression_ratio: self.compression_ratio,
            threads: self.threads,
            seed,
            seed_from_clock,
            histogram: self.histogram,
            statistics: self.statistics,
            use_existing_db: self.use_existing_db,
            sync: self.sync,
            write_buffer_size: self.write_buffer_size,
            target_file_size: self.target_file_size_base,
            cache_size: self.cache_size,
            bloom_bits: self.bloom_bits.max(0) as u32,
            write_rate_limit: self.benchmark_write_rate_limit,
            db: self.db.clone(),
            ziob_buffered: self.ziob == OnOff::On,
            ziob_buffer_size: self.ziob_buffer_size,
            tables_on_background_core: self.tables_on_background_core == OnOff::On,
            idle_spin_us: self.idle_spin_us,
            cores: self.cores,
            shards: self.shards,
            run_on: self.run_on,
            engine: self.engine,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Flags, clap::Error> {
        Flags::try_parse_from(std::iter::once("kv-demo").chain(args.iter().copied()))
    }

    #[test]
    fn prefault_memory_takes_auto_a_size_or_zero() {
        assert_eq!(parse(&[]).unwrap().prefault_memory, Prefault::Auto);
        let f = parse(&["--prefault_memory=0"]).unwrap();
        assert_eq!(f.prefault_memory, Prefault::Bytes(0));
        let f = parse(&["--prefault_memory=3M"]).unwrap();
        assert_eq!(f.prefault_memory, Prefault::Bytes(3 << 20));
        assert!(parse(&["--prefault_memory=lots"]).is_err());
    }

    #[test]
    fn db_bench_forms_parse() {
        let f = parse(&[
            "--benchmarks=fillrandom,readrandom",
            "--num=5000",
            "--key_size=20",
            "--value_size=1024",
            "--histogram",
            "--sync=1",
            "--use_existing_db=0",
            "--bloom_bits=10",
            "--write_buffer_size=4194304",
            "--cache_size=32M",
            "--compression_type=none",
            "--ziob=off",
            "--seed=7",
        ])
        .unwrap();
        let c = f.check().unwrap();
        assert_eq!(
            c.benchmarks,
            vec![BenchName::Fillrandom, BenchName::Readrandom]
        );
        assert_eq!(
            (c.num, c.reads, c.key_size, c.value_size),
            (5000, 5000, 20, 1024)
        );
        assert!(c.histogram && c.sync && !c.use_existing_db && !c.ziob_buffered);
        assert_eq!(
            (c.bloom_bits, c.write_buffer_size, c.cache_size),
            (10, 4 << 20, 32 << 20)
        );
        assert_eq!((c.seed, c.seed_from_clock), (7, false));
        let d = parse(&[]).unwrap().check().unwrap();
        assert_eq!(d.benchmarks, BenchName::ALL.to_vec());
        assert_eq!(
            (d.bloom_bits, d.threads, d.engine),
            (0, 1, EngineName::KvDemo)
        );
        assert!(d.seed_from_clock && d.seed > 0);
    }

    #[test]
    fn bad_input_is_refused_with_the_flag_named() {
        assert!(parse(&["--benchmarks=fillrandom,bogus"]).is_err());
        assert!(parse(&["--ziob=maybe"]).is_err());
        assert!(parse(&["--sync=perhaps"]).is_err());
        assert!(parse(&["--num=-3"]).is_err());
        assert!(parse(&["--engine=rocksdb"]).is_err());
        for (args, flag) in [
            (&["--num=0"][..], "num"),
            (&["--threads=0"][..], "threads"),
            (&["--key_size=0"][..], "key_size"),
            (&["--compression_type=snappy"][..], "compression_type"),
            (&["--compression_ratio=0"][..], "compression_ratio"),
            (&["--idle_spin_us=10001"][..], "idle_spin_us"),
        ] {
            let e = parse(args).unwrap().check().unwrap_err();
            assert!(e.to_string().starts_with(&format!("--{flag}=")), "{e}");
        }
        assert!(parse(&["--idle_spin_us=10000"]).unwrap().check().is_ok());
        let fj = parse(&["--engine=fjall"]).unwrap().check();
        if cfg!(feature = "peers") {
            assert!(fj.is_ok());
        } else {
            assert_eq!(fj.unwrap_err(), FlagError::FjallNotBuilt);
        }
    }
}
