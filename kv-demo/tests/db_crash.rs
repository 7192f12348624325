//! Crash test with real process death: a child process (this test binary, re-run with
//! `KV_CRASH_CHILD` set) writes to a store on an `emu:` device with `sync = true` — puts,
//! deletes and batches spanning shards — announcing each write before it (`@@W`) and each
//! acknowledgment after (`@@A`) on stdout; the parent SIGKILLs it at a random point (after a
//! random number of acknowledgments, or after a random delay that may land in the format or
//! in the recovery of the previous round's crash), reopens the store and checks: every key
//! has the value of its last acknowledged write or of a write announced after it (the one in
//! flight), keys not written in the round kept their value, and no batch is half-applied.
//! Rounds go on on the same device, the ZIOB buffer on and off in turn. `KV_CRASH_ROUNDS`
//! sets the number of rounds (default 24).

mod durable_support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use durable_support::{b, bounded, EmuPath, Rng};
use kv_demo::{Db, Options, WriteBatch, WriteOptions};

const POOL: u64 = 120;

fn options(buffered: bool) -> Options {
    Options {
        shards: 2,
        write_buffer_bytes: 16 << 10,
        target_file_bytes: 16 << 10,
        cache_bytes: 256 << 10,
        buffered,
        emu_zones: 48,
        emu_zone_bytes: 1 << 20,
        ..Options::default()
    }
}

/// One write: `(key, value)`, value `None` = delete.
type Ops = Vec<(String, Option<String>)>;

fn encode(id: u64, ops: &Ops) -> String {
    let mut s = format!("@@W {id}");
    for (k, v) in ops {
        s.push(' ');
        s.push_str(k);
        s.push('=');
        s.push_str(v.as_deref().unwrap_or("-"));
    }
    s
}

/// Decodes a `W` line (the test harness may print on the same line before it).
fn decode(line: &str) -> Option<(u64, Ops)> {
    let at = line.find("@@W ")?;
    let mut parts = line[at + 2..].split(' ');
    if parts.next()? != "W" {
        return None;
    }
    let id = parts.next()?.parse().ok()?;
    let ops = parts
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap();
            (k.to_string(), (v != "-").then(|| v.to_string()))
        })
        .collect();
    Some((id, ops))
}

/// The id of an `A` line.
fn ack_of(line: &str) -> Option<u64> {
    let at = line.find("@@A ")?;
    line[at + 4..].trim().parse().ok()
}

/// The child: writes until killed.
#[test]
fn crash_child() {
    let Ok(spec) = std::env::var("KV_CRASH_CHILD") else {
        return; // a normal test run: nothing to do
    };
    let round: u64 = std::env::var("KV_CRASH_ROUND").unwrap().parse().unwrap();
    let buffered = std::env::var("KV_CRASH_BUFFERED").unwrap() == "1";
    let rt = ziob::Runtime::builder().cores(2).build().unwrap();
    let db = b(Db::open(rt.handle(), &spec, options(buffered))).unwrap();
    let mut rng = Rng(round * 7919 + 17);
    let sync = WriteOptions { sync: true };
    for id in 0.. {
        let value = |k: u64| format!("r{round}w{id}k{k}{}", "x".repeat((id % 50) as usize));
        let mut ops: Ops = Vec::new();
        match rng.below(100) {
            0..=59 => {
                let k = rng.below(POOL);
                ops.push((format!("k{k:04}"), Some(value(k))));
            }
            60..=74 => ops.push((format!("k{:04}", rng.below(POOL)), None)),
            _ => {
                for j in 0..1 + rng.below(6) {
                    let k = rng.below(POOL);
                    let v = (j % 3 != 2).then(|| value(k));
                    ops.push((format!("k{k:04}"), v));
                }
                for j in 0..1 + rng.below(3) {
                    ops.push((format!("f{round}-{id}-{j}"), Some(value(j))));
                }
            }
        }
        println!("{}", encode(id, &ops));
        if ops.len() == 1 {
            let (k, v) = ops[0].clone();
            match v {
                Some(v) => b(db.put(k.into_bytes(), v.into_bytes(), &sync)).unwrap(),
                None => b(db.delete(k.into_bytes(), &sync)).unwrap(),
            }
        } else {
            let mut batch = WriteBatch::new();
            for (k, v) in &ops {
                match v {
                    Some(v) => batch.put(k.clone().into_bytes(), v.clone().into_bytes()),
                    None => batch.delete(k.clone().into_bytes()),
                }
                .unwrap();
            }
            b(db.write(batch, &sync)).unwrap();
        }
        println!("@@A {id}");
    }
}

