//! `ziob fs ls` and `ziob fs df` show files written through the zonefs API: names, sizes,
//! lifetime classes, extents, and the space they take; bad paths and devices without a file
//! system give clear errors.

mod cli_support;
mod fs_support;

use cli_support::{data, fails, ok};
use fs_support::{blank, df_json, formatted, ls_json, run_ops, Op};
use ziob_zonefs::WriteLifetime;

const SST_BYTES: usize = 5 * (1 << 19) + 1000; // 2.5 MiB + 1000: spans three 1 MiB zones

/// A file system holding a small RocksDB-like tree.
fn populated() -> cli_support::Dev {
    let d = formatted();
    let (wal, manifest, sst, top) = (
        data(5000, 1),
        data(300, 2),
        data(SST_BYTES, 3),
        data(100, 4),
    );
    run_ops(
        &d.spec,
        &[
            Op::Create("db/000001.log", WriteLifetime::Wal),
            Op::Append("db/000001.log", &wal),
            Op::Sync("db/000001.log"),
            Op::Create("db/MANIFEST-000001", WriteLifetime::NotSet),
            Op::Append("db/MANIFEST-000001", &manifest),
            Op::Sync("db/MANIFEST-000001"),
            Op::Create("db/sst/000002.sst", WriteLifetime::Long),
            Op::Append("db/sst/000002.sst", &sst),
            Op::Sync("db/sst/000002.sst"),
            Op::Create("top", WriteLifetime::Short),
            Op::Append("top", &top),
            Op::Sync("top"),
            // Created (durable) but its data never synced: lost at the next mount.
            Op::Create("db/unsynced", WriteLifetime::Medium),
            Op::Append("db/unsynced", &data(4096, 5)),
        ],
        false,
    );
    d
}

#[test]
fn ls_shows_names_sizes_classes_and_extents() {
    let d = populated();
    assert_eq!(ok(&["fs", "ls", &d.spec], b""), "db/\ntop\n");
    assert_eq!(ok(&["fs", "ls", &d.spec, "/"], b""), "db/\ntop\n");
    assert_eq!(
        ok(&["fs", "ls", &d.spec, "db"], b""),
        "000001.log\nMANIFEST-000001\nsst/\nunsynced\n"
    );
    assert_eq!(
        ok(&["fs", "ls", &d.spec, "/db/"], b""),
        ok(&["fs", "ls", &d.spec, "db"], b"")
    );
    let long = ok(&["fs", "ls", &d.spec, "db", "-l"], b"");
    let lines: Vec<&str> = long.lines().collect();
    assert_eq!(
        lines,
        [
            "          SIZE  LIFETIME EXTENTS  NAME",
            "          5000  wal            1  000001.log",
            "           300  not-set        1  MANIFEST-000001",
            "             -  dir            -  sst/",
            "             0  medium         0  unsynced",
        ],
        "{long}"
    );
    let sst = ls_json(&d.spec, "db/sst");
    assert_eq!(sst.len(), 1);
    assert_eq!(sst[0]["name"], "000002.sst");
    assert_eq!(sst[0]["type"], "file");
    assert_eq!(sst[0]["size"], SST_BYTES);
    assert_eq!(sst[0]["lifetime"], "long");
    let extents = sst[0]["extents"].as_u64().unwrap();
    assert!(
        (3..=4).contains(&extents),
        "2.5 MiB in 1 MiB zones: 3 or 4 extents, got {extents}"
    );
    let root = ls_json(&d.spec, "");
    assert_eq!(
        root,
        [
            serde_json::json!({"name": "db", "type": "dir"}),
            serde_json::json!({"name": "top", "type": "file", "size": 100, "lifetime": "short", "extents": 1}),
        ]
    );
    // A file as the argument: that file.
    assert_eq!(
        ok(&["fs", "ls", &d.spec, "db/000001.log", "-l"], b"")
            .lines()
            .nth(1),
        Some("          5000  wal            1  db/000001.log")
    );
}

#[test]
fn ls_of_bad_paths_fails_clearly() {
    let d = populated();
    let err = fails(&["fs", "ls", &d.spec, "nothing/here"], b"");
    assert_eq!(err, "ziob: no such file or directory: nothing/here\n");
    let err = fails(&["fs", "ls", &d.spec, "db/../top"], b"");
    assert!(err.starts_with("ziob: invalid path \"db/../top\""), "{err}");
}

