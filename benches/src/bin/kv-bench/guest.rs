//! `--guest`: runs this binary again inside the QEMU guest (`cargo xtask vm-run`, the
//! plumbing `rocksdb-bench` uses) for the guest modes, and reads back its results.json.

use std::path::Path;

use crate::options::{Mode, Options};
use crate::run::{find_kv_demo, Results};

/// The guest's arguments: the same workload, the guest modes, `--guest-num` keys, the
/// guest's write buffer and file size, `out` as `--out`.
pub fn guest_args(o: &Options, modes: &[Mode], out: &Path) -> Vec<String> {
    let list = |v: Vec<String>| v.join(",");
    let mut a = vec![
        "--modes".to_string(),
        list(modes.iter().map(|m| m.name().to_string()).collect()),
        "--benchmarks".into(),
        o.bench_names().join(","),
        "--num".into(),
        o.guest_num.to_string(),
        "--sync-num".into(),
        o.guest_num.min(o.sync_num).to_string(),
        "--syncs".into(),
        list(o.syncs.iter().map(u8::to_string).collect()),
        "--value-sizes".into(),
        list(o.value_sizes.iter().map(u64::to_string).collect()),
        "--threads".into(),
        o.threads.to_string(),
        "--runs".into(),
        o.runs.to_string(),
        "--write-buffer-size".into(),
        o.guest_write_buffer_size.to_string(),
        "--target-file-size".into(),
        o.guest_write_buffer_size.to_string(),
        "--cache-size".into(),
        o.cache_size.to_string(),
        "--bloom-bits".into(),
        o.bloom_bits.to_string(),
        "--write-rate-limit".into(),
        o.write_rate_limit.to_string(),
        "--db-bench".into(),
        o.db_bench.clone(),
        "--work-dir".into(),
        "/tmp".into(),
        "--zenfs-prefix".into(),
        o.zenfs_prefix.display().to_string(),
        "--out".into(),
        out.display().to_string(),
    ];
    if let Some(k) = find_kv_demo(o) {
        a.extend(["--kv-demo".into(), k.display().to_string()]);
    }
    a
}

/// Boots the guest and runs the guest modes there; their results, or why there are none.
pub fn run_in_guest(o: &Options, modes: &[Mode], out: &Path) -> Result<Results, String> {
    let guest_out = out.join("guest");
    let args = guest_args(o, modes, &guest_out);
    ziob_benches::guest_run::run_self_in_guest("kv-bench", &o.guest_vm_args, out, &guest_out, &args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn the_guest_gets_the_same_workload_and_parses_it() {
        let o = Options::try_parse_from([
            "kv-bench",
            "--value-sizes",
            "100,1024",
            "--runs",
            "2",
            "--guest-num",
            "777",
            "--benchmarks",
            "fillrandom,readrandom",
            "--syncs",
            "0",
        ])
        .unwrap();
        let a = guest_args(
            &o,
            &[Mode::KvDemoZbd, Mode::RocksdbExt4],
            Path::new("/o/guest"),
        );
        let g = Options::try_parse_from(std::iter::once("kv-bench".to_string()).chain(a)).unwrap();
        assert_eq!(g.modes, vec![Mode::KvDemoZbd, Mode::RocksdbExt4]);
        assert_eq!((g.num, g.sync_num), (777, 777));
        assert_eq!(g.value_sizes, o.value_sizes);
        assert_eq!((g.runs, g.syncs.clone()), (2, vec![0]));
        assert_eq!(g.bench_names(), o.bench_names());
        assert_eq!(g.write_buffer_size, 4 << 20);
        assert_eq!(g.out.as_deref(), Some(Path::new("/o/guest")));
        assert_eq!(g.zenfs_prefix, o.zenfs_prefix);
        assert!(!g.guest);
    }
}
