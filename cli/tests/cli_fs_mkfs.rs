//! `ziob fs mkfs`: formats a blank device, refuses one holding data (raw zone data or a file
//! system) unless `--force`, and says clearly what is wrong with bad input.

mod cli_support;
mod fs_support;

use cli_support::{data, fails, ok, run};
use fs_support::{blank, bytes, df_json, formatted, ls_json, run_ops, Op};
use ziob_zonefs::WriteLifetime;

#[test]
fn mkfs_then_ls_shows_an_empty_file_system() {
    let d = blank();
    let out = ok(&["fs", "mkfs", &d.spec], b"");
    assert_eq!(
        out,
        format!(
            "formatted {}: journal in zones 0..2, 14 data zones of 1.0 MiB (14.0 MiB for files)\n",
            d.spec
        )
    );
    assert_eq!(ok(&["fs", "ls", &d.spec], b""), "");
    assert_eq!(
        ok(&["fs", "ls", &d.spec, "-l"], b""),
        "          SIZE  LIFETIME EXTENTS  NAME\n"
    );
    assert!(ls_json(&d.spec, "/").is_empty());
    let df = df_json(&d.spec);
    assert_eq!(df["data_zones"], 14);
    assert_eq!(df["free_zones"], 14);
    assert_eq!(df["total_bytes"], 14 << 20);
    assert_eq!(df["free_bytes"], 14 << 20);
    assert_eq!(df["used_bytes"], 0);
    assert_eq!(df["reclaimable_bytes"], 0);
    assert_eq!(df["space_amplification"], 1.0);
}

#[test]
fn journal_zones_option_reserves_that_many_zones() {
    let d = blank();
    let out = ok(&["fs", "mkfs", &d.spec, "--journal-zones", "4"], b"");
    assert!(
        out.contains("journal in zones 0..4, 12 data zones"),
        "{out}"
    );
    assert_eq!(df_json(&d.spec)["data_zones"], 12);
}

#[test]
fn mkfs_refuses_a_device_with_data_unless_forced() {
    // Raw data in a data zone.
    let d = blank();
    ok(&["write", &d.spec, "--zone", "7"], &data(4096, 3));
    let before = bytes(&d.path);
    let err = fails(&["fs", "mkfs", &d.spec], b"");
    assert_eq!(
        err,
        format!(
            "ziob: {0} is not empty (data in zone 7); `ziob fs mkfs --force {0}` erases everything on it\n",
            d.spec
        )
    );
    assert_eq!(bytes(&d.path), before, "a refused mkfs wrote to the device");
    ok(&["fs", "mkfs", &d.spec, "--force"], b"");
    assert!(ls_json(&d.spec, "/").is_empty());
    assert_eq!(df_json(&d.spec)["free_zones"], 14);

    // A file system with a file in it: refused (named as such), then erased by --force.
    run_ops(
        &d.spec,
        &[
            Op::Create("keep", WriteLifetime::Short),
            Op::Append("keep", b"precious"),
            Op::Sync("keep"),
        ],
        false,
    );
    let before = bytes(&d.path);
    let err = fails(&["fs", "mkfs", &d.spec], b"");
    assert!(
        err.contains("is not empty (a zone file system)") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(bytes(&d.path), before, "a refused mkfs wrote to the device");
    assert_eq!(ls_json(&d.spec, "/").len(), 1);
    ok(&["fs", "mkfs", &d.spec, "--force"], b"");
    assert!(ls_json(&d.spec, "/").is_empty());
}

#[test]
fn mkfs_twice_is_refused_the_second_time() {
    let d = formatted();
    let err = fails(&["fs", "mkfs", &d.spec], b"");
    assert!(err.contains("(a zone file system)"), "{err}");
}

#[test]
fn bad_input_is_refused_with_a_clear_message() {
    let d = blank();
    // Usage errors (clap): exit 2, the rule in the message.
    for n in ["1", "17", "two"] {
        let out = run(&["fs", "mkfs", &d.spec, "--journal-zones", n], b"");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("--journal-zones"), "{err}");
        assert!(
            err.contains("out of range: 2..=16") || err.contains("not a number"),
            "{err}"
        );
    }
    let out = run(&["fs", "ls"], b"");
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["fs", "frobnicate", &d.spec], b"");
    assert_eq!(out.status.code(), Some(2));
    // A journal that leaves no data zone.
    let small = cli_support::device(&["--zones", "4", "--zone-size", "1M"]);
    let err = fails(&["fs", "mkfs", &small.spec, "--journal-zones", "4"], b"");
    assert!(
        err.starts_with("ziob: unusable configuration: journal_zones 4"),
        "{err}"
    );
    // Devices that do not exist or cannot be parsed.
    let missing = format!("emu:{}", d.dir.path().join("none.zns").display());
    let err = fails(&["fs", "mkfs", &missing], b"");
    assert!(
        err.starts_with("ziob: ") && err.contains("none.zns"),
        "{err}"
    );
    let err = fails(&["fs", "mkfs", "floppy:/dev/fd0"], b"");
    assert!(err.starts_with("ziob: ") && err.contains("floppy"), "{err}");
}
