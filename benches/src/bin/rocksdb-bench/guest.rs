//! `--guest`: runs this binary again inside the QEMU guest (`cargo xtask vm-run`) for the
//! targets that need its NVMe namespaces, and reads back the guest's results.json.

use std::path::Path;

use crate::options::Options;
use crate::run::Results;
use crate::targets::TargetId;

/// The guest's arguments: the same benchmark options, the guest targets, `--guest-num` as
/// `--num`, and `out` as `--out`.
pub fn guest_args(o: &Options, targets: &[TargetId], out: &Path) -> Vec<String> {
    let list = |v: Vec<String>| v.join(",");
    let mut a = vec![
        "--targets".to_string(),
        list(targets.iter().map(|t| t.name().to_string()).collect()),
        "--benchmarks".into(),
        list(o.sequence().iter().map(|b| b.name().to_string()).collect()),
        "--num".into(),
        o.guest_num.to_string(),
        "--value-sizes".into(),
        list(o.value_sizes.iter().map(u64::to_string).collect()),
        "--runs".into(),
        o.runs.to_string(),
        "--cache-size".into(),
        o.cache_size.to_string(),
        "--write-buffer-size".into(),
        o.write_buffer_size.to_string(),
        "--target-file-size-base".into(),
        o.target_file_size_base.to_string(),
        "--max-bytes-for-level-base".into(),
        o.max_bytes_for_level_base.to_string(),
        "--db-bench".into(),
        o.db_bench.clone(),
        "--zenfs-prefix".into(),
        o.zenfs_prefix.display().to_string(),
        "--out".into(),
        out.display().to_string(),
    ];
    if let Some(p) = &o.plugin {
        a.extend(["--plugin".into(), p.display().to_string()]);
    }
    if let Some(p) = &o.ziob_cli {
        a.extend(["--ziob-cli".into(), p.display().to_string()]);
    }
    if let Some(rate) = o.write_rate_limit {
        a.extend(["--write-rate-limit".into(), rate.to_string()]);
    }
    a
}

/// Boots the guest and runs the guest targets there; their results, or why there are none.
pub fn run_in_guest(o: &Options, targets: &[TargetId], out: &Path) -> Result<Results, String> {
    let guest_out = out.join("guest");
    let args = guest_args(o, targets, &guest_out);
    ziob_benches::guest_run::run_self_in_guest(
        "rocksdb-bench",
        &o.guest_vm_args,
        out,
        &guest_out,
        &args,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn the_guest_gets_the_same_benchmark_options_and_parses_them() {
        let o = Options::try_parse_from([
            "x",
            "--value-sizes",
            "100,1024",
            "--runs",
            "2",
            "--guest-num",
            "777",
            "--cache-size",
            "8M",
            "--benchmarks",
            "fillrandom,readrandom",
            "--write-rate-limit",
            "8000000",
        ])
        .unwrap();
        let a = guest_args(
            &o,
            &[TargetId::Zenfs, TargetId::ZiobZbd],
            Path::new("/o/guest"),
        );
        let g = Options::try_parse_from(std::iter::once("x".to_string()).chain(a)).unwrap();
        assert_eq!(g.targets, vec![TargetId::Zenfs, TargetId::ZiobZbd]);
        assert_eq!(g.num, Some(777));
        assert_eq!(g.value_sizes, o.value_sizes);
        assert_eq!(g.runs, 2);
        assert_eq!(g.cache_size, 8 << 20);
        assert_eq!(g.sequence(), o.sequence());
        assert_eq!(g.write_buffer_size, o.write_buffer_size);
        assert_eq!(g.out.as_deref(), Some(Path::new("/o/guest")));
        assert_eq!(g.write_rate_limit, Some(8_000_000));
        assert!(!g.guest);
    }
}
