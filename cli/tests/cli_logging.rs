//! The `ziob` binary prints the library's `tracing` events on stderr: warnings by default,
//! more with `RUST_LOG`.

mod cli_support;

use std::os::unix::fs::FileExt;

use cli_support::{data, device, ok, run_env};
use ziob::backends::emu::format;

/// Flips one byte of zone 0's entry in the zone-table slot with the lower sequence number
/// (the older copy): its checksum no longer matches, and an open must fall back to the
/// newer slot — without losing anything — and say so.
fn damage_older_table(path: &std::path::Path) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut header = vec![0u8; 4096];
    f.read_exact_at(&mut header, 0).unwrap();
    let (geometry, layout) = format::decode_header(&header).unwrap();
    let older = (0..2u64)
        .min_by_key(|&slot| {
            let mut b = vec![0u8; layout.table_slot_bytes as usize];
            f.read_exact_at(&mut b, layout.slot_offset(slot)).unwrap();
            format::decode_table(&b, geometry.zone_count)
                .map(|(seq, _)| seq)
                .unwrap()
        })
        .unwrap();
    // The first entry (after magic, version, zone count and sequence): zone 0's written bytes.
    let at = layout.slot_offset(older) + 24 + 8;
    let mut byte = [0u8];
    f.read_exact_at(&mut byte, at).unwrap();
    f.write_all_at(&[byte[0] ^ 0x10], at).unwrap();
}

#[test]
fn a_damaged_zone_table_slot_is_reported_on_stderr() {
    let d = device(&["--zones", "4", "--zone-size", "1M"]);
    ok(&["write", &d.spec, "--zone", "0"], &data(8192, 1));
    damage_older_table(&d.path);
    let out = run_env(&["report", &d.spec, "--zone", "0", "--json"], b"", &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let zones: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(zones[0]["write_pointer"], 8192, "the newer table is used");
    assert!(
        err.contains("WARN")
            && err.contains("table")
            && err.contains(&d.path.display().to_string()),
        "a damaged zone-table slot must be visible by default; stderr: {err:?}"
    );
    // RUST_LOG selects what is shown.
    let quiet = run_env(&["report", &d.spec], b"", &[("RUST_LOG", "error")]);
    assert!(quiet.status.success());
    assert!(
        quiet.stderr.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&quiet.stderr)
    );
}

#[test]
fn rust_log_turns_on_more_detail() {
    let d = device(&["--zones", "2", "--zone-size", "1M"]);
    let plain = run_env(&["write", &d.spec, "--zone", "0"], &data(4096, 2), &[]);
    assert!(plain.status.success());
    assert!(plain.stderr.is_empty(), "warn is the default level");
    let traced = run_env(
        &["write", &d.spec, "--zone", "1"],
        &data(4096, 3),
        &[("RUST_LOG", "ziob_runtime=trace")],
    );
    assert!(traced.status.success());
    let err = String::from_utf8_lossy(&traced.stderr);
    assert!(
        err.contains("TRACE") && err.contains("submit"),
        "RUST_LOG=ziob_runtime=trace shows the runtime's op submissions; stderr: {err:?}"
    );
}
