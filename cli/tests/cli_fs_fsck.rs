//! `ziob fs fsck`: exit 0 on a consistent file system, 3 with a report on stdout when it is
//! not (a data zone reset under a file, a corrupt journal), 1 when there is nothing to check.

mod cli_support;
mod fs_support;

use cli_support::{data, fails, run};
use fs_support::{blank, formatted, poke, run_ops, zone_offset, Op};
use ziob_zonefs::WriteLifetime;

/// `fs fsck` with `args`: exit code, stdout, stderr.
fn fsck(args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec!["fs", "fsck"];
    all.extend_from_slice(args);
    let out = run(&all, b"");
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The journal zone `fsck` reports as current.
fn journal_zone(report: &str) -> u32 {
    let line = report
        .lines()
        .find(|l| l.starts_with("journal: zone "))
        .unwrap_or_else(|| panic!("no journal line in {report}"));
    line["journal: zone ".len()..]
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn with_files() -> cli_support::Dev {
    let d = formatted();
    run_ops(
        &d.spec,
        &[
            Op::Create("a/wal", WriteLifetime::Wal),
            Op::Append("a/wal", &data(10_000, 1)),
            Op::Sync("a/wal"),
            Op::Create("a/big", WriteLifetime::Long),
            Op::Append("a/big", &data(1_500_000, 2)),
            Op::Sync("a/big"),
        ],
        false,
    );
    d
}

#[test]
fn fsck_is_clean_on_a_fresh_and_on_a_used_file_system() {
    let d = formatted();
    let (code, out, err) = fsck(&[&d.spec]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(
        out,
        format!(
            "{}: 0 files, 0 extents, 0 B in files (0 bytes)\n\
             journal: zone 0, generation 1, 0 deltas replayed\n\
             clean: 14 data zones checked\n",
            d.spec
        )
    );
    let d = with_files();
    let (code, out, err) = fsck(&[&d.spec, "-v"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains(": 2 files, "), "{out}");
    assert!(out.contains("(1510000 bytes)"), "{out}");
    assert!(out.ends_with("clean: 14 data zones checked\n"), "{out}");
    // -v: a header and one line per data zone.
    let zones: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("ZONE"))
        .skip(1)
        .take_while(|l| !l.starts_with("clean"))
        .collect();
    assert_eq!(zones.len(), 14, "{out}");
    assert!(zones[0].trim_start().starts_with("2 "), "{out}");
}

#[test]
fn fsck_reports_a_data_zone_reset_under_a_file() {
    let d = with_files();
    let (_, before, _) = fsck(&[&d.spec, "-v"]);
    // The WAL's zone: the first data zone with 10000 live bytes.
    let wal_zone = before
        .lines()
        .find(|l| l.trim_end().ends_with(" 10000"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no zone with the WAL's 10000 live bytes in {before}"))
        .to_string();
    cli_support::ok(&["reset", &d.spec, &wal_zone], b"");
    let (code, out, err) = fsck(&[&d.spec]);
    assert_eq!(code, Some(3), "{out}{err}");
    assert!(
        out.contains(&format!(
            "problem: a/wal: extent zone {wal_zone} bytes 0..10000 ends past the zone's write pointer 0"
        )),
        "{out}"
    );
    assert!(out.contains("INCONSISTENT: "), "{out}");
    assert_eq!(err, "");
}

#[test]
fn fsck_reports_a_corrupt_journal() {
    let d = with_files();
    let (_, before, _) = fsck(&[&d.spec]);
    let current = journal_zone(&before);
    // A byte inside the current journal zone's snapshot (after the superblock record's 12 +
    // 48 bytes and the snapshot frame's 12-byte header).
    poke(&d.path, zone_offset(current) + 60 + 12 + 3, &[0xEE]);
    let (code, out, err) = fsck(&[&d.spec]);
    assert_eq!(code, Some(3), "{out}{err}");
    assert!(
        out.starts_with(&format!(
            "{}: not mountable: the zone file system is corrupt",
            d.spec
        )),
        "{out}"
    );
}

#[test]
fn fsck_without_a_file_system_cannot_check() {
    let d = blank();
    let err = fails(&["fs", "fsck", &d.spec], b"");
    assert!(err.contains("no zone file system on"), "{err}");
}
