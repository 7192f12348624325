//! The `ziob` binary end to end on an emu device: outputs, exit codes and error wording.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn ziob(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ziob"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ziob");
    // `write` and `append` stop reading once the input is larger than the zone takes.
    match child.stdin.take().unwrap().write_all(stdin) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("writing stdin: {e}"),
        _ => {}
    }
    child.wait_with_output().unwrap()
}

fn ok(args: &[&str], stdin: &[u8]) -> String {
    let out = ziob(args, stdin);
    assert!(
        out.status.success(),
        "ziob {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs a command that must fail with exit code 1; returns its stderr.
fn fails(args: &[&str], stdin: &[u8]) -> String {
    let out = ziob(args, stdin);
    assert_eq!(
        out.status.code(),
        Some(1),
        "ziob {args:?} should fail with 1"
    );
    assert!(out.stdout.is_empty(), "a failed command printed to stdout");
    String::from_utf8(out.stderr).unwrap()
}

struct Dev {
    _dir: tempfile::TempDir,
    path: PathBuf,
    spec: String,
}

/// 4 zones of 1 MiB, capacity 768 KiB, max open 2, max active 3.
fn device() -> Dev {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.zns");
    let spec = format!("emu:{}", path.display());
    let out = ok(
        &[
            "create",
            &spec,
            "--zones",
            "4",
            "--zone-size",
            "1M",
            "--zone-capacity",
            "768K",
            "--max-open",
            "2",
            "--max-active",
            "3",
        ],
        b"",
    );
    assert_eq!(
        out,
        format!("created {spec}: 4 zones of 1 MiB (capacity 768 KiB), block size 4096 bytes\n")
    );
    Dev {
        _dir: dir,
        path,
        spec,
    }
}

fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn report_json(spec: &str) -> Vec<serde_json::Value> {
    serde_json::from_str(&ok(&["report", spec, "--json"], b"")).unwrap()
}

#[test]
fn create_and_info() {
    let d = device();
    let info = ok(&["info", &d.spec], b"");
    for line in [
        "block size:           4096 bytes",
        "zone size:            1048576 bytes (1 MiB)",
        "zone capacity:        786432 bytes (768 KiB)",
        "zones:                4",
        "max open zones:       2",
        "max active zones:     3",
        "zone states:          empty 4",
    ] {
        assert!(info.contains(line), "missing `{line}` in:\n{info}");
    }
    let err = fails(
        &["create", &d.spec, "--zones", "4", "--zone-size", "1M"],
        b"",
    );
    assert!(
        err.starts_with(&format!(
            "ziob: emu:{}: create failed: File exists",
            d.path.display()
        )),
        "{err}"
    );
}

#[test]
fn write_append_read_round_trip() {
    let d = device();
    let a = data(8192, 1);
    let b = data(4096, 2);
    assert_eq!(ok(&["write", &d.spec, "--zone", "2"], &a), "");
    assert_eq!(ok(&["append", &d.spec, "--zone", "2"], &b), "8192\n");
    let out = ziob(
        &[
            "read", &d.spec, "--zone", "2", "--offset", "0", "--length", "16K",
        ],
        b"",
    );
    assert!(out.status.success());
    assert_eq!(out.stdout.len(), 16384);
    assert_eq!(&out.stdout[..8192], &a[..]);
    assert_eq!(&out.stdout[8192..12288], &b[..]);
    assert!(
        out.stdout[12288..].iter().all(|&x| x == 0),
        "unwritten bytes read as zeros"
    );
    assert_eq!(ok(&["write", &d.spec, "--zone", "2", "--pad"], b"abc"), "");
    let out = ziob(
        &[
            "read", &d.spec, "--zone", "2", "--offset", "12K", "--length", "4K",
        ],
        b"",
    );
    assert_eq!(&out.stdout[..4], b"abc\0");
    let z = &report_json(&d.spec)[2];
    assert_eq!(z["write_pointer"], 16384);
}

#[test]
fn report_table_and_json() {
    let d = device();
    ok(&["write", &d.spec, "--zone", "1"], &data(4096, 0));
    ok(&["finish", &d.spec, "3"], b"");
    let table = ok(&["report", &d.spec], b"");
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(
        lines[0],
        "  zone    0: start 0x000000000000, cap 0x0000c0000, wptr 0x000000000, zcond:  1(em) Empty"
    );
    assert_eq!(lines[1], "  zone    1: start 0x000000100000, cap 0x0000c0000, wptr 0x000001000, zcond:  4(cl) Closed");
    assert_eq!(
        lines[3],
        "  zone    3: start 0x000000300000, cap 0x0000c0000, wptr 0x0000c0000, zcond: 14(fu) Full"
    );
    let zones = report_json(&d.spec);
    assert_eq!(zones.len(), 4);
    assert_eq!(
        zones[1],
        serde_json::json!({"index": 1, "start": 1048576, "capacity": 786432, "write_pointer": 4096, "state": "closed"})
    );
    assert_eq!(zones[3]["state"], "full");
    assert_eq!(zones[3]["write_pointer"], 786432);
    let one: Vec<serde_json::Value> =
        serde_json::from_str(&ok(&["report", &d.spec, "--zone", "3", "--json"], b"")).unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0]["index"], 3);
}

