//! `rocksdb-bench` end to end on the host's `local` target with a tiny `--num` (seconds):
//! every benchmark of the sequence yields a parsed sample, the space is read, the raw output
//! is kept and the guest targets are skipped with a reason. Skipped (with the reason printed)
//! when db_bench is not installed.

use std::process::Command;

fn db_bench_installed() -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("db_bench").is_file()))
        .unwrap_or(false)
}

#[test]
fn local_target_runs_every_benchmark_and_reports() {
    if !db_bench_installed() {
        eprintln!("skipped: db_bench is not on PATH (Debian package rocksdb-tools)");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_rocksdb-bench"))
        .args(["--targets", "local,zenfs", "--num", "3000", "--runs", "2"])
        .args(["--value-sizes", "100"])
        .arg("--work-dir")
        .arg(work.path())
        .arg("--out")
        .arg(&out)
        .env_remove("ZIOB_GUEST")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let samples = r["samples"].as_array().unwrap();
    let benches = [
        "fillseq",
        "fillrandom",
        "overwrite",
        "readrandom",
        "readseq",
        "readwhilewriting",
    ];
    assert_eq!(samples.len(), benches.len() * 2, "{r}");
    for b in benches {
        let s: Vec<_> = samples.iter().filter(|s| s["bench"] == b).collect();
        assert_eq!(s.len(), 2, "{b}");
        for x in s {
            assert!(x["ops_per_sec"].as_f64().unwrap() > 0.0, "{x}");
            assert_eq!(x["target"], "local");
        }
    }
    // The writes went through RocksDB's statistics; the reads found keys.
    let fill = samples.iter().find(|s| s["bench"] == "fillrandom").unwrap();
    assert!(fill["user_bytes"].as_u64().unwrap() >= 3000 * 100, "{fill}");
    let read = samples.iter().find(|s| s["bench"] == "readrandom").unwrap();
    assert!(read["found"][0].as_u64().unwrap() > 0, "{read}");
    assert!(read["live_sst_bytes"].as_u64().is_some(), "{read}");
    let space = r["space"].as_array().unwrap();
    assert_eq!(space.len(), 2);
    assert!(
        space[0]["space"]["used_bytes"].as_u64().unwrap() > 0,
        "{space:?}"
    );
    // zenfs is a guest target: skipped with the reason.
    let skipped = r["skipped"].as_array().unwrap();
    assert!(
        skipped
            .iter()
            .any(|s| s["target"] == "zenfs" && s["reason"].as_str().unwrap().contains("guest")),
        "{skipped:?}"
    );
    assert!(out.join("local-v100-r1-readwhilewriting.out").is_file());
    assert!(stdout.contains("| readwhilewriting |"), "{stdout}");
    assert!(stdout.contains("`zenfs` skipped"), "{stdout}");
    // Nothing left behind in the work dir but the output.
    let left: Vec<_> = std::fs::read_dir(work.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("out")]);
}
