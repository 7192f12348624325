//! Runs `rt-bench` with tiny settings and checks the JSON document's shape. No speed is
//! asserted here: speed is reported by the benchmark itself, as ratios within one run.

use std::process::Command;

use serde_json::Value;

#[test]
fn rt_bench_prints_json_with_nonzero_iops() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("rt-bench-smoke.dat");
    let out = Command::new(env!("CARGO_BIN_EXE_rt-bench"))
        .args([
            "--file",
            file.to_str().expect("utf-8 temp path"),
            "--file-size",
            "16M",
            "--duration-secs",
            "0.2",
            "--warmup-secs",
            "0.05",
            "--qd",
            "1,4",
            "--modes",
            "buffered",
            "--workloads",
            "nop,randread",
            "--runners",
            "ziob,plain",
            "--repeat",
            "1",
            "--json",
        ])
        .output()
        .expect("rt-bench runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rt-bench failed: {stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");

    assert_eq!(doc["tool"], "rt-bench");
    assert_eq!(doc["settings"]["file_size_bytes"], 16 << 20);
    let configs = doc["configs"].as_array().expect("configs array");
    // nop qd1, nop qd4, randread buffered qd1, randread buffered qd4.
    assert_eq!(configs.len(), 4, "{doc:#}");
    for c in configs {
        let label = format!("{} {} qd{}", c["workload"], c["mode"], c["qd"]);
        let runners = c["runners"].as_array().expect("runners array");
        let names: Vec<&str> = runners
            .iter()
            .filter_map(|r| r["runner"].as_str())
            .collect();
        assert_eq!(names, ["ziob", "plain"], "{label}");
        assert_eq!(c["plain_best"], "plain", "{label}");
        for r in runners {
            let errors = r["errors"].as_array().expect("errors array");
            assert!(errors.is_empty(), "{label} {}: {errors:?}", r["runner"]);
            let iops = r["median_iops"].as_f64().expect("median_iops");
            assert!(iops > 0.0, "{label} {}: iops {iops}", r["runner"]);
            assert!(r["median_cpu_ns_per_op"].as_f64().is_some(), "{label}");
            assert!(r["iops_vs_plain_best"].as_f64().is_some(), "{label}");
            assert!(r["cpu_vs_plain_best"].as_f64().is_some(), "{label}");
            let sample = &r["samples"][0];
            assert!(sample["ops"].as_u64().expect("ops") > 0, "{label}");
            for field in ["secs", "iops", "cpu_ns_per_op", "thread_cpu_ns_per_op"] {
                assert!(sample[field].as_f64().is_some(), "{label}: {field}");
            }
        }
    }
    assert!(doc["submit_policy"].as_array().is_some());
}

#[test]
fn rt_bench_shows_the_runtimes_events_with_rust_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("rt-bench-log.dat");
    let out = Command::new(env!("CARGO_BIN_EXE_rt-bench"))
        .args([
            "--file",
            file.to_str().expect("utf-8 temp path"),
            "--file-size",
            "1M",
            "--duration-secs",
            "0.01",
            "--warmup-secs",
            "0.01",
            "--qd",
            "1",
            "--modes",
            "buffered",
            "--workloads",
            "randread",
            "--runners",
            "ziob",
            "--repeat",
            "1",
            "--json",
        ])
        .env("RUST_LOG", "ziob_runtime=trace")
        .output()
        .expect("rt-bench runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rt-bench failed");
    assert!(
        stderr.contains("TRACE") && stderr.contains("submit"),
        "RUST_LOG=ziob_runtime=trace shows the runtime's op submissions (stderr: {} bytes)",
        stderr.len()
    );
}

#[test]
fn rt_bench_refuses_bad_durations_and_repeats_with_a_message() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("rt-bench-bad.dat");
    let base = [
        "--file",
        file.to_str().expect("utf-8 temp path"),
        "--runners",
        "ziob",
        "--workloads",
        "nop",
        "--qd",
        "1",
    ];
    let cases: [(&[&str], &str); 3] = [
        (
            &["--duration-secs", "1e30", "--repeat", "1"],
            "--duration-secs and --warmup-secs are too long",
        ),
        (
            &[
                "--duration-secs",
                "0.01",
                "--warmup-secs",
                "1e300",
                "--repeat",
                "1",
            ],
            "--duration-secs and --warmup-secs are too long",
        ),
        (
            &["--duration-secs", "0.01", "--repeat", "0"],
            "--repeat must be at least 1",
        ),
    ];
    for (opts, want) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_rt-bench"))
            .args(base)
            .args(opts)
            .output()
            .expect("rt-bench runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{opts:?}: {stderr}");
        assert!(stderr.contains(want), "{opts:?}: {stderr}");
    }
}
