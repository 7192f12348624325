//! `ziob-bench` runs every workload with ZIOB on and off and prints the documented JSON.

use std::process::Command;

fn run(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_ziob-bench"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ziob-bench {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn every_workload_reports_the_documented_fields() {
    for workload in ["append", "write", "randread", "readafterwrite"] {
        let v = run(&[
            "--dev",
            "mem:zones=16,zone_size=1M",
            "--workload",
            workload,
            "--bs",
            "4K",
            "--qd",
            "2",
            "--zones",
            "8",
            "--cores",
            "2",
            "--ops",
            "400",
            "--ziob",
            "on,off",
            "--json",
        ]);
        let runs = v.as_array().expect("two runs: an array");
        assert_eq!(runs.len(), 2);
        for r in runs {
            for key in [
                "iops",
                "bytes_per_sec",
                "device_writes",
                "device_write_bytes",
            ] {
                assert!(r[key].is_number(), "{workload}: {key} missing in {r}");
            }
            for key in ["p50", "p99", "p999"] {
                assert!(
                    r["lat_ns"][key].is_number(),
                    "{workload}: lat_ns.{key} missing"
                );
            }
            assert!(r["ops"].as_u64().unwrap() >= 400, "{workload}: {r}");
        }
        if workload == "append" || workload == "write" {
            let on = &runs[0];
            let off = &runs[1];
            assert_eq!(on["ziob"], true);
            // Pass-through sends every op to the device; the buffer sends fewer, larger writes.
            assert_eq!(
                off["device_writes"].as_u64().unwrap(),
                off["ops"].as_u64().unwrap()
            );
            assert!(on["device_writes"].as_u64().unwrap() < off["device_writes"].as_u64().unwrap());
        }
    }
}

#[test]
fn bad_options_fail_with_a_message() {
    let out = Command::new(env!("CARGO_BIN_EXE_ziob-bench"))
        .args([
            "--dev",
            "mem:zones=4,zone_size=1M",
            "--zones",
            "9",
            "--ops",
            "10",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--zones 9: the device has 4 zones"), "{err}");
}
