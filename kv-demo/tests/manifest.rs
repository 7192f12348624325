//! The shard manifest: a model test (random edits, rolls, clean reopens and crashes on an
//! `emu:` device; after each reopen the state equals the edits replayed in memory by an
//! independent model), damage on the device (a flipped byte in a snapshot or an edit is a
//! typed `Corrupt`, a torn last record is dropped), invalid edits refused with nothing
//! written, rolls bounding the log's zones, missing manifests.

mod durable_support;

use std::collections::BTreeMap;

use bytes::Bytes;
use durable_support::{b, bounded, end, open, runtime, EmuPath, Rng};
use kv_demo::manifest::{Manifest, ManifestError, ManifestOptions};
use kv_demo::version_edit::{FileMeta, VersionEdit};
use proptest::prelude::*;
use ziob::zonelog::RECORD_HEADER_BYTES;
use ziob::{Client, LogSpace, LogSpaceOptions, Position};

const ZONES: u32 = 24;
const ZONE_BYTES: u64 = 64 << 10;

fn space(client: &Client) -> LogSpace {
    b(LogSpace::open(client.clone(), LogSpaceOptions::default())).unwrap()
}

fn file(number: u64, level: u32) -> FileMeta {
    FileMeta {
        number,
        level,
        size: number * 1000 + 17,
        entries: number * 3,
        smallest: Bytes::from(format!("key-{number:06}-a\0\0\0\0\0\0\0\x01")),
        largest: Bytes::from(format!("key-{number:06}-z\0\0\0\0\0\0\0\x01")),
    }
}

/// The model: what the edits say, replayed plainly.
#[derive(Debug, Clone, Default)]
struct Model {
    files: BTreeMap<(u32, u64), FileMeta>,
    wal_start: u64,
    next_file_number: u64,
    last_seq: u64,
}

impl Model {
    fn apply(&mut self, e: &VersionEdit) {
        for k in &e.deleted {
            assert!(self.files.remove(k).is_some());
        }
        for f in &e.added {
            assert!(self.files.insert((f.level, f.number), f.clone()).is_none());
        }
        if let Some(w) = e.wal_start {
            self.wal_start = w;
        }
        self.next_file_number = self.next_file_number.max(e.next_file_number.unwrap_or(0));
        self.last_seq = self.last_seq.max(e.last_seq.unwrap_or(0));
    }

