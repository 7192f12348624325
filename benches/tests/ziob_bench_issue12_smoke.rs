//! `ziob-bench`'s issue #12 workloads (`commitlog`, `latency`, `manyzones`) run tiny
//! configurations and print the documented JSON. Shapes and presence only: no speed is
//! asserted.

use std::process::{Command, Output};

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ziob-bench"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn run_json(args: &[&str]) -> Vec<serde_json::Value> {
    let out = bench(args);
    assert!(
        out.status.success(),
        "ziob-bench {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    match serde_json::from_slice(&out.stdout).unwrap() {
        serde_json::Value::Array(runs) => runs,
        one => vec![one],
    }
}

fn assert_latency(v: &serde_json::Value, what: &str) {
    let keys = ["p50", "p90", "p99", "p999", "p9999", "max"];
    for key in keys {
        assert!(v[key].is_u64(), "{what}.{key} missing in {v}");
    }
    for pair in keys.windows(2) {
        assert!(v[pair[0]].as_u64() <= v[pair[1]].as_u64(), "{what}: {v}");
    }
}

#[test]
fn commitlog_reports_append_and_flush_latency_for_every_combination() {
    // 512-byte records pass through only on a device with 512-byte blocks.
    let runs = run_json(&[
        "--dev",
        "mem:zones=16,zone_size=1M,block_size=512",
        "--workload",
        "commitlog",
        "--bs",
        "512,4K",
        "--flush-every",
        "1,8",
        "--qd",
        "2",
        "--zones",
        "4",
        "--cores",
        "2",
        "--ops",
        "200",
        "--json",
    ]);
    assert_eq!(runs.len(), 8, "2 sizes × 2 flush intervals × on/off");
    for r in &runs {
        assert_eq!(r["workload"], "commitlog");
        assert!(r["records"].as_u64().unwrap() >= 200, "{r}");
        for key in ["records_per_sec", "bytes_per_sec", "secs"] {
            assert!(r[key].as_f64().unwrap() > 0.0, "{key} in {r}");
        }
        assert_latency(&r["append_lat_ns"], "append_lat_ns");
        assert_latency(&r["flush_lat_ns"], "flush_lat_ns");
        let every = r["flush_every"].as_u64().unwrap();
        let calls = r["flush_calls"].as_u64().unwrap();
        // Each task flushes after every `every` of its own appends.
        assert!(calls >= 200 / every - 4 && calls <= 200 / every, "{r}");
        // Counted by the stats; shared flushes may make it smaller than the calls.
        let device = r["device_flushes"]
            .as_u64()
            .expect("device_flushes counted");
        assert!(device >= 1 && device <= calls, "{r}");
        assert_eq!(r["buffer"].is_object(), r["ziob"] == true, "{r}");
    }
}

#[test]
fn commitlog_refuses_records_smaller_than_the_block_in_pass_through() {
    let out = bench(&[
        "--dev",
        "mem:zones=8,zone_size=1M",
        "--workload",
        "commitlog",
        "--bs",
        "512",
        "--ops",
        "20",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "--bs 512: pass-through (--ziob off) needs a multiple of the 4096-byte block size"
        ) && err.contains("block_size=512"),
        "{err}"
    );
}

#[test]
fn latency_reports_an_idle_and_a_write_back_phase_with_ratios() {
    let dir = tempfile::tempdir().unwrap();
    let dev = format!("emu:{},lat_us=200", dir.path().join("d.zns").display());
    let runs = run_json(&[
        "--dev",
        &dev,
        "--create-zones",
        "8",
        "--create-zone-size",
        "4M",
        "--create-block-size",
        "512",
        "--workload",
        "latency",
        "--bs",
        "512",
        "--qd",
        "2",
        "--zones",
        "2",
        "--ops",
        "100",
        "--op-interval-us",
        "500",
        "--background-flush-ms",
        "2",
        "--json",
    ]);
    assert_eq!(runs.len(), 2, "on and off");
    for r in &runs {
        assert_eq!(r["workload"], "latency");
        for phase in ["idle", "under_writeback"] {
            let p = &r[phase];
            assert!(p["ops"].as_u64().unwrap() >= 100, "{phase} in {r}");
            assert_latency(&p["append_lat_ns"], "append_lat_ns");
            assert_latency(&p["read_lat_ns"], "read_lat_ns");
            for key in ["device_flushes", "writebacks", "read_hits", "read_misses"] {
                assert!(p[key].is_u64(), "{phase}.{key} in {r}");
            }
        }
        assert_eq!(r["idle"]["background_flushes"], 0, "{r}");
        // 100 pairs of 0.5 ms pauses on one core outlast a 2 ms flush period.
        assert!(
            r["under_writeback"]["background_flushes"].as_u64().unwrap() > 0,
            "{r}"
        );
        for key in ["append_p99_ratio", "read_p99_ratio"] {
            assert!(r[key].as_f64().unwrap() > 0.0, "{key} in {r}");
        }
    }
}

#[test]
fn manyzones_reports_how_far_it_got_and_memory_against_the_budget() {
    let runs = run_json(&[
        "--dev",
        "mem:zones=300,zone_size=1M",
        "--workload",
        "manyzones",
        "--bs",
        "11,4K",
        "--zones",
        "300",
        "--ops",
        "600",
        "--json",
    ]);
    // 11 bytes cannot pass through a 4 KiB-block device: that run is skipped.
    assert_eq!(
        runs.len(),
        3,
        "11 B buffered, 4 KiB buffered and pass-through"
    );
    for r in &runs {
        assert_eq!(r["workload"], "manyzones");
        let written = r["zones_written"].as_u64().unwrap();
        if r["completed"] == true {
            assert_eq!(written, 300, "{r}");
            assert_eq!(r["appends"], 600, "{r}");
            assert!(r["refusal"].is_null(), "{r}");
        } else {
            // A refusal is a result: which zone, what kind, the message.
            assert_eq!(r["refusal_kind"], "BufferFull", "{r}");
            let at = r["refused_at_zone"].as_u64().unwrap();
            // Refused in the first pass: at the first zone without data.
            assert!(written == 300 || at == written, "{r}");
            assert!(!r["refusal"].as_str().unwrap().is_empty(), "{r}");
        }
        let budget = r["memory_budget_bytes"].as_u64().unwrap();
        let used = r["memory_used_bytes"].as_u64().unwrap();
        if r["ziob"] == true {
            assert!(budget > 0 && used <= budget, "{r}");
            assert!(r["dirty_bytes"].as_u64().unwrap() > 0, "{r}");
        }
        assert_latency(&r["append_lat_ns"], "append_lat_ns");
    }
}
