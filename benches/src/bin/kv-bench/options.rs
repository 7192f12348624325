//! Command-line options of `kv-bench`.

use std::path::PathBuf;

use clap::Parser;
use ziob_benches::args::{positive, positive_size};

/// How each store runs (one column of the tables).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// db_bench on a directory of the local file system, buffered I/O (RocksDB's default).
    #[value(name = "rocksdb")]
    Rocksdb,
    /// db_bench with `--use_direct_reads --use_direct_io_for_flush_and_compaction`
    /// (no page cache: the equal-memory comparison).
    #[value(name = "rocksdb-direct")]
    RocksdbDirect,
    /// kv-demo on an `emu:` device in the same file system, ZIOB buffer on.
    #[value(name = "kv-demo")]
    KvDemo,
    /// kv-demo on an `emu:` device read and written through the page cache (`direct=0`),
    /// ZIOB buffer on: the same memory as db_bench and fjall with buffered I/O.
    #[value(name = "kv-demo-pagecache")]
    KvDemoPagecache,
    /// kv-demo with the ZIOB buffer off (`--ziob=off`).
    #[value(name = "kv-demo-nobuf")]
    KvDemoNobuf,
    /// fjall in a directory of the same file system (a kv-demo built with `peers`).
    #[value(name = "fjall")]
    Fjall,
    /// Guest: db_bench on ext4 on the conventional namespace.
    #[value(name = "rocksdb-ext4")]
    RocksdbExt4,
    /// Guest: db_bench on ZenFS on the ZNS namespace (`--fs_uri=zenfs://dev:…`, ZenFS from
    /// `cargo xtask zenfs-build`, loaded with `LD_PRELOAD`).
    #[value(name = "rocksdb-zenfs")]
    RocksdbZenfs,
    /// Guest: kv-demo on the ZNS namespace through the NVMe char device (`nvme:`).
    #[value(name = "kv-demo-nvme")]
    KvDemoNvme,
    /// Guest: kv-demo on the ZNS namespace through the zoned block device (`zbd:`).
    #[value(name = "kv-demo-zbd")]
    KvDemoZbd,
}

impl Mode {
    /// Every mode, in column order.
    pub const ALL: [Mode; 10] = [
        Mode::Rocksdb,
        Mode::RocksdbDirect,
        Mode::KvDemo,
        Mode::KvDemoPagecache,
        Mode::KvDemoNobuf,
        Mode::Fjall,
        Mode::RocksdbExt4,
        Mode::RocksdbZenfs,
        Mode::KvDemoNvme,
        Mode::KvDemoZbd,
    ];

    /// The column name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Rocksdb => "rocksdb",
            Mode::RocksdbDirect => "rocksdb-direct",
            Mode::KvDemo => "kv-demo",
            Mode::KvDemoPagecache => "kv-demo-pagecache",
            Mode::KvDemoNobuf => "kv-demo-nobuf",
            Mode::Fjall => "fjall",
            Mode::RocksdbExt4 => "rocksdb-ext4",
            Mode::RocksdbZenfs => "rocksdb-zenfs",
            Mode::KvDemoNvme => "kv-demo-nvme",
            Mode::KvDemoZbd => "kv-demo-zbd",
        }
    }

    /// Whether it needs the QEMU guest's namespaces.
    pub fn guest_only(self) -> bool {
        matches!(
            self,
            Mode::RocksdbExt4 | Mode::RocksdbZenfs | Mode::KvDemoNvme | Mode::KvDemoZbd
        )
    }

    /// Whether db_bench runs it (otherwise the kv-demo binary).
    pub fn is_db_bench(self) -> bool {
        matches!(
            self,
            Mode::Rocksdb | Mode::RocksdbDirect | Mode::RocksdbExt4 | Mode::RocksdbZenfs
        )
    }

    /// What an acknowledged write means in this mode, at `--sync=0` and `--sync=1`.
    pub fn durability(self, sync: bool) -> &'static str {
        match (self, sync) {
            (Mode::Rocksdb | Mode::RocksdbDirect | Mode::RocksdbExt4, false) => {
                "WAL record write()n to the OS page cache: survives a process crash, not a power loss"
            }
            (Mode::Rocksdb | Mode::RocksdbDirect | Mode::RocksdbExt4, true) => {
                "WAL fsync'ed before the write returns: survives a power loss"
            }
            (Mode::RocksdbZenfs, false) => {
                "WAL record in ZenFS's write buffer (process memory, up to 1 MiB per file) until it fills or the WAL is synced: lost with the process until then"
            }
            (Mode::RocksdbZenfs, true) => {
                "WAL written to its zone (direct I/O) before the write returns, but ZenFS never flushes the device's volatile write cache (nor uses FUA): survives a process crash; a power loss only on a device without a volatile cache (the guest's ZNS namespace has one)"
            }
            (Mode::KvDemo | Mode::KvDemoPagecache | Mode::KvDemoNvme | Mode::KvDemoZbd, false) => {
                "WAL record queued, then in ZIOB's zone buffer (process memory either way): lost with the process until written back (at the latest on close)"
            }
            (Mode::KvDemoNobuf, false) => {
                "WAL record queued in process memory, written to the device (the emu file with O_DIRECT) when the shard's core next runs its WAL task, not waited for (writers wait once about 8 MiB is queued): a process crash loses what is queued or being written"
            }
            (
                Mode::KvDemo
                | Mode::KvDemoPagecache
                | Mode::KvDemoNobuf
                | Mode::KvDemoNvme
                | Mode::KvDemoZbd,
                true,
            ) => {
                "WAL synced before the write returns (written back with Force Unit Access on nvme/zbd, else written back and the device cache flushed; emu: fdatasync): survives a power loss"
            }
            (Mode::Fjall, false) => {
                "journal entry handed to the OS (page cache): survives a process crash"
            }
            (Mode::Fjall, true) => "journal fsync'ed (persist SyncData) after each write",
        }
    }
}