#[test]
fn a_write_that_does_not_fit_is_refused_whole() {
    let d = device();
    ok(&["write", &d.spec, "--zone", "0"], &data(760 * 1024, 3));
    let err = fails(&["write", &d.spec, "--zone", "0"], &data(16 * 1024, 4));
    assert_eq!(
        err,
        "ziob: input is larger than zone 0 can take: 8192 bytes of capacity remain after its write pointer (byte 778240); nothing was written\n"
    );
    assert_eq!(
        report_json(&d.spec)[0]["write_pointer"],
        760 * 1024,
        "nothing was written"
    );
    // A multi-chunk write (> 1 MiB input) into a fresh zone is refused whole too.
    let err = fails(&["write", &d.spec, "--zone", "1"], &data(2 << 20, 5));
    assert_eq!(
        err,
        "ziob: input is larger than zone 1 can take: 786432 bytes of capacity remain after its write pointer (byte 0); nothing was written\n"
    );
    assert_eq!(report_json(&d.spec)[1]["state"], "empty");
}

#[test]
fn zone_actions_one_and_all() {
    let d = device();
    ok(&["open", &d.spec, "0"], b"");
    ok(&["write", &d.spec, "--zone", "1"], &data(4096, 0));
    let states = |spec: &str| -> Vec<String> {
        report_json(spec)
            .iter()
            .map(|z| z["state"].as_str().unwrap().to_string())
            .collect()
    };
    // Every command is a new process: opened zones come back Closed, as after a power cycle.
    assert_eq!(states(&d.spec), ["closed", "closed", "empty", "empty"]);
    ok(&["finish", &d.spec, "--all"], b"");
    assert_eq!(states(&d.spec), ["full", "full", "empty", "empty"]);
    let err = fails(&["open", &d.spec, "0"], b"");
    assert_eq!(
        err,
        "ziob: Invalid Zone State Transition: cannot open zone 0 in state Full\n"
    );
    let err = fails(&["close", &d.spec, "2"], b"");
    assert_eq!(
        err,
        "ziob: Invalid Zone State Transition: cannot close zone 2 in state Empty\n"
    );
    ok(&["reset", &d.spec, "0"], b"");
    assert_eq!(states(&d.spec), ["empty", "full", "empty", "empty"]);
    ok(&["reset", &d.spec, "--all"], b"");
    assert_eq!(states(&d.spec), ["empty"; 4]);
    let out = ziob(&["reset", &d.spec], b"");
    assert_eq!(out.status.code(), Some(2), "a zone or --all is required");
}

#[test]
fn errors_use_the_api_wording() {
    let d = device();
    ok(&["write", &d.spec, "--zone", "0"], &data(8192, 0));
    let err = fails(&["report", &d.spec, "--zone", "9"], b"");
    assert_eq!(
        err,
        "ziob: LBA Out of Range: zone 9 does not exist, the device has 4 zones\n"
    );
    let err = fails(
        &[
            "read", &d.spec, "--zone", "0", "--offset", "1020K", "--length", "8K",
        ],
        b"",
    );
    assert_eq!(err, "ziob: Zone Boundary Error: read of 2 blocks at block 255 of zone 0 crosses the zone end (block 256)\n");
    let err = fails(
        &[
            "read", &d.spec, "--zone", "0", "--offset", "100", "--length", "4K",
        ],
        b"",
    );
    assert_eq!(err, "ziob: read of 4096 bytes at byte 100 of zone 0 is not a positive multiple of the 4096-byte block size\n");
    let err = fails(&["write", &d.spec, "--zone", "0"], b"abc");
    assert!(
        err.contains("not a multiple of the 4096-byte block size"),
        "{err}"
    );
    let err = fails(&["append", &d.spec, "--zone", "0"], &data(1 << 20, 0));
    assert_eq!(err, "ziob: input is larger than one append to zone 0 may be: the zone append size limit is 524288 bytes (778240 bytes of capacity remain in the zone); nothing was written\n");
    let err = fails(&["info", "emu:/nonexistent/dev.zns"], b"");
    assert_eq!(
        err,
        "ziob: emu:/nonexistent/dev.zns: open failed: No such file or directory (os error 2)\n"
    );
    let err = fails(&["info", "tape:/dev/st0"], b"");
    assert!(
        err.starts_with("ziob: invalid device spec `tape:/dev/st0`: unknown backend `tape`"),
        "{err}"
    );
    let out = ziob(
        &["create", &d.spec, "--zones", "4", "--zone-size", "12Q"],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown size suffix"));
}

#[test]
fn corrupt_device_is_reported_not_reformatted() {
    let d = device();
    corrupt(&d.path);
    let err = fails(&["report", &d.spec], b"");
    assert!(
        err.starts_with(&format!(
            "ziob: {} is not a usable emu device: bad magic",
            d.path.display()
        )),
        "{err}"
    );
    let bytes = std::fs::read(&d.path).unwrap();
    assert_eq!(&bytes[..4], b"JUNK", "the file was left as it was");
}

fn corrupt(path: &Path) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(b"JUNK", 0).unwrap();
}