/// What the child printed: writes in order and which were acknowledged.
fn run_child(
    spec: &str,
    round: u64,
    buffered: bool,
    kill_after: Kill,
) -> (Vec<(u64, Ops)>, BTreeSet<u64>) {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env("KV_CRASH_CHILD", spec)
        .env("KV_CRASH_ROUND", round.to_string())
        .env("KV_CRASH_BUFFERED", if buffered { "1" } else { "0" })
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    match kill_after {
        Kill::Acks(n) => {
            let mut acks = 0;
            while acks < n {
                match rx.recv_timeout(Duration::from_secs(60)) {
                    Ok(l) => {
                        acks += ack_of(&l).is_some() as u64;
                        lines.push(l);
                    }
                    Err(e) => panic!("child round {round}: no output ({e:?})"),
                }
            }
        }
        Kill::Delay(ms) => std::thread::sleep(Duration::from_millis(ms)),
    }
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(!status.success(), "the child ended by itself: {status:?}");
    reader.join().unwrap();
    lines.extend(rx.try_iter());
    let mut writes = Vec::new();
    let mut acked = BTreeSet::new();
    for l in &lines {
        if let Some(w) = decode(l) {
            writes.push(w);
        } else if let Some(id) = ack_of(l) {
            acked.insert(id);
        }
    }
    (writes, acked)
}

#[derive(Debug, Clone, Copy)]
enum Kill {
    Acks(u64),
    Delay(u64),
}

type Map = BTreeMap<String, String>;

/// Checks the store after a round against the state before it and the round's writes.
fn check(round: u64, base: &Map, writes: &[(u64, Ops)], acked: &BTreeSet<u64>, got: &Map) {
    let mut keys: BTreeSet<&String> = base.keys().chain(got.keys()).collect();
    for (_, ops) in writes {
        keys.extend(ops.iter().map(|(k, _)| k));
    }
    for k in keys {
        let touching: Vec<(u64, Option<&String>)> = writes
            .iter()
            .flat_map(|(id, ops)| {
                ops.iter()
                    .filter(|(key, _)| key == k)
                    .map(move |(_, v)| (*id, v.as_ref()))
            })
            .collect();
        let last_acked = touching.iter().rposition(|(id, _)| acked.contains(id));
        let allowed: Vec<Option<&String>> = match last_acked {
            Some(p) => touching[p..].iter().map(|(_, v)| *v).collect(),
            None => std::iter::once(base.get(k))
                .chain(touching.iter().map(|(_, v)| *v))
                .collect(),
        };
        assert!(
            allowed.contains(&got.get(k)),
            "round {round}, key {k}: got {:?}, allowed {allowed:?}",
            got.get(k)
        );
    }
    for (id, ops) in writes {
        let fresh: Vec<&String> = ops
            .iter()
            .map(|(k, _)| k)
            .filter(|k| k.starts_with('f'))
            .collect();
        let present = fresh.iter().filter(|k| got.contains_key(**k)).count();
        assert!(
            present == 0 || present == fresh.len(),
            "round {round}: batch {id} half-applied ({present} of {})",
            fresh.len()
        );
        if acked.contains(id) {
            assert_eq!(present, fresh.len(), "round {round}: acked batch {id} lost");
        }
    }
}

fn scan_all(db: &Db) -> Map {
    b(async {
        let mut s = db.scan(None, None, None).await.unwrap();
        let mut out = Map::new();
        while let Some((k, v)) = s.next().await.unwrap() {
            out.insert(
                String::from_utf8(k.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            );
        }
        out
    })
}

#[test]
fn acknowledged_sync_writes_survive_sigkill() {
    let rounds: u64 = std::env::var("KV_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let path = EmuPath::new("db-crash");
    let spec = path.spec();
    bounded(60 + rounds * 30, move || {
        let rt = ziob::Runtime::builder().cores(2).build().unwrap();
        let mut base = Map::new();
        let mut rng = Rng(0xc4a5);
        let mut total_acked = 0;
        for round in 0..rounds {
            let buffered = round % 2 == 0;
            // Mostly after some acknowledgments; every fourth round after a delay that may
            // cut the format (round 0) or the recovery of the last crash short.
            let kill = if round % 4 == 0 {
                Kill::Delay(rng.below(600))
            } else {
                Kill::Acks(1 + rng.below(300))
            };
            let (writes, acked) = run_child(&spec, round, buffered, kill);
            total_acked += acked.len();
            let db = b(Db::open(rt.handle(), &spec, options(buffered)))
                .unwrap_or_else(|e| panic!("round {round} ({kill:?}): reopen: {e}"));
            let got = scan_all(&db);
            check(round, &base, &writes, &acked, &got);
            b(db.close()).unwrap();
            base = got;
        }
        assert!(
            total_acked > rounds as usize,
            "the children wrote little: {total_acked}"
        );
        eprintln!("{rounds} rounds, {total_acked} acknowledged writes checked");
    });
}