/// kv-demo against RocksDB's db_bench (and fjall) with the same flags, back to back.
#[derive(Debug, Parser, Clone)]
#[command(name = "kv-bench", version)]
pub struct Options {
    /// Modes (columns) to run; those that cannot run here are skipped with the reason
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Mode::ALL.to_vec())]
    pub modes: Vec<Mode>,
    /// db_bench benchmarks, in order, one process per mode and run
    #[arg(
        long,
        default_value = "fillseq,fillrandom,overwrite,readrandom,readseq,readwhilewriting,seekrandom,deleterandom"
    )]
    pub benchmarks: String,
    /// Keys (`--num`) at `--sync=0`
    #[arg(long, default_value_t = 1_000_000, value_parser = positive::<u64>)]
    pub num: u64,
    /// Keys (`--num`, also `--reads`) at `--sync=1` (every write waits for the device)
    #[arg(long, default_value_t = 20_000, value_parser = positive::<u64>)]
    pub sync_num: u64,
    /// `--sync` values to run (comma list of 0 and 1)
    #[arg(long, value_delimiter = ',', default_value = "0,1")]
    pub syncs: Vec<u8>,
    /// Value sizes in bytes (comma list); keys are 16 bytes
    #[arg(long, value_delimiter = ',', default_value = "100", value_parser = positive_size)]
    pub value_sizes: Vec<u64>,
    /// `--threads`
    #[arg(long, default_value_t = 1, value_parser = positive::<u32>)]
    pub threads: u32,
    /// Runs per mode (medians are reported); run r uses `--seed=1000+r` everywhere
    #[arg(long, default_value_t = 3, value_parser = positive::<u32>)]
    pub runs: u32,
    /// Memtable bytes (`--write_buffer_size`): small enough that the fills flush and compact
    #[arg(long, default_value = "16M", value_parser = positive_size)]
    pub write_buffer_size: u64,
    /// SST target bytes (`--target_file_size_base`)
    #[arg(long, default_value = "16M", value_parser = positive_size)]
    pub target_file_size: u64,
    /// Block cache bytes (`--cache_size`)
    #[arg(long, default_value = "8M", value_parser = positive_size)]
    pub cache_size: u64,
    /// Bloom bits per key (`--bloom_bits`)
    #[arg(long, default_value_t = 10)]
    pub bloom_bits: u32,
    /// Write bytes per second of each write benchmark, readwhilewriting's writer included
    /// (`--benchmark_write_rate_limit`, given to every mode alike); 0 = no limit
    #[arg(long, default_value_t = 0)]
    pub write_rate_limit: u64,
    /// db_bench binary
    #[arg(long, default_value = "db_bench")]
    pub db_bench: String,
    /// kv-demo binary (default: next to this binary, then PATH)
    #[arg(long)]
    pub kv_demo: Option<PathBuf>,
    /// Directory for the databases and emu device files (one file system for all)
    #[arg(long, default_value = "/var/tmp")]
    pub work_dir: PathBuf,
    /// Directory for every process's command and output, results.json and summary.md
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also run the guest modes in the QEMU guest (`cargo xtask vm-run`, TCG: slow)
    #[arg(long)]
    pub guest: bool,
    /// `--num` (and `--sync-num`) in the guest
    #[arg(long, default_value_t = 20_000, value_parser = positive::<u64>)]
    pub guest_num: u64,
    /// `--write_buffer_size` and `--target_file_size_base` in the guest (small, so that its
    /// small runs flush and compact)
    #[arg(long, default_value = "4M", value_parser = positive_size)]
    pub guest_write_buffer_size: u64,
    /// ZenFS install prefix for `rocksdb-zenfs` (`cargo xtask zenfs-build --prefix`)
    #[arg(long, default_value = "/opt/zenfs")]
    pub zenfs_prefix: PathBuf,
    /// Extra `cargo xtask vm-run` options for `--guest` (one string, split on spaces)
    #[arg(
        long,
        allow_hyphen_values = true,
        default_value = "--zones 128 --zone-size 16M --zone-capacity 12M --max-open 14 --max-active 14 --conv-size 2G --timeout-secs 5400"
    )]
    pub guest_vm_args: String,
}

impl Options {
    /// Checks what clap cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.modes.is_empty() || self.value_sizes.is_empty() || self.syncs.is_empty() {
            return Err("--modes, --value-sizes and --syncs must not be empty".into());
        }
        if let Some(s) = self.syncs.iter().find(|s| **s > 1) {
            return Err(format!("--syncs: {s} is not 0 or 1"));
        }
        if self.benchmarks.split(',').any(|b| b.trim().is_empty()) {
            return Err("--benchmarks: an empty name".into());
        }
        Ok(())
    }

    /// The benchmark names.
    pub fn bench_names(&self) -> Vec<String> {
        self.benchmarks
            .split(',')
            .map(|b| b.trim().to_string())
            .collect()
    }
}
