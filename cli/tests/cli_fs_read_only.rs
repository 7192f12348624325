//! `ziob fs ls|df|fsck` never write to the device: the device file's bytes are the same
//! before and after every one of them — on a clean file system, on one left by a crash
//! (unsynced data in zones, which a read-write mount resets) and on a corrupt one — and they
//! work with read permission only.

mod cli_support;
mod fs_support;

use std::os::unix::fs::PermissionsExt;

use cli_support::{data, run, run_unprivileged, Dev};
use fs_support::{bytes, formatted, poke, run_ops, zone_offset, Op};
use ziob_zonefs::WriteLifetime;

/// Every read-only command, with the options that change what it reads or prints.
fn read_only_commands(spec: &str) -> Vec<Vec<String>> {
    let cases: [&[&str]; 10] = [
        &["ls"],
        &["ls", "-l"],
        &["ls", "--json"],
        &["ls", "d", "-l"],
        &["ls", "no/such/dir"],
        &["df"],
        &["df", "--json"],
        &["fsck"],
        &["fsck", "-v"],
        &["ls", "d/../x"],
    ];
    cases
        .iter()
        .map(|c| {
            let mut v = vec!["fs".to_string(), c[0].to_string(), spec.to_string()];
            v.extend(c[1..].iter().map(|s| s.to_string()));
            v
        })
        .collect()
}

/// Runs every read-only command on `d` and checks the device file did not change; returns
/// how many succeeded.
fn assert_untouched(d: &Dev, what: &str) -> usize {
    let before = bytes(&d.path);
    let mut succeeded = 0;
    for args in read_only_commands(&d.spec) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&args, b"");
        assert!(
            matches!(out.status.code(), Some(0 | 1 | 3)),
            "{what}: ziob {args:?}: {out:?}"
        );
        succeeded += out.status.success() as usize;
        assert!(
            bytes(&d.path) == before,
            "{what}: ziob {args:?} changed the device file"
        );
    }
    succeeded
}

fn files(d: &Dev, crash: bool) {
    run_ops(
        &d.spec,
        &[
            Op::Create("d/synced", WriteLifetime::Short),
            Op::Append("d/synced", &data(70_000, 1)),
            Op::Sync("d/synced"),
            Op::Create("d/tail", WriteLifetime::Wal),
            Op::Append("d/tail", &data(3_000, 2)),
            Op::Sync("d/tail"),
            // Unsynced: written back (a whole zone and more), never journaled.
            Op::Append("d/tail", &data(1_200_000, 3)),
            Op::Create("d/never", WriteLifetime::Long),
            Op::Append("d/never", &data(2_100_000, 4)),
        ],
        crash,
    );
}

#[test]
fn read_only_commands_leave_the_device_unchanged() {
    // A clean file system.
    let d = formatted();
    files(&d, false);
    // ls (4 of 5 forms), df (2), fsck (2) succeed.
    assert_eq!(assert_untouched(&d, "clean"), 8);

    // Left by a crash: zones hold data no file has (a read-write mount would reset them and
    // roll the journal).
    let d = formatted();
    files(&d, true);
    assert_eq!(assert_untouched(&d, "after a crash"), 8);
    // The control: a read-write mount does write (so the comparison above can see writes).
    let before = bytes(&d.path);
    run_ops(&d.spec, &[], false);
    assert!(
        bytes(&d.path) != before,
        "a read-write mount changed nothing"
    );

    // Corrupt: the current journal zone's snapshot damaged (nothing mounts; fsck exits 3).
    let d = formatted();
    files(&d, false);
    for zone in 0..2 {
        poke(&d.path, zone_offset(zone) + 60 + 12 + 3, &[0xEE]);
    }
    assert_eq!(assert_untouched(&d, "corrupt"), 0);
}

#[test]
fn read_only_commands_need_only_read_permission() {
    let d = formatted();
    files(&d, false);
    std::fs::set_permissions(d.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&d.path, std::fs::Permissions::from_mode(0o444)).unwrap();
    for args in read_only_commands(&d.spec) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let Some(out) = run_unprivileged(&args, &d.path) else {
            eprintln!("skipped: running as root without setpriv, permission bits do not apply");
            return;
        };
        let err = String::from_utf8_lossy(&out.stderr);
        let expect_fail = args.contains(&"no/such/dir") || args.contains(&"d/../x");
        assert_eq!(
            out.status.success(),
            !expect_fail,
            "ziob {args:?} on a read-only file: {err}"
        );
        assert!(!err.contains("Permission denied"), "{args:?}: {err}");
    }
    // mkfs needs write permission.
    let out = run_unprivileged(&["fs", "mkfs", &d.spec, "--force"], &d.path).unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
