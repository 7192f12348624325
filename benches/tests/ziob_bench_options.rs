//! `ziob-bench` checks every option before the first run and fails with a message naming
//! it; a run that does not finish ends the process (exit 3) instead of hanging; `RUST_LOG`
//! shows the library's events on stderr.

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long one `ziob-bench` may take before the test calls it a hang.
const HANG_WATCHDOG: Duration = Duration::from_secs(60);

fn bench(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ziob-bench"));
    cmd.args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            pipe.read_to_end(&mut bytes).unwrap();
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > HANG_WATCHDOG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ziob-bench {args:?} still running after {HANG_WATCHDOG:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

#[test]
fn every_bad_value_fails_before_the_first_run_naming_its_option() {
    const DEV: [&str; 2] = ["--dev", "mem:zones=8,zone_size=1M"];
    // (options, what stderr must say). `--ops 20` keeps any run that wrongly starts short.
    let cases: &[(&[&str], &str)] = &[
        (&["--qd", "0", "--ops", "20"], "invalid value '0' for '--qd <QD>'"),
        (&["--qd", "100000", "--ops", "20"], "for '--qd <QD>'"),
        (&["--runtime", "0"], "invalid value '0' for '--runtime <RUNTIME>': must be more than 0 seconds"),
        (&["--runtime=-0.5"], "invalid value '-0.5' for '--runtime <RUNTIME>'"),
        (&["--runtime", "nan"], "invalid value 'nan' for '--runtime <RUNTIME>'"),
        (&["--runtime", "1e30"], "invalid value '1e30' for '--runtime <RUNTIME>': 1e30 seconds is too long"),
        (&["--ops", "0"], "invalid value '0' for '--ops <OPS>': must be at least 1"),
        (&["--zones", "0", "--ops", "20"], "invalid value '0' for '--zones <ZONES>': must be at least 1"),
        (&["--zones", "4,0", "--ops", "20"], "invalid value '0' for '--zones <ZONES>'"),
        (&["--zones", "4,9", "--ops", "20"], "--zones 9: the device has 8 zones"),
        (&["--cores", "0", "--ops", "20"], "invalid value '0' for '--cores <CORES>'"),
        (&["--repeat", "0", "--ops", "20"], "invalid value '0' for '--repeat <REPEAT>'"),
        (&["--bs", "0", "--ops", "20"], "invalid value '0' for '--bs <BS>'"),
        (&["--bs", "2M", "--ops", "20"], "--bs 2097152: larger than the zone capacity of 1048576 bytes"),
        // Pass-through needs whole blocks: found before the buffered run, not after it.
        (&["--bs", "6000", "--ops", "20"], "--bs 6000: pass-through (--ziob off) needs a multiple of the 4096-byte block size"),
        (&["--bs", "4K,6000", "--ops", "20"], "--bs 6000: pass-through"),
        (&["--bs", "1M", "--zones", "2", "--ops", "20"], "--bs 1048576: pass-through (--ziob off) appends are limited by the device's zone append size limit of 524288 bytes"),
        (&["--ziob", "maybe", "--ops", "20"], "invalid value 'maybe' for '--ziob <ZIOB>'"),
        (&["--buffer-size", "100K", "--ops", "20"], "--buffer-size / --writeback-unit: "),
        (&["--writeback-unit", "6000", "--ops", "20"], "--buffer-size / --writeback-unit: "),
        // Checked before the runtime registers --fixed-buffers of that size (4 × 3 TiB).
        (&["--writeback-unit", "3T", "--fixed-buffers", "4", "--ops", "20"], "--buffer-size / --writeback-unit: invalid ZIOB configuration: write-back unit 3298534883328 bytes"),
        (&["--workload", "write", "--zones", "4", "--qd", "4", "--cores", "2", "--ops", "20"], "--zones 4: the write workload gives every task its own zone, so --zones must be at least --cores × --qd = 8"),
        (&["--timeout", "0", "--ops", "20"], "invalid value '0' for '--timeout <TIMEOUT>'"),
        (&["--workload", "commitlog", "--flush-every", "8,0", "--ops", "20"], "invalid value '0' for '--flush-every <FLUSH_EVERY>'"),
        (&["--workload", "latency", "--background-flush-ms", "0", "--ops", "20"], "invalid value '0' for '--background-flush-ms <BACKGROUND_FLUSH_MS>'"),
        (&["--create-block-size", "0", "--ops", "20"], "invalid value '0' for '--create-block-size <CREATE_BLOCK_SIZE>'"),
        (&["--workload", "commitlog", "--bs", "4K,512", "--ops", "20"], "--bs 512: pass-through (--ziob off) needs a multiple of the 4096-byte block size"),
        (&["--runtime", "5", "--timeout", "2"], "--timeout 2.0: must be longer than --runtime 5.0"),
        (&["--create-zone-size", "0", "--ops", "20"], "invalid value '0' for '--create-zone-size <CREATE_ZONE_SIZE>'"),
    ];
    for (opts, want) in cases {
        let mut args = DEV.to_vec();
        args.extend_from_slice(opts);
        let out = bench(&args, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{opts:?} was accepted: {err}");
        assert!(err.contains(want), "{opts:?}: want `{want}` in:\n{err}");
        assert!(
            !err.contains("IOPS") && out.stdout.is_empty(),
            "{opts:?}: a run started before the bad value was refused:\n{err}"
        );
    }
}

#[test]
fn a_run_that_does_not_finish_is_ended_by_the_watchdog() {
    let out = bench(
        &[
            "--dev",
            "mem:zones=8,zone_size=1M",
            "--ops",
            "1000000000000",
            "--ziob",
            "on",
            "--timeout",
            "1",
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(
            "ziob-bench: the run --workload append --bs 4096 --zones 8 --ziob on did not finish within 1.0 s"
        ),
        "{err}"
    );
}

#[test]
fn rust_log_shows_the_librarys_events() {
    let dir = tempfile::tempdir().unwrap();
    let dev = format!("emu:{}", dir.path().join("b.zns").display());
    let args = [
        "--dev",
        &dev,
        "--create-zones",
        "4",
        "--create-zone-size",
        "1M",
        "--zones",
        "2",
        "--ops",
        "8",
        "--ziob",
        "on",
    ];
    let quiet = bench(&args, &[]);
    let err = String::from_utf8_lossy(&quiet.stderr);
    assert!(quiet.status.success(), "{err}");
    assert!(!err.contains("TRACE"), "{err}");
    let traced = bench(&args, &[("RUST_LOG", "ziob_runtime=trace")]);
    let err = String::from_utf8_lossy(&traced.stderr);
    assert!(traced.status.success(), "{err}");
    assert!(
        err.contains("TRACE") && err.contains("submit"),
        "RUST_LOG=ziob_runtime=trace shows the runtime's op submissions:\n{err}"
    );
}

/// The guest benchmarks refuse bad numbers when parsing, before looking for a device.
#[test]
fn guest_benchmarks_refuse_bad_numbers_naming_the_option() {
    let cases: [(&str, &[&str], &str); 7] = [
        (
            "nvme-bench",
            &["--secs", "0"],
            "for '--secs <SECS>': must be more than 0 seconds",
        ),
        (
            "nvme-bench",
            &["--secs", "1e30"],
            "for '--secs <SECS>': 1e30 seconds is too long",
        ),
        (
            "nvme-bench",
            &["--zones", "0"],
            "for '--zones <ZONES>': must be at least 1",
        ),
        (
            "nvme-bench",
            &["--rounds", "0"],
            "for '--rounds <ROUNDS>': must be at least 1",
        ),
        (
            "nvme-bench",
            &["--read-qd", "1,0"],
            "for '--read-qd <READ_QD>': must be at least 1",
        ),
        (
            "guest-bench",
            &["--dev", "/nonexistent", "--zones", "0"],
            "for '--zones <ZONES>': must be at least 1",
        ),
        (
            "guest-bench",
            &["--dev", "/nonexistent", "--secs", "0"],
            "for '--secs <SECS>': must be at least 1",
        ),
    ];
    for (bin, opts, want) in cases {
        let exe = match bin {
            "nvme-bench" => env!("CARGO_BIN_EXE_nvme-bench"),
            _ => env!("CARGO_BIN_EXE_guest-bench"),
        };
        let out = Command::new(exe)
            .args(opts)
            .env_remove("ZIOB_ZNS_CHAR")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bin} {opts:?}: {err}");
        assert!(err.contains(want), "{bin} {opts:?}: want `{want}` in {err}");
    }
}

/// A device that cannot be opened is an error message (exit 1), not a panic.
#[test]
fn guest_benchmarks_report_a_missing_device_without_panicking() {
    for (exe, want) in [
        (
            env!("CARGO_BIN_EXE_nvme-bench"),
            "nvme-bench: nvme:/nonexistent/dev: ",
        ),
        (
            env!("CARGO_BIN_EXE_guest-bench"),
            "guest-bench: zbd:/nonexistent/dev: ",
        ),
    ] {
        let out = Command::new(exe)
            .args(["--dev", "/nonexistent/dev"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{exe}: {err}");
        assert!(
            err.starts_with(want) && !err.contains("panicked"),
            "{exe}: {err}"
        );
    }
}