    fn check(&self, m: &Manifest) {
        let s = b(m.state());
        assert_eq!(s.files, self.files);
        assert_eq!(s.wal_start.into_raw(), self.wal_start);
        assert_eq!(s.next_file_number, self.next_file_number);
        assert_eq!(s.last_seq, self.last_seq);
        for level in 0..4 {
            let want: Vec<u64> = self
                .files
                .keys()
                .filter(|(l, _)| *l == level)
                .map(|(_, n)| *n)
                .collect();
            let got: Vec<u64> = s.level(level).iter().map(|f| f.number).collect();
            assert_eq!(got, want, "level {level}");
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// A flush: `n` new L0 tables, wal_start and last_seq move.
    Flush(u8, u16),
    /// A compaction: picks live tables by these seeds, moves or merges them one level down.
    Compact(Vec<u16>, bool),
    Roll,
    Reopen,
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (1u8..4, any::<u16>()).prop_map(|(n, s)| Op::Flush(n, s)),
        4 => (proptest::collection::vec(any::<u16>(), 1..5), any::<bool>())
            .prop_map(|(v, m)| Op::Compact(v, m)),
        1 => Just(Op::Roll),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
    ]
}

fn edit_for(op: &Op, model: &Model) -> Option<VersionEdit> {
    let mut next = model.next_file_number;
    let mut take = || {
        next += 1;
        next - 1
    };
    match op {
        Op::Flush(n, s) => {
            let added: Vec<FileMeta> = (0..*n).map(|_| file(take(), 0)).collect();
            Some(VersionEdit {
                added,
                deleted: Vec::new(),
                // Mostly forward, sometimes back (a store after a crash moves it back).
                wal_start: Some(if *s % 5 == 0 {
                    model.wal_start / 2
                } else {
                    model.wal_start + 1 + *s as u64
                }),
                next_file_number: Some(next),
                last_seq: Some(model.last_seq + 10),
            })
        }
        Op::Compact(seeds, merge) => {
            let live: Vec<(u32, u64)> = model.files.keys().copied().collect();
            if live.is_empty() {
                return None;
            }
            let mut picked: Vec<(u32, u64)> = seeds
                .iter()
                .map(|s| live[*s as usize % live.len()])
                .collect();
            picked.sort();
            picked.dedup();
            let added = if *merge {
                let level = picked.iter().map(|(l, _)| *l).max().unwrap() + 1;
                vec![file(take(), level.min(3))]
            } else {
                // A trivial move: the same tables one level down (same numbers).
                picked
                    .iter()
                    .map(|&(l, n)| file(n, (l + 1).min(6)))
                    .filter(|f| !model.files.contains_key(&(f.level, f.number)))
                    .collect()
            };
            let deleted = if *merge {
                picked
            } else {
                picked
                    .into_iter()
                    .filter(|&(l, n)| !model.files.contains_key(&((l + 1).min(6), n)) && l < 6)
                    .collect()
            };
            Some(VersionEdit {
                added,
                deleted,
                wal_start: None,
                next_file_number: Some(next),
                last_seq: None,
            })
        }
        _ => None,
    }
}

fn run(ops: Vec<Op>, buffered: bool) {
    let dev = EmuPath::create("manifest-model", ZONES, ZONE_BYTES);
    let spec = dev.spec();
    bounded(300, move || {
        let rt = runtime(1);
        let opts = ManifestOptions { roll_bytes: 20_000 };
        let mut client = open(&rt, &spec, buffered);
        let mut s = space(&client);
        let mut m = b(Manifest::create(&s, 0, opts)).unwrap();
        let mut model = Model {
            next_file_number: 1,
            ..Model::default()
        };
        model.check(&m);
        for op in &ops {
            match op {
                Op::Roll => b(m.roll()).unwrap(),
                Op::Reopen | Op::Crash => {
                    drop((m, s));
                    end(client, matches!(op, Op::Crash));
                    client = open(&rt, &spec, buffered);
                    s = space(&client);
                    m = b(Manifest::open(&s, 0, opts)).unwrap();
                }
                _ => {
                    if let Some(e) = edit_for(op, &model) {
                        b(m.apply(&e)).unwrap();
                        model.apply(&e);
                    }
                }
            }
            model.check(&m);
            // Rolls keep the log short: the live snapshot's zone and at most a couple more.
            assert!(m.log().zones().len() <= 3, "{:?}", m.log().zones());
        }
        drop((m, s));
        end(client, false);
    });
}

proptest! {
    // PROPTEST_CASES=n runs more (or fewer) cases.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24),
        ..ProptestConfig::default()
    })]

    #[test]
    fn manifest_model(ops in proptest::collection::vec(op(), 1..60), buffered: bool) {
        run(ops, buffered);
    }
}

#[test]
fn a_long_run_rolls_and_stays_in_few_zones() {
    bounded(300, || {
        let rt = runtime(1);
        let client = b(Client::open(
            rt.handle(),
            "mem:zones=12,zone_size=64K",
            ziob::ZiobConfig::default(),
        ))
        .unwrap();
        let s = space(&client);
        let m = b(Manifest::create(&s, 5, ManifestOptions::default())).unwrap();
        let mut model = Model {
            next_file_number: 1,
            ..Model::default()
        };
        // Far more edit bytes than the whole space holds; compactions keep the table count
        // (and the snapshot) small.
        for i in 0..3000u64 {
            let op = if i % 3 == 2 {
                Op::Compact((0..5).map(|k| (i * 7 + k * 13) as u16).collect(), true)
            } else {
                Op::Flush(1, i as u16)
            };
            let e = edit_for(&op, &model).unwrap();
            b(m.apply(&e)).unwrap();
            model.apply(&e);
            assert!(m.log().zones().len() <= 2, "{:?}", m.log().zones());
        }
        assert!(b(m.rolls()) > 3);
        model.check(&m);
        drop((m, s));
        let s = space(&client);
        let m = b(Manifest::open(&s, 5, ManifestOptions::default())).unwrap();
        model.check(&m);
        drop((m, s));
        b(client.close()).unwrap();
    });
}

