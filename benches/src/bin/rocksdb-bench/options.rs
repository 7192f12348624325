//! Command-line options of `rocksdb-bench`.

use std::path::PathBuf;

use clap::Parser;
use ziob_benches::args::{positive, positive_size};

use crate::targets::TargetId;

/// One db_bench benchmark of the sequence, run as its own db_bench process.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Bench {
    /// Keys in order into a fresh database.
    Fillseq,
    /// Random keys into a fresh database (the database the later steps use).
    Fillrandom,
    /// Random keys over fillrandom's database.
    Overwrite,
    /// Random point reads.
    Readrandom,
    /// One scan in key order.
    Readseq,
    /// Random reads on one thread while another writes.
    Readwhilewriting,
}

impl Bench {
    /// In the order they run.
    pub const ALL: [Bench; 6] = [
        Bench::Fillseq,
        Bench::Fillrandom,
        Bench::Overwrite,
        Bench::Readrandom,
        Bench::Readseq,
        Bench::Readwhilewriting,
    ];

    /// db_bench's name.
    pub fn name(self) -> &'static str {
        match self {
            Bench::Fillseq => "fillseq",
            Bench::Fillrandom => "fillrandom",
            Bench::Overwrite => "overwrite",
            Bench::Readrandom => "readrandom",
            Bench::Readseq => "readseq",
            Bench::Readwhilewriting => "readwhilewriting",
        }
    }

    /// Whether it starts from a fresh database (db_bench destroys the old one).
    pub fn fresh(self) -> bool {
        matches!(self, Bench::Fillseq | Bench::Fillrandom)
    }

    /// Whether it writes (write amplification is reported for it).
    pub fn writes(self) -> bool {
        matches!(
            self,
            Bench::Fillseq | Bench::Fillrandom | Bench::Overwrite | Bench::Readwhilewriting
        )
    }

    /// The `--benchmarks` value of its process. After a fill or overwrite, `flush` (and
    /// `waitforcompaction`, which also sleeps 5 s, after the random writes) run untimed in the
    /// same process, so that its `--statistics` count all the flush and compaction work the
    /// writes caused on every target alike (otherwise a faster target has more of it still
    /// running when db_bench prints them). readrandom runs after `stats`, whose level table
    /// gives the live SST bytes.
    pub fn benchmarks_flag(self) -> &'static str {
        match self {
            Bench::Fillseq => "fillseq,flush",
            Bench::Fillrandom => "fillrandom,flush,waitforcompaction",
            Bench::Overwrite => "overwrite,flush,waitforcompaction",
            Bench::Readrandom => "stats,readrandom",
            b => b.name(),
        }
    }
}

