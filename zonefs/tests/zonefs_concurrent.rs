//! Concurrent appends (device appends run without the state lock, one per class slot at a
//! time): appender threads of several lifetime classes (two share one) fill files while a
//! deleter thread deletes files mid-append, reads others and runs GC, on a small device. Every append reports the offset it went to (`append_at`); every file left has exactly the bytes its appender was told were appended, before
//! and after a remount, and `fsck` is clean. Seeded per thread and round. (It caught a zone reset under
//! an append in flight: a delete's dead-zone reset must skip zones with appends in flight.)

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use support::{b, bounded, runtime, Rng};
use ziob::{Client, ZiobConfig};
use ziob_zonefs::{FsError, MkfsOptions, WriteLifetime, ZoneFs};

fn byte(t: u64, f: u64, o: u64) -> u8 {
    (t * 31 + f * 7 + o % 241) as u8
}

#[test]
fn concurrent_appends_deletes_and_reads_keep_every_file_exact() {
    // Three seeded rounds per mode: the races it checks do not show up every run.
    let mut gc_zones = 0;
    for round in 0..6u64 {
        let buffered = round % 2 == 0;
        gc_zones += bounded(600, move || {
            let rt = runtime(2);
            let config = ZiobConfig {
                buffered,
                ..ZiobConfig::default()
            };
            let client = b(Client::open(
                rt.handle(),
                "mem:zones=16,zone_size=128K",
                config,
            ))
            .unwrap();
            b(ZoneFs::mkfs(&client, MkfsOptions::default())).unwrap();
            let fs = b(ZoneFs::mount(client.clone())).unwrap().blocking();
            // name -> bytes acknowledged appended (None once deleted).
            let files: Arc<Mutex<BTreeMap<String, Option<Vec<u8>>>>> = Arc::default();
            let classes = [
                WriteLifetime::Wal,
                WriteLifetime::Short,
                WriteLifetime::Medium,
                WriteLifetime::Long,
                WriteLifetime::Long,
                WriteLifetime::Extreme,
            ];
            let appenders: Vec<_> = classes
                .iter()
                .enumerate()
                .map(|(t, lt)| {
                    let (fs, files, lt, t) = (fs.clone(), files.clone(), *lt, t as u64);
                    std::thread::spawn(move || {
                        let mut rng = Rng(t * 7777 + 3 + round * 13);
                        for f in 0..40u64 {
                            let name = format!("t{t}/f{f}");
                            fs.create(&name, lt).unwrap();
                            files.lock().unwrap().insert(name.clone(), Some(Vec::new()));
                            for _ in 0..(1 + rng.next() % 6) {
                                let len = 1 + rng.next() % 12_000;
                                let at = match &files.lock().unwrap()[&name] {
                                    Some(d) => d.len() as u64,
                                    None => break,
                                };
                                let data: Vec<u8> = (at..at + len).map(|o| byte(t, f, o)).collect();
                                // Where it went: this thread is the file's only appender.
                                match fs.append_at(&name, data.clone().into()) {
                                    Ok(offset) => {
                                        assert_eq!(offset, at, "{name}: append_at's offset");
                                        if let Some(Some(d)) = files.lock().unwrap().get_mut(&name)
                                        {
                                            d.extend_from_slice(&data);
                                        }
                                    }
                                    Err(FsError::NotFound(_)) => break,
                                    Err(e) => panic!("append {name}: {e}"),
                                }
                                if rng.next().is_multiple_of(3) {
                                    match fs.sync(&name) {
                                        Ok(()) | Err(FsError::NotFound(_)) => {}
                                        Err(e) => panic!("sync {name}: {e}"),
                                    }
                                }
                            }
                            // Keep the device from filling: drop an older file of ours.
                            if f >= 3 {
                                let old = format!("t{t}/f{}", f - 3);
                                let mut m = files.lock().unwrap();
                                if matches!(m.get(&old), Some(Some(_))) {
                                    m.insert(old.clone(), None);
                                    drop(m);
                                    match fs.delete(&old) {
                                        Ok(()) | Err(FsError::NotFound(_)) => {}
                                        Err(e) => panic!("delete {old}: {e}"),
                                    }
                                }
                            }
                        }
                    })
                })
                .collect();
            let deleter = {
                let (fs, files) = (fs.clone(), files.clone());
                std::thread::spawn(move || {
                    let mut rng = Rng(424242 + round);
                    for i in 0..400 {
                        if i % 8 == 0 {
                            // GC concurrently with the appends (zones in flight are skipped).
                            fs.gc(1).unwrap();
                        }
                        let names: Vec<String> = files
                            .lock()
                            .unwrap()
                            .iter()
                            .filter(|(_, d)| d.is_some())
                            .map(|(n, _)| n.clone())
                            .collect();
                        if names.is_empty() {
                            std::thread::yield_now();
                            continue;
                        }
                        let n = &names[(rng.next() % names.len() as u64) as usize];
                        if rng.next().is_multiple_of(3) {
                            files.lock().unwrap().insert(n.clone(), None);
                            match fs.delete(n) {
                                Ok(()) | Err(FsError::NotFound(_)) => {}
                                Err(e) => panic!("delete {n}: {e}"),
                            }
                        } else {
                            // The file's acknowledged bytes are a prefix of what a read sees.
                            let want = files.lock().unwrap()[n].clone();
                            match (fs.read_at(n, 0, 1 << 20), want) {
                                (Ok(got), Some(want)) => {
                                    assert!(got.len() >= want.len(), "{n}");
                                    if got[..want.len()] != want[..] {
                                        let i =
                                            (0..want.len()).find(|&i| got[i] != want[i]).unwrap();
                                        let fsck = fs.fsck().unwrap().problems;
                                        panic!(
                                            "{n} content (buffered={buffered}): byte {i} of {} (read {}) is {:#x}, want {:#x}; fsck: {fsck:?}",
                                            want.len(),
                                            got.len(),
                                            got[i],
                                            want[i]
                                        );
                                    }
                                }
                                (Ok(_), None) | (Err(FsError::NotFound(_)), _) => {}
                                (Err(e), _) => panic!("read {n}: {e}"),
                            }
                        }
                    }
                })
            };
            for a in appenders {
                a.join().unwrap();
            }
            deleter.join().unwrap();
            let check = |fs: &ziob_zonefs::BlockingZoneFs| {
                for (n, d) in files.lock().unwrap().iter() {
                    match d {
                        Some(d) => {
                            let got = fs.read_at(n, 0, 1 << 20).unwrap();
                            assert!(
                                got[..] == d[..],
                                "{n}: {} bytes, want {}",
                                got.len(),
                                d.len()
                            );
                        }
                        None => assert!(!fs.exists(n).unwrap(), "{n} deleted, yet there"),
                    }
                }
                let rep = fs.fsck().unwrap();
                assert!(rep.is_clean(), "{:#?}", rep.problems);
            };
            check(&fs);
            let stats = b(fs.fs().stats());
            println!("buffered={buffered}: {stats:?}");
            fs.sync_all().unwrap();
            drop(fs);
            let fs = b(ZoneFs::mount(client.clone())).unwrap().blocking();
            check(&fs);
            drop(fs);
            b(client.close()).unwrap();
            stats.gc_zones
        });
    }
    assert!(gc_zones > 0, "GC never ran");
}