#[test]
fn df_counts_the_files_and_the_dead_bytes() {
    let d = populated();
    let used = 5000 + 300 + SST_BYTES as u64 + 100;
    let df = df_json(&d.spec);
    assert_eq!(df["used_bytes"], used);
    assert_eq!(df["total_bytes"], 14u64 << 20);
    assert_eq!(df["data_zones"], 14);
    // wal, not-set, long (3 zones), short: at least 6 data zones written.
    let free_zones = df["free_zones"].as_u64().unwrap();
    assert!(free_zones <= 8, "{df}");
    assert_eq!(df["free_bytes"], free_zones << 20, "{df}");
    let reclaimable = df["reclaimable_bytes"].as_u64().unwrap();
    let amp = df["space_amplification"].as_f64().unwrap();
    assert!(
        (amp - (used + reclaimable) as f64 / used as f64).abs() < 1e-9,
        "{df}"
    );

    // A dead file next to a live one in the same zone (one class, one zone): its bytes
    // become reclaimable, and the amplification grows.
    let dead = data(300_000, 7);
    run_ops(
        &d.spec,
        &[
            Op::Create("log/a", WriteLifetime::Extreme),
            Op::Append("log/a", &dead),
            Op::Sync("log/a"),
            Op::Create("log/b", WriteLifetime::Extreme),
            Op::Append("log/b", b"still here"),
            Op::Sync("log/b"),
            Op::Delete("log/a"),
        ],
        false,
    );
    let after = df_json(&d.spec);
    assert_eq!(after["used_bytes"], used + 10, "{after}");
    let reclaimable_after = after["reclaimable_bytes"].as_u64().unwrap();
    assert!(
        reclaimable_after >= reclaimable + dead.len() as u64,
        "the deleted file's bytes are reclaimable: {df} -> {after}"
    );
    assert!(after["space_amplification"].as_f64().unwrap() > amp);

    let text = ok(&["fs", "df", &d.spec], b"");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7, "{text}");
    assert!(
        lines[0].starts_with("total:")
            && lines[0].contains("14.0 MiB")
            && lines[0].contains("(14680064 bytes)"),
        "{text}"
    );
    assert!(lines[1].starts_with("free:"), "{text}");
    assert!(
        lines[2].starts_with("used:") && lines[2].contains(&format!("({} bytes)", used + 10)),
        "{text}"
    );
    assert!(
        lines[3].starts_with("reclaimable:")
            && lines[3].contains(&format!("({reclaimable_after} bytes)")),
        "{text}"
    );
    let in_full = after["reclaimable_in_full_zones_bytes"].as_u64().unwrap();
    assert!(in_full <= reclaimable_after, "{after}");
    assert!(
        lines[4].starts_with("  in full zones:")
            && lines[4].contains(&format!("({in_full} bytes)")),
        "{text}"
    );
    let amp_after = after["space_amplification"].as_f64().unwrap();
    let amp_full = after["space_amplification_full_zones"].as_f64().unwrap();
    assert!(amp_full <= amp_after, "{after}");
    assert!(
        lines[5].starts_with(&format!("space amplification: {amp_after:.2}"))
            && lines[5].contains(&format!("{amp_full:.2} counting full zones only")),
        "{text}"
    );
    assert!(lines[6].starts_with("data zones:         14 ("), "{text}");
}

#[test]
fn devices_without_a_file_system_are_refused() {
    let d = blank();
    for cmd in ["ls", "df"] {
        let err = fails(&["fs", cmd, &d.spec], b"");
        assert_eq!(
            err,
            format!(
                "ziob: no zone file system on {0} (its journal zones are empty); format it with `ziob fs mkfs {0}`\n",
                d.spec
            )
        );
    }
    // Something else in the journal zones.
    ok(&["write", &d.spec, "--zone", "0"], &data(8192, 9));
    for cmd in ["ls", "df"] {
        let err = fails(&["fs", cmd, &d.spec], b"");
        assert!(
            err.starts_with("ziob: ") && err.contains("file system"),
            "{err}"
        );
    }
}

#[test]
fn a_name_that_is_a_file_and_a_directory_shows_as_both() {
    // The namespace is flat: "x" may be a file while "x/y" makes "x" a directory too.
    let d = formatted();
    run_ops(
        &d.spec,
        &[
            Op::Create("x", WriteLifetime::None),
            Op::Append("x", b"12345"),
            Op::Sync("x"),
            Op::Create("x/y", WriteLifetime::Extreme),
        ],
        false,
    );
    assert_eq!(ok(&["fs", "ls", &d.spec], b""), "x\nx/\n");
    assert_eq!(ok(&["fs", "ls", &d.spec, "x"], b""), "y\n");
    assert_eq!(
        ls_json(&d.spec, "/"),
        [
            serde_json::json!({"name": "x", "type": "file", "size": 5, "lifetime": "none", "extents": 1}),
            serde_json::json!({"name": "x", "type": "dir"}),
        ]
    );
}