/// RocksDB's db_bench with identical flags on each storage target (issue #15). Host targets
/// run here; `--guest` also boots the QEMU guest (`cargo xtask vm-run`) for the zoned ones.
#[derive(Debug, Parser, Clone)]
#[command(name = "rocksdb-bench", version)]
pub struct Options {
    /// Targets (comma list); the ones this machine cannot run are skipped with the reason
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = TargetId::ALL.to_vec())]
    pub targets: Vec<TargetId>,
    /// Benchmarks (comma list; they run in the fixed order fillseq, fillrandom, overwrite,
    /// readrandom, readseq, readwhilewriting, each as one db_bench process)
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Bench::ALL.to_vec())]
    pub benchmarks: Vec<Bench>,
    /// Keys per benchmark (`--num`); default 1000000 on the host, 200000 in the guest
    #[arg(long, value_parser = positive::<u64>)]
    pub num: Option<u64>,
    /// `--num` for the guest part of `--guest`
    #[arg(long, default_value_t = 50_000, value_parser = positive::<u64>)]
    pub guest_num: u64,
    /// Value sizes in bytes (comma list); keys are 16 bytes
    #[arg(long, value_delimiter = ',', default_value = "100,1024", value_parser = positive_size)]
    pub value_sizes: Vec<u64>,
    /// Runs of the whole sequence per target and value size (medians are reported)
    #[arg(long, default_value_t = 3, value_parser = positive::<u32>)]
    pub runs: u32,
    /// Block cache bytes (`--cache_size`, db_bench's default 32 MiB)
    #[arg(long, default_value = "32M", value_parser = positive_size)]
    pub cache_size: u64,
    /// Memtable bytes (`--write_buffer_size`)
    #[arg(long, default_value = "4M", value_parser = positive_size)]
    pub write_buffer_size: u64,
    /// SST target size (`--target_file_size_base`)
    #[arg(long, default_value = "4M", value_parser = positive_size)]
    pub target_file_size_base: u64,
    /// L1 size (`--max_bytes_for_level_base`): small so that the fills compact into L2
    #[arg(long, default_value = "16M", value_parser = positive_size)]
    pub max_bytes_for_level_base: u64,
    /// Bytes per second for every write benchmark's writers together, readwhilewriting's
    /// writer included (db_bench's `--benchmark_write_rate_limit`, the same on every
    /// target); none by default (db_bench's default: each writer as fast as it can)
    #[arg(long, value_parser = positive_size)]
    pub write_rate_limit: Option<u64>,
    /// db_bench binary
    #[arg(long, default_value = "db_bench")]
    pub db_bench: String,
    /// libziob_rocksdb.so (default: target/release, then target/debug of this workspace)
    #[arg(long)]
    pub plugin: Option<PathBuf>,
    /// `ziob` CLI used to create emu device files (default: next to this binary, then PATH)
    #[arg(long)]
    pub ziob_cli: Option<PathBuf>,
    /// ZenFS install prefix (`cargo xtask zenfs-build --prefix`)
    #[arg(long, default_value = "/opt/zenfs")]
    pub zenfs_prefix: PathBuf,
    /// Directory for `local`'s database and the emu device files
    #[arg(long, default_value = "/var/tmp")]
    pub work_dir: PathBuf,
    /// Directory for raw db_bench output, results.json and summary.md
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also run the guest targets in a QEMU guest (`cargo xtask vm-run`, TCG: slow)
    #[arg(long)]
    pub guest: bool,
    /// Extra `cargo xtask vm-run` options for `--guest` (one string, split on spaces)
    #[arg(
        long,
        default_value = "--zones 128 --zone-size 16M --zone-capacity 12M --max-open 14 --max-active 14 --conv-size 2G --timeout-secs 5400"
    )]
    pub guest_vm_args: String,
}

impl Options {
    /// `--num` for where this process runs.
    pub fn num_here(&self, in_guest: bool) -> u64 {
        self.num
            .unwrap_or(if in_guest { 200_000 } else { 1_000_000 })
    }

    /// Checks that the benchmark list gives the reads a database.
    pub fn check(&self) -> Result<(), String> {
        let first_existing = self.benchmarks.iter().find(|b| !b.fresh());
        if let Some(b) = first_existing {
            if !self.benchmarks.iter().any(|f| f.fresh()) {
                return Err(format!(
                    "{} needs a database: add fillrandom (or fillseq) to --benchmarks",
                    b.name()
                ));
            }
        }
        if self.targets.is_empty() || self.benchmarks.is_empty() || self.value_sizes.is_empty() {
            return Err("--targets, --benchmarks and --value-sizes must not be empty".into());
        }
        Ok(())
    }

    /// The benchmarks in run order, without duplicates.
    pub fn sequence(&self) -> Vec<Bench> {
        Bench::ALL
            .into_iter()
            .filter(|b| self.benchmarks.contains(b))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_without_a_fill_are_refused_and_order_is_fixed() {
        let o = Options::try_parse_from(["x", "--benchmarks", "readrandom"]).unwrap();
        assert!(o.check().unwrap_err().contains("fillrandom"));
        let o =
            Options::try_parse_from(["x", "--benchmarks", "readseq,fillrandom,readseq"]).unwrap();
        assert!(o.check().is_ok());
        assert_eq!(o.sequence(), vec![Bench::Fillrandom, Bench::Readseq]);
        let o = Options::try_parse_from(["x"]).unwrap();
        assert_eq!(o.sequence(), Bench::ALL.to_vec());
        assert_eq!(o.num_here(true), 200_000);
        assert_eq!(o.value_sizes, vec![100, 1024]);
        assert!(Options::try_parse_from(["x", "--runs", "0"]).is_err());
    }
}
