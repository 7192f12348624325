//! `info`, `report` and `read` need only read permission on an emu device file.
//!
//! Root ignores permission bits, so as root the commands run as `nobody` (uid/gid 65534)
//! through `setpriv`; without `setpriv` the test says so and checks nothing.

mod cli_support;

use std::os::unix::fs::PermissionsExt;

use cli_support::{data, device, ok, run_unprivileged};

#[test]
fn read_only_commands_work_on_a_read_only_file() {
    let d = device(&["--zones", "2", "--zone-size", "1M"]);
    let block = data(4096, 9);
    ok(&["write", &d.spec, "--zone", "1"], &block);
    std::fs::set_permissions(d.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&d.path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let cases: [&[&str]; 3] = [
        &["info", &d.spec],
        &["report", &d.spec, "--json"],
        &[
            "read", &d.spec, "--zone", "1", "--offset", "0", "--length", "4K",
        ],
    ];
    for args in cases {
        let Some(out) = run_unprivileged(args, &d.path) else {
            eprintln!("skipped: running as root without setpriv, permission bits do not apply");
            return;
        };
        assert!(
            out.status.success(),
            "ziob {args:?} on a read-only file: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if args[0] == "read" {
            assert_eq!(out.stdout, block);
        }
    }
    // Writing still needs write permission.
    let out = run_unprivileged(&["reset", &d.spec, "1"], &d.path).unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
