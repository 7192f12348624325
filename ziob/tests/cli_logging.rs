//! The `ziob` binary prints the library's `tracing` events on stderr: warnings by default,
//! more with `RUST_LOG`.

mod cli_support;

use std::os::unix::fs::FileExt;

use cli_support::{data, device, ok, run_env, zone_json};
use ziob::backends::emu::format;

/// Flips one byte inside the zone-table slot with the highest sequence number.
fn damage_newest_table(path: &std::path::Path) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut header = vec![0u8; 4096];
    f.read_exact_at(&mut header, 0).unwrap();
    let (geometry, layout) = format::decode_header(&header).unwrap();
    let newest = (0..2u64)
        .max_by_key(|&slot| {
            let mut b = vec![0u8; layout.table_slot_bytes as usize];
            f.read_exact_at(&mut b, layout.slot_offset(slot)).unwrap();
            format::decode_table(&b, geometry.zone_count).map_or(0, |(seq, _)| seq)
        })
        .unwrap();
    let at = layout.slot_offset(newest) + 24;
    let mut byte = [0u8];
    f.read_exact_at(&mut byte, at).unwrap();
    f.write_all_at(&[byte[0] ^ 0x10], at).unwrap();
}

#[test]
fn a_damaged_zone_table_fallback_is_reported_on_stderr() {
    let d = device(&["--zones", "4", "--zone-size", "1M"]);
    ok(&["write", &d.spec, "--zone", "0"], &data(8192, 1));
    assert_eq!(zone_json(&d.spec, 0)["write_pointer"], 8192);
    damage_newest_table(&d.path);
    let out = run_env(&["report", &d.spec, "--zone", "0", "--json"], b"", &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("WARN") && err.contains("using the remaining valid zone table"),
        "the fallback to an older zone table must be visible by default; stderr: {err:?}"
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
    let plain = run_env(&["info", &d.spec], b"", &[]);
    assert!(plain.status.success());
    assert!(plain.stderr.is_empty(), "warn is the default level");
    let traced = run_env(
        &["info", &d.spec],
        b"",
        &[("RUST_LOG", "ziob_runtime=trace")],
    );
    assert!(traced.status.success());
    let err = String::from_utf8_lossy(&traced.stderr);
    assert!(
        err.contains("TRACE") && err.contains("submit"),
        "RUST_LOG=ziob_runtime=trace shows the runtime's op submissions; stderr: {err:?}"
    );
}
