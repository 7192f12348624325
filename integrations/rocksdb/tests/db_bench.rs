//! RocksDB's own `db_bench` on the plugin (`LD_PRELOAD=libziob_rocksdb.so`, `--fs_uri=ziob://…`):
//! every key written is found, again after a reopen, and the database really lives on the
//! zone file system (db_bench 7.8.3 segfaults instead of failing when the scheme is unknown,
//! so the files are checked on the device and the local path is checked to be absent).

mod support;

use support::{db_bench, db_bench_with_env, found, skipped, text, Device};

/// Flags that make memtable flushes and compactions happen during a small fill.
const SMALL_LSM: [&str; 5] = [
    "--value_size=100",
    "--compression_type=none",
    "--write_buffer_size=262144",
    "--target_file_size_base=262144",
    "--seed=42",
];

fn fill_then_read(dev: &Device, uri: &str, db: &str, num: u64) {
    let n = format!("--num={num}");
    let mut args: Vec<&str> = vec!["--benchmarks=fillrandom", &n];
    args.extend(SMALL_LSM);
    let out = db_bench(uri, db, &args);
    assert!(out.status.success(), "fillrandom failed:\n{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("fillrandom   :"),
        "no fillrandom result:\n{}",
        text(&out)
    );
    // The same seed makes readrandom ask for the keys fillrandom wrote; the second run is a
    // second reopen.
    for round in 0..2 {
        let mut args: Vec<&str> = vec!["--benchmarks=readrandom", "--use_existing_db=1", &n];
        args.extend(SMALL_LSM);
        let out = db_bench(uri, db, &args);
        assert!(out.status.success(), "readrandom failed:\n{}", text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            found(&stdout),
            Some((num, num)),
            "round {round}: not every key found:\n{}",
            text(&out)
        );
    }
    assert!(dev.0.exists(), "the plugin did not create the emu device");
}

#[test]
fn fillrandom_then_readrandom_finds_every_key_on_zones() {
    if skipped() {
        return;
    }
    let dev = Device::new("fill");
    let local = format!("/var/tmp/r-rocksdb-test-localdb-{}", std::process::id());
    let _ = std::fs::remove_dir_all(&local);
    fill_then_read(&dev, &dev.uri(""), &format!("{local}/db"), 20_000);

    // Proof that the plugin stored the database: its files are on the zone file system...
    let files = dev.list(&format!("{local}/db"));
    let count = |pred: &dyn Fn(&String) -> bool| files.iter().filter(|f| pred(f)).count();
    assert!(
        count(&|f| f.ends_with(".sst")) >= 2,
        "no SSTs on zones: {files:?}"
    );
    assert!(
        count(&|f| f.ends_with(".log")) >= 1,
        "no WAL on zones: {files:?}"
    );
    assert!(
        count(&|f| f.starts_with("MANIFEST-")) >= 1,
        "no MANIFEST: {files:?}"
    );
    for name in ["CURRENT", "LOCK", "LOG"] {
        assert!(files.iter().any(|f| f == name), "no {name}: {files:?}");
    }
    // ... and nothing of it is on the local file system.
    assert!(
        !std::path::Path::new(&local).exists(),
        "the local path {local} exists: something went to the default file system"
    );
}

#[test]
fn pass_through_buffer_off_keeps_every_key() {
    if skipped() {
        return;
    }
    let dev = Device::new("passthru");
    fill_then_read(
        &dev,
        &dev.uri("buffer=off"),
        "/r-rocksdb-test/passthru",
        5_000,
    );
}

/// The plugin's events reach stderr as `RUST_LOG` selects (a C++ host installs no `tracing`
/// subscriber of its own): the mount with the cache size chosen, at `info`; nothing at the
/// default level (warnings only; `RUST_LOG` unset).
#[test]
fn the_plugin_logs_to_stderr_as_rust_log_selects() {
    if skipped() {
        return;
    }
    let dev = Device::new("log");
    let args = ["--benchmarks=fillrandom", "--num=100"];
    let out = db_bench_with_env(
        &dev.uri(""),
        "/r-rocksdb-test/log",
        &args,
        &[("RUST_LOG", "ziob_rocksdb=info")],
    );
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mounted = stderr.lines().find(|l| l.contains("ziob-rocksdb: mounted"));
    assert!(
        mounted.is_some_and(|l| l.contains("cache_bytes=")),
        "no mount event on stderr:\n{}",
        text(&out)
    );
    let quiet = db_bench_with_env(
        &dev.uri(""),
        "/r-rocksdb-test/log",
        &[
            "--benchmarks=readrandom",
            "--num=100",
            "--use_existing_db=1",
        ],
        &[("RUST_LOG", "")],
    );
    assert!(quiet.status.success(), "{}", text(&quiet));
    assert!(
        !String::from_utf8_lossy(&quiet.stderr).contains("ziob-rocksdb: mounted"),
        "info events printed at the default level:\n{}",
        text(&quiet)
    );
}

#[test]
fn bad_uri_is_a_clear_error() {
    if skipped() {
        return;
    }
    let dev = Device::new("baduri");
    let out = db_bench(
        &dev.uri("colour=red"),
        "/r-rocksdb-test/bad",
        &["--benchmarks=fillrandom", "--num=10"],
    );
    let all = text(&out);
    assert!(all.contains("unknown option \"colour\""), "{all}");
    assert!(!dev.0.exists(), "a bad URI created the device");
}

#[test]
fn running_out_of_zones_is_a_clear_no_space_error() {
    if skipped() {
        return;
    }
    // 4 zones of 1 MiB: 2 for the journal, 2 MiB of data for a 5 MB fill.
    let dev = Device::new("nospace");
    let uri = format!("ziob://{}?zones=4&zone_size=1M", dev.spec());
    let out = db_bench(
        &uri,
        "/r-rocksdb-test/nospace",
        &[
            "--benchmarks=fillrandom",
            "--num=50000",
            "--value_size=100",
            "--compression_type=none",
            "--write_buffer_size=262144",
        ],
    );
    let all = text(&out);
    assert!(
        !out.status.success(),
        "a full device went unnoticed:\n{all}"
    );
    // RocksDB's NoSpace status, carrying the zone file layer's own message through the C++
    // shim (not "unknown error").
    assert!(all.contains("No space left on device"), "{all}");
    assert!(all.contains("ziob: out of space"), "{all}");
}
