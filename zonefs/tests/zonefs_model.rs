//! Model-based test: random create / append / sync / read / delete / rename / list runs
//! against a `BTreeMap<String, Vec<u8>>`, with clean remounts and crashes (the instance
//! abandoned without a sync, on an `emu:` file; a clean remount is `sync_all` + close), buffered and pass-through. After a crash
//! every file created, deleted or renamed before is as the model says (metadata operations
//! are durable when they return; a file made by `create_unsynced` only once a later call
//! commits the journal — until then a crash may or may not keep it) and holds at least its
//! last synced size, with content that
//! is a prefix of what was appended. Space accounting is checked after every operation: live
//! bytes equal the bytes in files and no zone without live data is kept. Zone garbage
//! collection runs in it: explicitly (`Gc`) and, on the small device (16 KiB zones), on its
//! own when free zones run low; an append the full device refuses (`NoSpace`) keeps the
//! prefix it wrote. After every remount `fsck` is clean (read-only before a crash's
//! read-write mount, read-write after).

mod support;

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use support::{b, bounded, end, open, runtime, EmuFile};
use ziob_zonefs::{FsError, MkfsOptions, WriteLifetime, ZoneFs, ZoneUse};

/// (zones, zone bytes) of the roomy and the small device.
const DEVICES: [(u32, u64); 2] = [(48, 64 << 10), (14, 16 << 10)];
const PATHS: [&str; 6] = [
    "a",
    "db/CURRENT",
    "db/000001.log",
    "db/sst/1.sst",
    "db/sst/2.sst",
    "z",
];
const DIRS: [&str; 4] = ["", "db", "db/sst", "a"];

#[derive(Debug, Clone)]
enum Op {
    Create(usize, u8),
    CreateUnsynced(usize, u8),
    SyncMetadata,
    Append(usize, usize, u8),
    Sync(usize),
    Read(usize, u64, usize),
    Delete(usize),
    Rename(usize, usize),
    List(usize),
    Gc(usize),
    Remount,
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    let p = 0..PATHS.len();
    prop_oneof![
        3 => (p.clone(), 0u8..7).prop_map(|(p, l)| Op::Create(p, l)),
        3 => (p.clone(), 0u8..7).prop_map(|(p, l)| Op::CreateUnsynced(p, l)),
        1 => Just(Op::SyncMetadata),
        6 => (p.clone(), 1usize..6000, any::<u8>()).prop_map(|(p, n, s)| Op::Append(p, n, s)),
        3 => p.clone().prop_map(Op::Sync),
        3 => (p.clone(), 0u64..8000, 0usize..5000).prop_map(|(p, o, n)| Op::Read(p, o, n)),
        1 => p.clone().prop_map(Op::Delete),
        1 => (p.clone(), p).prop_map(|(a, b)| Op::Rename(a, b)),
        1 => (0..DIRS.len()).prop_map(Op::List),
        2 => (1usize..4).prop_map(Op::Gc),
        1 => Just(Op::Remount),
        1 => Just(Op::Crash),
    ]
}

/// A file in the model: every byte appended, and how many of them were synced.
#[derive(Debug, Clone, Default)]
struct File {
    data: Vec<u8>,
    synced: usize,
}

fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| seed.wrapping_add((i % 251) as u8)).collect()
}

fn is_not_found(r: &Result<impl std::fmt::Debug, FsError>) -> bool {
    matches!(r, Err(FsError::NotFound(_)))
}

/// Checks df and the zone table against the model.
fn check_space(fs: &ZoneFs, model: &BTreeMap<String, File>) {
    let df = b(fs.df());
    let in_files: u64 = model.values().map(|f| f.data.len() as u64).sum();
    assert_eq!(df.used_bytes, in_files, "live bytes = bytes in files");
    assert!(df.free_bytes + df.used_bytes + df.reclaimable_bytes <= df.total_bytes);
    for (zone, usage, written, live) in b(fs.zones()) {
        match usage {
            ZoneUse::Closed => assert!(live > 0, "zone {zone} closed without live data"),
            ZoneUse::Open(_) => assert!(live > 0 || written == 0, "zone {zone} open, dead"),
            ZoneUse::Free => assert_eq!((written, live), (0, 0)),
            ZoneUse::Unusable => {}
        }
    }
}

