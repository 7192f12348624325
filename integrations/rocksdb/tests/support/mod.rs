//! Shared pieces of the plugin tests: finding `libziob_rocksdb.so` and `db_bench`, skipping
//! when RocksDB is not installed, unique emu device files, running a child under a hang
//! watchdog, and listing the zone file system on a device after the child is gone.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ziob::{Client, Runtime, ZiobConfig};
use ziob_zonefs::ZoneFs;

/// Why the RocksDB tests cannot run here, if they cannot.
pub fn skip_reason() -> Option<String> {
    if let Some(r) = ziob_rocksdb::SHIM_SKIPPED {
        return Some(r.to_string());
    }
    if !Path::new(DB_BENCH).exists() {
        return Some(format!("{DB_BENCH} not found (install rocksdb-tools)"));
    }
    None
}

/// Returns true (after printing `skipped: <reason>`) when the test must not run.
pub fn skipped() -> bool {
    match skip_reason() {
        Some(r) => {
            println!("skipped: {r}");
            true
        }
        None => false,
    }
}

/// RocksDB's benchmark tool (Debian's rocksdb-tools).
pub const DB_BENCH: &str = "/usr/bin/db_bench";

/// The plugin this test run built: `libziob_rocksdb.so` next to the test binary's `deps/`
/// directory (cargo builds the cdylib with the library the tests link), else built now.
pub fn plugin() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    for dir in exe.ancestors().skip(1).take(3) {
        let p = dir.join("libziob_rocksdb.so");
        if p.exists() {
            return p;
        }
    }
    let status = Command::new(env!("CARGO"))
        .args(["build", "-p", "ziob-rocksdb"])
        .status()
        .expect("running cargo build");
    assert!(status.success(), "cargo build -p ziob-rocksdb failed");
    for dir in exe.ancestors().skip(1).take(3) {
        let p = dir.join("libziob_rocksdb.so");
        if p.exists() {
            return p;
        }
    }
    panic!("libziob_rocksdb.so not found near {}", exe.display());
}

/// A fresh emu device path under /var/tmp (the file is not created: the plugin creates it),
/// removed when dropped.
pub struct Device(pub PathBuf);

impl Device {
    /// A unique path for this test.
    pub fn new(tag: &str) -> Device {
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = PathBuf::from(format!(
            "/var/tmp/r-rocksdb-test-{tag}-{}-{n}.zns",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&p);
        Device(p)
    }

    /// The ZIOB device spec. A small geometry (32 zones of 16 MiB), resets punch holes.
    pub fn spec(&self) -> String {
        format!("emu:{},discard=1", self.0.display())
    }

    /// The `--fs_uri` for it, with `opts` appended after `?` when not empty.
    pub fn uri(&self, opts: &str) -> String {
        let mut u = format!("ziob://{}?zones=32&zone_size=16M", self.spec());
        if !opts.is_empty() {
            u.push('&');
            u.push_str(opts);
        }
        u
    }

    /// The zone file system's files under `dir` (mounted in this process, then closed).
    pub fn list(&self, dir: &str) -> Vec<String> {
        let spec = self.spec();
        let dir = dir.to_string();
        let rt = Runtime::builder().cores(1).build().unwrap();
        let out = futures::executor::block_on(async move {
            let client = Client::open(rt.handle(), &spec, ZiobConfig::default())
                .await
                .unwrap();
            let fs = ZoneFs::mount(client.clone()).await.unwrap();
            let names = fs.list(&dir).await.unwrap();
            drop(fs);
            client.close().await.unwrap();
            names
        });
        out
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs `cmd` to its end, killing it after `secs` (a hang watchdog, not a speed check).
pub fn run(mut cmd: Command, secs: u64) -> Output {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().expect("spawning the child");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(out) => out.expect("waiting for the child"),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("hang: {cmd:?} not finished within {secs} s");
        }
    }
}

/// `db_bench` with the plugin preloaded on `uri`, database `db`, and `args`.
pub fn db_bench(uri: &str, db: &str, args: &[&str]) -> Output {
    db_bench_with_env(uri, db, args, &[])
}

/// [`db_bench`] with these environment variables set as well (an empty value: unset).
pub fn db_bench_with_env(uri: &str, db: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(DB_BENCH);
    for (name, value) in env {
        if value.is_empty() {
            cmd.env_remove(name);
        } else {
            cmd.env(name, value);
        }
    }
    cmd.env("LD_PRELOAD", plugin())
        .arg(format!("--fs_uri={uri}"))
        .arg(format!("--db={db}"))
        .args(args);
    let started = Instant::now();
    let out = run(cmd, 120);
    eprintln!(
        "db_bench {args:?}: {:?}, {:.1} s",
        out.status,
        started.elapsed().as_secs_f64()
    );
    out
}

/// The `(found, total)` of db_bench's readrandom line `(N of M found)`.
pub fn found(stdout: &str) -> Option<(u64, u64)> {
    let line = stdout.lines().find(|l| l.starts_with("readrandom"))?;
    let inner = line.rsplit_once('(')?.1.strip_suffix(" found)")?;
    let (n, m) = inner.split_once(" of ")?;
    Some((n.trim().parse().ok()?, m.trim().parse().ok()?))
}

/// Text of a child's output (stdout then stderr), for assertion messages.
pub fn text(out: &Output) -> String {
    format!(
        "{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
