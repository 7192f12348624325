//! Crash loop: writer threads create, append to, sync and delete files while the
//! instance is abandoned (a crash: buffered data lost) at a random moment, mid-operation.
//! After each remount every acknowledged create and delete holds, every file has at least
//! its acknowledged synced size, and its content is a prefix of what was appended.
//! `ZONEFS_CRASH_ROUNDS` sets the number of rounds (default 20).
//!
//! The device is small (22 data zones of 64 KiB) and the writer deletes files once they fill
//! 40 % of it, so zone garbage collection runs on its own, and the writer also calls `gc`:
//! crashes land in the middle of relocations. The zones collected are counted (> 0 over the
//! loop) and after every remount `fsck` is clean.
//!
//! Every call racing the abandon must answer (ziob's `client_abandon_race` covers the bug
//! this loop found there); a writer blocked 20 s after the abandon fails the test.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::{b, bounded, check_after_crash, content, end, open, runtime, EmuFile, Known, Rng};
use ziob_zonefs::{MkfsOptions, WriteLifetime, ZoneFs};

/// Writer threads per round (each on files of its own, so concurrent creates, syncs and
/// deletes share journal writes: group commit under crashes).
const WRITERS: u64 = 3;

/// The writer: ops until one fails (the crash). Stores the zones GC collected this mount in
/// `gc_zones`.
fn writer(
    fs: ZoneFs,
    round: u64,
    t: u64,
    known: Arc<Mutex<BTreeMap<String, Known>>>,
    gc_zones: Arc<AtomicU64>,
) {
    let mut rng = Rng(round * 7919 + t * 104_729 + 1);
    let mine = format!("/t{t}/");
    let total = b(fs.df()).total_bytes;
    for i in 0.. {
        if i % 8 == 0 {
            gc_zones.store(b(fs.stats()).gc_zones, Ordering::Relaxed);
        }
        let full = b(fs.df()).used_bytes > total * 2 / 5;
        let name = format!("r{round}/t{t}/f{}", i % 6);
        let exists = known
            .lock()
            .unwrap()
            .get(&name)
            .is_some_and(|k| k.deleted.is_none());
        let res = if !exists {
            known.lock().unwrap().insert(name.clone(), Known::default());
            let lt = if i % 2 == 0 {
                WriteLifetime::Wal
            } else {
                WriteLifetime::Medium
            };
            let r = b(fs.create(&name, lt));
            if r.is_ok() {
                known.lock().unwrap().get_mut(&name).unwrap().created = true;
            }
            r
        } else {
            match if full { 0 } else { rng.next() % 16 } {
                15 => b(fs.gc(1)).map(|_| ()),
                0 | 8 => {
                    // Delete an older file of any round.
                    let victim = known
                        .lock()
                        .unwrap()
                        .iter()
                        .find(|(n, k)| n.contains(&mine) && k.created && k.deleted.is_none())
                        .map(|(n, _)| n.clone());
                    let Some(v) = victim else { continue };
                    known.lock().unwrap().get_mut(&v).unwrap().deleted = Some(false);
                    let r = b(fs.delete(&v));
                    if r.is_ok() {
                        known.lock().unwrap().get_mut(&v).unwrap().deleted = Some(true);
                    }
                    r
                }
                1..=3 | 9..=11 => {
                    let size = known.lock().unwrap()[&name].appended;
                    let r = b(fs.sync(&name));
                    if r.is_ok() {
                        known.lock().unwrap().get_mut(&name).unwrap().synced = size;
                    }
                    r
                }
                _ => {
                    let len = 1 + rng.next() % 9000;
                    let from = {
                        let mut k = known.lock().unwrap();
                        let e = k.get_mut(&name).unwrap();
                        e.appended += len;
                        e.appended - len
                    };
                    b(fs.append(&name, &content(&name, from, len)))
                }
            }
        };
        if res.is_err() {
            return;
        }
    }
}

#[test]
fn crash_loop_keeps_acknowledged_metadata_and_synced_data() {
    let rounds: u64 = std::env::var("ZONEFS_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let first = EmuFile::create("crash", 24, 64 << 10, None);
    bounded(60 + rounds * 30, move || {
        let file = first;
        let spec = file.spec();
        let rt = runtime(2);
        let client = open(&rt, &spec, true);
        b(ZoneFs::mkfs(&client, MkfsOptions::default())).unwrap();
        end(client, false);
        let known: Arc<Mutex<BTreeMap<String, Known>>> = Arc::default();
        let mut rng = Rng(42);
        let mut gc_total = 0;
        for round in 0..rounds {
            let client = open(&rt, &spec, true);
            let fs = b(ZoneFs::mount(client.clone())).unwrap();
            let rep = b(fs.fsck()).unwrap();
            assert!(rep.is_clean(), "round {round}: {:#?}", rep.problems);
            // Check what the last crash left, then take reality as the new model.
            check_after_crash(&fs, &mut known.lock().unwrap(), &format!("round {round}"));
            // The writer works on its own copy of the model, taken back when it ends.
            let round_known = Arc::new(Mutex::new(known.lock().unwrap().clone()));
            let (done_tx, done_rx) = std::sync::mpsc::channel();
            let gc_zones = Arc::new(AtomicU64::new(0));
            {
                for t in 0..WRITERS {
                    let (fs, round_known, gc_zones, done_tx) = (
                        fs.clone(),
                        round_known.clone(),
                        gc_zones.clone(),
                        done_tx.clone(),
                    );
                    std::thread::spawn(move || {
                        writer(fs, round, t, round_known, gc_zones);
                        let _ = done_tx.send(());
                    });
                }
            }
            std::thread::sleep(Duration::from_millis(5 + rng.next() % 60));
            drop(fs);
            end(client, true);
            for _ in 0..WRITERS {
                match done_rx.recv_timeout(Duration::from_secs(20)) {
                    Ok(()) => {}
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                        panic!("round {round}: a call racing the abandon never answered")
                    }
                    Err(e) => panic!("a writer panicked: {e}"),
                }
            }
            let snapshot = round_known.lock().unwrap().clone();
            *known.lock().unwrap() = snapshot;
            gc_total += gc_zones.load(Ordering::Relaxed);
        }
        println!("{rounds} rounds: GC collected at least {gc_total} zones");
        assert!(gc_total > 0, "GC never ran");
    });
}
