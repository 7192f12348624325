//! Running the `ziob` binary from the CLI tests (`mod cli_support;` in a `cli_*.rs` test).
#![allow(dead_code)] // each test file uses its own part

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long any one `ziob` process may run before the test calls it a hang.
pub const HANG_WATCHDOG: Duration = Duration::from_secs(30);

/// `ziob args` with stdin, stdout and stderr piped.
pub fn spawn(args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ziob"));
    cmd.args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("run ziob")
}

/// Runs `ziob args` with `stdin` as its input. The input may be cut short by the CLI
/// (it stops reading once the input is larger than the zone takes).
pub fn run(args: &[&str], stdin: &[u8]) -> Output {
    run_env(args, stdin, &[])
}

/// [`run`] with extra environment variables.
pub fn run_env(args: &[&str], stdin: &[u8], env: &[(&str, &str)]) -> Output {
    let mut child = spawn(args, env);
    match child.stdin.take().unwrap().write_all(stdin) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("writing stdin: {e}"),
        _ => {}
    }
    wait_or_kill(child, &format!("ziob {args:?}"))
}

/// Waits for `child` at most [`HANG_WATCHDOG`], collecting its stdout and stderr meanwhile;
/// a child still running then is killed and the test fails.
pub fn wait_or_kill(mut child: Child, what: &str) -> Output {
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                p.read_to_end(&mut bytes).unwrap();
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > HANG_WATCHDOG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} still running after {HANG_WATCHDOG:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// Runs `ziob args` with all of `stdin` as its input (writing it must succeed) and returns
/// its exit code (-1 if killed by a signal), stdout and stderr.
pub fn ziob(args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    let mut child = spawn(args, &[]);
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin)
        .expect("writing stdin");
    let out = wait_or_kill(child, &format!("ziob {args:?}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// stdout of a command that must succeed.
pub fn ok(args: &[&str], stdin: &[u8]) -> String {
    let out = run(args, stdin);
    assert!(
        out.status.success(),
        "ziob {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// stderr of a command that must fail with exit code 1 and print nothing on stdout.
pub fn fails(args: &[&str], stdin: &[u8]) -> String {
    let out = run(args, stdin);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "ziob {args:?} should fail with 1: {err}"
    );
    assert!(out.stdout.is_empty(), "a failed command printed to stdout");
    err
}

/// An emu device file in its own temporary directory.
pub struct Dev {
    /// The directory (removed on drop).
    pub dir: tempfile::TempDir,
    /// The device file.
    pub path: PathBuf,
    /// `emu:PATH`.
    pub spec: String,
}

/// Creates an emu device with `args` after `create SPEC` (e.g. `--zones 4 --zone-size 1M`).
pub fn device(args: &[&str]) -> Dev {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.zns");
    let spec = format!("emu:{}", path.display());
    let mut all = vec!["create", spec.as_str()];
    all.extend_from_slice(args);
    ok(&all, b"");
    Dev { dir, path, spec }
}

/// `report --json` of one zone.
pub fn zone_json(spec: &str, zone: u32) -> serde_json::Value {
    let z = zone.to_string();
    let v: Vec<serde_json::Value> =
        serde_json::from_str(&ok(&["report", spec, "--zone", &z, "--json"], b"")).unwrap();
    v[0].clone()
}

/// Runs `ziob args` as a user without write permission on the device: this user if it is
/// not root, else `nobody` through `setpriv`. `None` when that is impossible here. `mine` is
/// a file this process created (its owner is this user).
pub fn run_unprivileged(args: &[&str], mine: &std::path::Path) -> Option<Output> {
    let ziob = env!("CARGO_BIN_EXE_ziob");
    let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(mine).unwrap()) == 0;
    let mut cmd = if root {
        let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())?;
        let mut c = Command::new(setpriv);
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", ziob]);
        c
    } else {
        Command::new(ziob)
    };
    Some(cmd.args(args).env_remove("RUST_LOG").output().unwrap())
}

/// `len` bytes of a pattern that differs per `seed`.
pub fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}