#[test]
fn invalid_edits_are_refused_and_nothing_is_written() {
    let rt = runtime(1);
    let client = b(Client::open(
        rt.handle(),
        "mem:zones=8,zone_size=64K",
        ziob::ZiobConfig::default(),
    ))
    .unwrap();
    let s = space(&client);
    let m = b(Manifest::create(&s, 0, ManifestOptions::default())).unwrap();
    b(m.apply(&VersionEdit {
        added: vec![file(1, 0)],
        ..VersionEdit::default()
    }))
    .unwrap();
    let end_before = m.log().end();
    for bad in [
        VersionEdit {
            deleted: vec![(0, 2)],
            ..VersionEdit::default()
        },
        VersionEdit {
            deleted: vec![(1, 1)],
            ..VersionEdit::default()
        },
        VersionEdit {
            added: vec![file(1, 0)],
            ..VersionEdit::default()
        },
        VersionEdit {
            added: vec![file(3, 0), file(3, 0)],
            ..VersionEdit::default()
        },
    ] {
        let r = b(m.apply(&bad));
        assert!(
            matches!(r, Err(ManifestError::InvalidEdit { .. })),
            "{bad:?}: {r:?}"
        );
    }
    assert_eq!(m.log().end(), end_before);
    // A move to another level is fine.
    b(m.apply(&VersionEdit {
        added: vec![file(1, 1)],
        deleted: vec![(0, 1)],
        ..VersionEdit::default()
    }))
    .unwrap();
    // Creating it twice, opening a missing one.
    assert!(matches!(
        b(Manifest::create(&s, 0, ManifestOptions::default())),
        Err(ManifestError::InvalidEdit { .. })
    ));
    assert!(matches!(
        b(Manifest::open(&s, 1, ManifestOptions::default())),
        Err(ManifestError::Missing { .. })
    ));
    // A log without a snapshot record.
    let log = b(s.open_log("manifest-2")).unwrap();
    b(log.append(&[0x02, 1, 0, 0, 0])).unwrap();
    assert!(matches!(
        b(Manifest::open(&s, 2, ManifestOptions::default())),
        Err(ManifestError::Missing { .. })
    ));
    drop((m, s, log));
    b(client.close()).unwrap();
}

/// Writes a manifest with 6 edits on a fresh emu device (closed cleanly); returns the
/// device, the records' positions and the device zone holding them.
fn written() -> (EmuPath, Vec<(Position, usize)>, u32, Model) {
    let dev = EmuPath::create("manifest-damage", ZONES, ZONE_BYTES);
    let rt = runtime(1);
    let client = open(&rt, &dev.spec(), true);
    let s = space(&client);
    let m = b(Manifest::create(&s, 0, ManifestOptions::default())).unwrap();
    let mut model = Model {
        next_file_number: 1,
        ..Model::default()
    };
    for i in 0..6u16 {
        let e = edit_for(&Op::Flush(2, i), &model).unwrap();
        b(m.apply(&e)).unwrap();
        model.apply(&e);
    }
    let recs: Vec<(Position, usize)> = b(m.log().read_from(m.log().start(), 100))
        .unwrap()
        .into_iter()
        .map(|(p, r)| (p, r.len()))
        .collect();
    assert_eq!(recs.len(), 7);
    let zones = m.log().zones();
    assert_eq!(zones.len(), 1);
    drop((m, s));
    end(client, false);
    (dev, recs, zones[0], model)
}

fn reopen(dev: &EmuPath) -> Result<Model, ManifestError> {
    let rt = runtime(1);
    let client = open(&rt, &dev.spec(), true);
    let s = space(&client);
    let r = b(Manifest::open(&s, 0, ManifestOptions::default())).map(|m| {
        let st = b(m.state());
        Model {
            files: st.files,
            wal_start: st.wal_start.into_raw(),
            next_file_number: st.next_file_number,
            last_seq: st.last_seq,
        }
    });
    drop(s);
    end(client, false);
    r
}

#[test]
fn a_damaged_record_is_a_typed_error() {
    bounded(120, || {
        let mut rng = Rng(31);
        for round in 0..6 {
            let (dev, recs, zone, _) = written();
            // The snapshot (round 0) or an edit, at a random byte of its checksummed part.
            let k = if round == 0 {
                0
            } else {
                rng.below(recs.len() as u64) as usize
            };
            let (pos, len) = recs[k];
            let at = dev.zone_offset(ZONES, ZONE_BYTES, zone)
                + pos.offset_bytes() as u64
                + (RECORD_HEADER_BYTES - 4) as u64
                + rng.below(4 + len as u64);
            let old = dev.peek(at, 1)[0];
            dev.poke(at, &[old ^ 0x10]);
            let r = reopen(&dev);
            assert!(
                matches!(r, Err(ManifestError::Corrupt { position, .. }) if position == pos),
                "record {k}: {r:?}"
            );
        }
    });
}

#[test]
fn a_torn_last_record_is_dropped() {
    bounded(120, || {
        let (dev, recs, zone, model) = written();
        let (pos, _) = *recs.last().unwrap();
        let at = dev.zone_offset(ZONES, ZONE_BYTES, zone) + pos.offset_bytes() as u64;
        dev.poke(at + 4, &100_000u32.to_le_bytes());
        let got = reopen(&dev).unwrap();
        // The state before the last edit: the last flush's tables are missing.
        assert_eq!(got.files.len(), model.files.len() - 2);
        assert!(got.next_file_number < model.next_file_number);
        // And it stays usable: the next open finds no cut.
        let again = reopen(&dev).unwrap();
        assert_eq!(again.files, got.files);
    });
}
