//! Tests for the guest harness.
//!
//! `zoned_devices_in_guest` is meant to run *inside* the guest (`cargo xtask vm-test -p xtask`):
//! outside (no `ZIOB_GUEST`) it returns early. `vm_run_end_to_end` boots guests from the host;
//! it is ignored by default because it needs root, QEMU and the cached guest assets
//! (`cargo xtask vm-setup`): run it with `cargo test -p xtask -- --ignored`.

use std::fs;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::process::Command;

fn env(k: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| panic!("{k} not set in the guest"))
}

fn sysfs(dev: &str, attr: &str) -> String {
    let name = Path::new(dev)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    fs::read_to_string(format!("/sys/block/{name}/queue/{attr}"))
        .unwrap_or_else(|e| panic!("{name}/queue/{attr}: {e}"))
        .trim()
        .to_string()
}

/// A 4 KiB-aligned buffer for O_DIRECT.
fn aligned(len: usize, fill: u8) -> (*mut u8, std::alloc::Layout) {
    let layout = std::alloc::Layout::from_size_align(len, 4096).unwrap();
    // SAFETY: the layout has a non-zero size (a block).
    let p = unsafe { std::alloc::alloc(layout) };
    assert!(!p.is_null());
    // SAFETY: `p` points to `len` freshly allocated bytes.
    unsafe { std::ptr::write_bytes(p, fill, len) };
    (p, layout)
}

#[test]
fn zoned_devices_in_guest() {
    if std::env::var_os("ZIOB_GUEST").is_none() {
        eprintln!("not in the ZIOB guest: skipped (run with `cargo xtask vm-test -p xtask`)");
        return;
    }
    let zns = env("ZIOB_ZNS_BLOCK");
    let zone_size: u64 = env("ZIOB_ZNS_ZONE_SIZE").parse().unwrap();
    let bs: usize = env("ZIOB_BLOCK_SIZE").parse().unwrap();
    assert_eq!(sysfs(&zns, "zoned"), "host-managed");
    let chunk: u64 = sysfs(&zns, "chunk_sectors").parse().unwrap();
    assert_eq!(chunk * 512, zone_size, "zone size of {zns}");
    assert_eq!(sysfs(&zns, "logical_block_size"), bs.to_string());
    assert_eq!(sysfs(&zns, "max_open_zones"), env("ZIOB_ZNS_MAX_OPEN"));
    assert_eq!(sysfs(&zns, "max_active_zones"), env("ZIOB_ZNS_MAX_ACTIVE"));
    let nr_zones: u64 = sysfs(&zns, "nr_zones").parse().unwrap();
    assert_eq!(nr_zones.to_string(), env("ZIOB_ZNS_ZONES"));
    assert!(Path::new(&env("ZIOB_ZNS_CHAR")).exists());
    assert_eq!(sysfs(&env("ZIOB_CONV_BLOCK"), "zoned"), "none");
    let nullb = env("ZIOB_NULLBLK_ZONED");
    assert_eq!(sysfs(&nullb, "zoned"), "host-managed");
    let nchunk: u64 = sysfs(&nullb, "chunk_sectors").parse().unwrap();
    assert_eq!(
        nchunk * 512,
        env("ZIOB_NULLBLK_ZONE_SIZE").parse::<u64>().unwrap()
    );

    // Sequential-write-required: a write at the write pointer works, one behind it fails.
    // Earlier test binaries of the same guest may have left zones open or active (with a
    // tight active limit a write to an Empty zone would then be refused): reset them all.
    let reset = Command::new("blkzone")
        .args(["reset", &zns])
        .status()
        .expect("running blkzone (util-linux)");
    assert!(reset.success(), "blkzone reset {zns} failed");
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&zns)
        .unwrap();
    let (p, layout) = aligned(bs, 0xA5);
    // SAFETY: `aligned` returned `bs` initialised bytes at `p`, freed only below.
    let buf = unsafe { std::slice::from_raw_parts(p, bs) };
    f.write_all_at(buf, 0)
        .expect("write at the write pointer of zone 0");
    f.write_all_at(buf, bs as u64)
        .expect("next sequential write");
    let err = f
        .write_all_at(buf, 0)
        .expect_err("rewrite behind the write pointer must fail");
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    // SAFETY: `p` was allocated with `layout` by `aligned`, and `buf` is not used after this.
    unsafe { std::alloc::dealloc(p, layout) };
}

fn xtask(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .output()
        .expect("running xtask");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

#[test]
#[ignore = "boots QEMU guests: needs root, qemu-system-x86 and `cargo xtask vm-setup`"]
fn vm_run_end_to_end() {
    let (rc, out) = xtask(&[
        "vm-run",
        "--timeout-secs",
        "180",
        "--zone-size",
        "16M",
        "--zone-capacity",
        "12M",
        "--zones",
        "8",
        "--",
        "sh",
        "-c",
        "cat /sys/block/$(basename $ZIOB_ZNS_BLOCK)/queue/zoned /sys/block/$(basename $ZIOB_ZNS_BLOCK)/queue/chunk_sectors; exit 7",
    ]);
    assert_eq!(rc, 7, "exit status of the guest command is returned");
    assert_eq!(
        out.split_whitespace().collect::<Vec<_>>(),
        ["host-managed", "32768"]
    );
}
