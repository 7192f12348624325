//! Crash test: a RocksDB writer on the plugin (`cpp/crash_writer.cc`, every Put with
//! `sync=true`, printing each key once Put returned) is killed with SIGKILL at a random point;
//! after reopening, every key acknowledged before the kill must be there with its value.
//! Rounds continue the same database, so later rounds also recover after earlier crashes.
//! Seeded: `ZIOB_ROCKSDB_CRASH_SEED` (default 15), `ZIOB_ROCKSDB_CRASH_ROUNDS` (default 10).

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use support::{plugin, run, skipped, text, Device};

/// A small seeded generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs the writer from key `first`, kills it after `acks` acknowledged keys plus `extra_ms`,
/// and returns the last acknowledged key (None if none).
fn write_until_killed(
    writer: &str,
    uri: &str,
    db: &str,
    first: u64,
    acks: u64,
    extra_ms: u64,
) -> Option<u64> {
    let mut child = Command::new(writer)
        .env("LD_PRELOAD", plugin())
        .args(["write", uri, db, &first.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning the crash writer");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel::<u64>();
    let reader = std::thread::spawn(move || {
        // Only whole lines count: a key is acknowledged once its line is complete.
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            match line.trim().parse::<u64>() {
                Ok(k) => {
                    if tx.send(k).is_err() {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
    });
    let mut last = None;
    let mut seen = 0;
    while seen < acks {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(k) => {
                last = Some(k);
                seen += 1;
            }
            Err(_) => {
                let _ = child.kill();
                let out = child.wait_with_output().expect("writer output");
                panic!(
                    "writer gave no ack for 30 s (or died) after {seen} acks:\n{}",
                    text(&out)
                );
            }
        }
    }
    std::thread::sleep(Duration::from_millis(extra_ms));
    child.kill().expect("SIGKILL"); // std's kill is SIGKILL
    let _ = child.wait();
    reader.join().expect("reader thread");
    // Acks printed before the kill are acks too.
    while let Ok(k) = rx.try_recv() {
        last = Some(k);
    }
    last
}

#[test]
fn every_synced_key_survives_sigkill() {
    if skipped() {
        return;
    }
    let Some(writer) = option_env!("ZIOB_ROCKSDB_CRASH_WRITER") else {
        println!("skipped: the crash writer was not built (see the build warnings)");
        return;
    };
    let seed = env_u64("ZIOB_ROCKSDB_CRASH_SEED", 15);
    let rounds = env_u64("ZIOB_ROCKSDB_CRASH_ROUNDS", 10);
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let dev = Device::new("crash");
    let uri = dev.uri("");
    let db = "/crash/db";
    let mut next = 0u64;
    let mut last_acked: Option<u64> = None;
    for round in 0..rounds {
        let acks = 1 + rng.below(300);
        let extra_ms = rng.below(40);
        if let Some(k) = write_until_killed(writer, &uri, db, next, acks, extra_ms) {
            last_acked = Some(k);
            next = k + 1;
        }
        let last = last_acked.expect("at least one ack per round");
        let mut verify = Command::new(writer);
        verify
            .env("LD_PRELOAD", plugin())
            .args(["verify", &uri, db, &last.to_string()]);
        let out = run(verify, 60);
        assert!(
            out.status.success(),
            "seed {seed} round {round}: after a kill past {acks} acks (+{extra_ms} ms), \
             keys 0..={last} are not all there:\n{}",
            text(&out)
        );
        eprintln!("seed {seed} round {round}: keys 0..={last} verified");
    }
}