fn run(ops: Vec<Op>, buffered: bool, small: bool) {
    let (zones, zone_bytes) = DEVICES[small as usize];
    let file = EmuFile::create("model", zones, zone_bytes, None);
    let spec = file.spec();
    bounded(300, move || {
        let rt = runtime(2);
        let mut client = open(&rt, &spec, buffered);
        b(ZoneFs::mkfs(
            &client,
            MkfsOptions {
                journal_zones: 2,
                force: false,
                ..MkfsOptions::default()
            },
        ))
        .unwrap();
        let mut fs = b(ZoneFs::mount(client.clone())).unwrap();
        let mut model: BTreeMap<String, File> = BTreeMap::new();
        // Files made by `create_unsynced` whose creation no call has committed since: a crash
        // may or may not keep them. A call that waits for the journal commits every delta
        // queued before its own (one journal write takes them all), so it empties this.
        let mut maybe: BTreeSet<String> = BTreeSet::new();
        let mut gc_zones = 0;
        for op in ops {
            match op {
                Op::Create(p, l) | Op::CreateUnsynced(p, l) => {
                    let lt = WriteLifetime::from_code(l).unwrap();
                    let unsynced = matches!(op, Op::CreateUnsynced(..));
                    let r = if unsynced {
                        b(fs.create_unsynced(PATHS[p], lt))
                    } else {
                        b(fs.create(PATHS[p], lt))
                    };
                    if model.contains_key(PATHS[p]) {
                        assert!(matches!(r, Err(FsError::AlreadyExists(_))), "{r:?}");
                    } else {
                        r.unwrap();
                        model.insert(PATHS[p].to_string(), File::default());
                        if unsynced {
                            maybe.insert(PATHS[p].to_string());
                        } else {
                            maybe.clear();
                        }
                    }
                }
                Op::SyncMetadata => {
                    b(fs.sync_metadata()).unwrap();
                    maybe.clear();
                }
                Op::Append(p, n, s) => {
                    let data = bytes(n, s);
                    let r = b(fs.append(PATHS[p], &data));
                    match model.get_mut(PATHS[p]) {
                        Some(f) => match r {
                            Ok(()) => f.data.extend_from_slice(&data),
                            Err(FsError::NoSpace(_)) => {
                                // Full: the prefix written stays in the file.
                                let size = b(fs.size(PATHS[p])).unwrap() as usize;
                                assert!(size >= f.data.len() && size < f.data.len() + n);
                                let kept = size - f.data.len();
                                f.data.extend_from_slice(&data[..kept]);
                            }
                            Err(e) => panic!("append: {e}"),
                        },
                        None => assert!(is_not_found(&r), "{r:?}"),
                    }
                }
                Op::Sync(p) => {
                    let r = b(fs.sync(PATHS[p]));
                    match model.get_mut(PATHS[p]) {
                        Some(f) => {
                            r.unwrap();
                            f.synced = f.data.len();
                            maybe.clear();
                        }
                        None => assert!(is_not_found(&r), "{r:?}"),
                    }
                }
                Op::Read(p, o, n) => {
                    let r = b(fs.read_at(PATHS[p], o, n));
                    match model.get(PATHS[p]) {
                        Some(f) => {
                            let s = (o as usize).min(f.data.len());
                            let e = (s + n).min(f.data.len());
                            assert_eq!(&r.unwrap()[..], &f.data[s..e], "read {o}+{n}");
                            assert_eq!(b(fs.size(PATHS[p])).unwrap(), f.data.len() as u64);
                        }
                        None => assert!(is_not_found(&r), "{r:?}"),
                    }
                }
                Op::Delete(p) => {
                    let r = b(fs.delete(PATHS[p]));
                    match model.remove(PATHS[p]) {
                        Some(_) => {
                            r.unwrap();
                            maybe.clear();
                        }
                        None => assert!(is_not_found(&r), "{r:?}"),
                    }
                }
                Op::Rename(p, q) => {
                    let r = b(fs.rename(PATHS[p], PATHS[q]));
                    match model.remove(PATHS[p]) {
                        Some(f) => {
                            r.unwrap();
                            model.insert(PATHS[q].to_string(), f);
                            maybe.clear();
                        }
                        None => assert!(is_not_found(&r), "{r:?}"),
                    }
                }
                Op::List(d) => {
                    let dir = DIRS[d];
                    let mut want: Vec<String> = model
                        .keys()
                        .filter_map(|p| {
                            let rest = if dir.is_empty() {
                                Some(p.as_str())
                            } else {
                                p.strip_prefix(dir).and_then(|r| r.strip_prefix('/'))
                            };
                            rest.map(|r| r.split('/').next().unwrap().to_string())
                        })
                        .collect();
                    want.dedup();
                    assert_eq!(b(fs.list(dir)).unwrap(), want, "list {dir:?}");
                }
                Op::Gc(n) => {
                    b(fs.gc(n)).unwrap();
                }
                Op::Remount | Op::Crash => {
                    let crash = matches!(op, Op::Crash);
                    if !crash {
                        b(fs.sync_all()).unwrap();
                    }
                    gc_zones += b(fs.stats()).gc_zones;
                    drop(fs);
                    end(client, crash);
                    client = open(&rt, &spec, buffered);
                    if crash {
                        let ro = b(ZoneFs::mount_read_only(client.clone())).unwrap();
                        let rep = b(ro.fsck()).unwrap();
                        assert!(
                            rep.is_clean(),
                            "read-only after a crash: {:#?}",
                            rep.problems
                        );
                    }
                    fs = b(ZoneFs::mount(client.clone())).unwrap();
                    let rep = b(fs.fsck()).unwrap();
                    assert!(rep.is_clean(), "after a remount: {:#?}", rep.problems);
                    // A clean remount's `sync_all` committed them; a crash kept each or not.
                    for p in std::mem::take(&mut maybe) {
                        if crash && !b(fs.exists(&p)).unwrap() {
                            model.remove(&p);
                        }
                    }
                    for p in PATHS {
                        let exists = b(fs.exists(p)).unwrap();
                        assert_eq!(exists, model.contains_key(p), "{p} after remount");
                    }
                    for (p, f) in model.iter_mut() {
                        let got = b(fs.read_at(p, 0, usize::MAX)).unwrap();
                        assert_eq!(got.len() as u64, b(fs.size(p)).unwrap());
                        if crash {
                            assert!(
                                got.len() >= f.synced,
                                "{p}: {} < synced {}",
                                got.len(),
                                f.synced
                            );
                            assert!(got.len() <= f.data.len());
                            assert_eq!(&got[..], &f.data[..got.len()], "{p} content");
                            f.data.truncate(got.len());
                            f.synced = got.len();
                        } else {
                            assert_eq!(&got[..], &f.data[..], "{p} after a clean remount");
                        }
                    }
                }
            }
            check_space(&fs, &model);
        }
        gc_zones += b(fs.stats()).gc_zones;
        if std::env::var("ZONEFS_MODEL_STATS").is_ok() {
            eprintln!("small={small} buffered={buffered}: {gc_zones} zones collected");
        }
        drop(fs);
        end(client, false);
    });
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(24),
        ..ProptestConfig::default()
    })]

    #[test]
    fn zonefs_matches_the_model(
        ops in proptest::collection::vec(op(), 1..100),
        buffered in any::<bool>(),
        small in any::<bool>(),
    ) {
        run(ops, buffered, small);
    }
}
