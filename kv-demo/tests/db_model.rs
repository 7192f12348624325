//! Model test of the whole store against a `BTreeMap`, across puts, deletes, atomic batches
//! (spanning shards), flushes, gets, scans, snapshot scans, clean reopens and simulated power
//! loss (the ZIOB instance of an `emu:` device abandoned: whatever its zone write buffer
//! held is lost; with the buffer off, nothing is buffered), with tiny memtables so that
//! flushes and compactions run in the background all along (a crash lands in them too).
//!
//! Until a crash the store must equal the model exactly (gets, scans, snapshot scans); after
//! a clean reopen too. After a crash, for every key: its value is the one of a write made at
//! or after the last write to it that a sync made durable (a `sync = true` write makes
//! everything appended before it to the WALs of the shards it touched durable; `flush`
//! makes everything durable), so every write acknowledged with `sync = true` is there with
//! its latest value, or a later one; and no batch is half-applied (each batch also writes
//! keys nothing else writes: after a crash all of them are there or none).

mod durable_support;

use std::collections::{BTreeMap, BTreeSet};

use durable_support::{b, bounded, EmuPath};
use kv_demo::{Db, Options, Snapshot, WriteBatch, WriteOptions};
use proptest::prelude::*;

const POOL: u64 = 60;

#[derive(Debug, Clone)]
enum Op {
    Put(u64, bool),
    Delete(u64, bool),
    /// Pool keys, fresh keys, sync.
    Batch(Vec<u64>, u8, bool),
    Get(u64),
    Scan(u64, u64),
    Snapshot,
    CheckSnapshot(usize),
    Flush,
    Reopen,
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => (0..POOL, any::<bool>()).prop_map(|(k, s)| Op::Put(k, s)),
        8 => (0..POOL, any::<bool>()).prop_map(|(k, s)| Op::Delete(k, s)),
        10 => (proptest::collection::vec(0..POOL, 0..5), 1u8..5, any::<bool>())
            .prop_map(|(k, f, s)| Op::Batch(k, f, s)),
        6 => (0..POOL).prop_map(Op::Get),
        3 => (0..POOL, 0..POOL).prop_map(|(a, b)| Op::Scan(a.min(b), a.max(b))),
        2 => Just(Op::Snapshot),
        3 => (0usize..4).prop_map(Op::CheckSnapshot),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
        3 => Just(Op::Crash),
    ]
}

fn pool_key(k: u64) -> Vec<u8> {
    format!("pool{k:04}").into_bytes()
}

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// One write since the last reopen: its operations (value `None` = delete).
struct Write {
    ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// Keys only this batch writes.
    fresh: Vec<Vec<u8>>,
}

/// What the store must hold: the exact state at the last reopen, the writes since, and how
/// many of them each shard's syncs made durable.
struct History {
    base: Map,
    writes: Vec<Write>,
    durable: Vec<usize>,
}

impl History {
    fn new(shards: usize) -> History {
        History {
            base: Map::new(),
            writes: Vec::new(),
            durable: vec![0; shards],
        }
    }

    fn state(&self) -> Map {
        let mut m = self.base.clone();
        for w in &self.writes {
            apply(&mut m, &w.ops);
        }
        m
    }

    fn record(&mut self, db: &Db, w: Write, sync: bool) {
        let shards: BTreeSet<usize> = w.ops.iter().map(|(k, _)| db.shard_of(k)).collect();
        self.writes.push(w);
        if sync {
            for s in shards {
                self.durable[s] = self.writes.len();
            }
        }
    }

    fn all_durable(&mut self) {
        let n = self.writes.len();
        self.durable.iter_mut().for_each(|d| *d = n);
    }

    /// Checks a store recovered from a crash; it becomes the new base.
    fn check_crash(&mut self, db: &Db, got: Map) {
        let mut keys: BTreeSet<Vec<u8>> = self.base.keys().cloned().collect();
        keys.extend(got.keys().cloned());
        for w in &self.writes {
            keys.extend(w.ops.iter().map(|(k, _)| k.clone()));
        }
        for k in &keys {
            let d = self.durable[db.shard_of(k)];
            let touching: Vec<(usize, Option<&Vec<u8>>)> = self
                .writes
                .iter()
                .enumerate()
                .flat_map(|(i, w)| {
                    w.ops
                        .iter()
                        .filter(|(key, _)| key == k)
                        .map(move |(_, v)| (i, v.as_ref()))
                })
                .collect();
            // The last durable write to k, and everything after it, may be what survived.
            let last_durable = touching.iter().rposition(|(i, _)| *i < d);
            let mut allowed: Vec<Option<&Vec<u8>>> = match last_durable {
                Some(p) => touching[p..].iter().map(|(_, v)| *v).collect(),
                None => {
                    let mut a = vec![self.base.get(k)];
                    a.extend(touching.iter().map(|(_, v)| *v));
                    a
                }
            };
            allowed.dedup();
            assert!(
                allowed.contains(&got.get(k)),
                "key {:?}: recovered {:?}, allowed {:?} (durable writes {d} of {})",
                String::from_utf8_lossy(k),
                got.get(k).map(|v| String::from_utf8_lossy(v)),
                allowed
                    .iter()
                    .map(|v| v.map(|v| String::from_utf8_lossy(v)))
                    .collect::<Vec<_>>(),
                self.writes.len()
            );
        }
        for (i, w) in self.writes.iter().enumerate() {
            let present = w.fresh.iter().filter(|k| got.contains_key(*k)).count();
            assert!(
                present == 0 || present == w.fresh.len(),
                "batch {i} half-applied: {present} of {} keys",
                w.fresh.len()
            );
        }
        self.base = got;
        self.writes.clear();
        self.durable.iter_mut().for_each(|d| *d = 0);
    }

    /// After a clean reopen the store is exactly the model.
    fn check_exact(&mut self, got: Map) {
        let want = self.state();
        let show = |v: Option<&Vec<u8>>| v.map(|v| String::from_utf8_lossy(v).into_owned());
        let diff: Vec<String> = got
            .keys()
            .chain(want.keys())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter(|k| got.get(*k) != want.get(*k))
            .map(|k| {
                format!(
                    "{}: got {:?} want {:?}",
                    String::from_utf8_lossy(k),
                    show(got.get(k)),
                    show(want.get(k))
                )
            })
            .collect();
        assert!(diff.is_empty(), "after a clean reopen: {diff:#?}");
        self.base = got;
        self.writes.clear();
        self.durable.iter_mut().for_each(|d| *d = 0);
    }
}

fn apply(m: &mut Map, ops: &[(Vec<u8>, Option<Vec<u8>>)]) {
    for (k, v) in ops {
        match v {
            Some(v) => m.insert(k.clone(), v.clone()),
            None => m.remove(k),
        };
    }
}

async fn scan(db: &Db, start: Option<&[u8]>, end: Option<&[u8]>, snap: Option<&Snapshot>) -> Map {
    let mut s = db.scan(start, end, snap).await.unwrap();
    let mut out = Map::new();
    while let Some((k, v)) = s.next().await.unwrap() {
        assert!(out.insert(k.to_vec(), v.to_vec()).is_none(), "a key twice");
    }
    out
}

fn options(shards: usize, buffered: bool) -> Options {
    Options {
        shards,
        write_buffer_bytes: 4096,
        target_file_bytes: 4096,
        cache_bytes: 64 << 10,
        buffered,
        emu_zones: 48,
        emu_zone_bytes: 1 << 20,
        ..Options::default()
    }
}

/// Opens the store, retrying while the device is still held by the instance just closed or
/// abandoned (its release may lag behind its last write).
fn open_db(rt: &ziob::Runtime, spec: &str, opts: &Options) -> Db {
    let mut last = None;
    for _ in 0..80 {
        match b(Db::open(rt.handle(), spec, opts.clone())) {
            Ok(db) => return db,
            Err(e) if e.to_string().contains("busy") || e.to_string().contains("Busy") => {
                last = Some(e);
                std::thread::sleep(std::time::Duration::from_millis(250));
            }
            Err(e) => panic!("open {spec}: {e}"),
        }
    }
    panic!("open {spec}: still busy: {last:?}")
}

/// Simulated power loss: the instance is abandoned (buffered data lost) and the store's
/// background work stopped.
fn crash(db: Db) {
    b(db.abandon()).unwrap();
}

fn run(ops: Vec<Op>, shards: usize, buffered: bool) {
    let path = EmuPath::new("db-model");
    let spec = path.spec();
    bounded(300, move || {
        let rt = ziob::Runtime::builder().cores(2).build().unwrap();
        let opts = options(shards, buffered);
        let mut db = open_db(&rt, &spec, &opts);
        let mut h = History::new(shards);
        let mut snaps: Vec<(Snapshot, Map)> = Vec::new();
        let mut fresh = 0u64;
        for (i, op) in ops.iter().enumerate() {
            let value = |k: u64| format!("v{i}-{k}-{}", "x".repeat(i % 40)).into_bytes();
            match op {
                Op::Put(k, sync) => {
                    let (key, v) = (pool_key(*k), value(*k));
                    b(db.put(key.clone(), v.clone(), &WriteOptions { sync: *sync })).unwrap();
                    let w = Write {
                        ops: vec![(key, Some(v))],
                        fresh: vec![],
                    };
                    h.record(&db, w, *sync);
                }
                Op::Delete(k, sync) => {
                    let key = pool_key(*k);
                    b(db.delete(key.clone(), &WriteOptions { sync: *sync })).unwrap();
                    let w = Write {
                        ops: vec![(key, None)],
                        fresh: vec![],
                    };
                    h.record(&db, w, *sync);
                }
                Op::Batch(keys, n, sync) => {
                    let mut batch = WriteBatch::new();
                    let mut w = Write {
                        ops: vec![],
                        fresh: vec![],
                    };
                    for (j, k) in keys.iter().enumerate() {
                        let key = pool_key(*k);
                        if j % 3 == 2 {
                            batch.delete(key.clone()).unwrap();
                            w.ops.push((key, None));
                        } else {
                            let v = value(*k);
                            batch.put(key.clone(), v.clone()).unwrap();
                            w.ops.push((key, Some(v)));
                        }
                    }
                    for _ in 0..*n {
                        let key = format!("fresh{fresh:06}").into_bytes();
                        fresh += 1;
                        let v = value(fresh);
                        batch.put(key.clone(), v.clone()).unwrap();
                        w.ops.push((key.clone(), Some(v)));
                        w.fresh.push(key);
                    }
                    b(db.write(batch, &WriteOptions { sync: *sync })).unwrap();
                    h.record(&db, w, *sync);
                }
                Op::Get(k) => {
                    let key = pool_key(*k);
                    let got = b(db.get(&key)).unwrap();
                    assert_eq!(
                        got.as_deref(),
                        h.state().get(&key).map(|v| &v[..]),
                        "op {i}"
                    );
                }
                Op::Scan(a, z) => {
                    let (a, z) = (pool_key(*a), pool_key(*z));
                    let got = b(scan(&db, Some(&a), Some(&z), None));
                    let want: Map = h
                        .state()
                        .range(a.clone()..z.clone())
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    assert_eq!(got, want, "op {i}: scan");
                }
                Op::Snapshot => {
                    snaps.push((db.snapshot(), h.state()));
                    if snaps.len() > 3 {
                        snaps.remove(0);
                    }
                }
                Op::CheckSnapshot(n) => {
                    if let Some((s, m)) = snaps.get(*n) {
                        assert_eq!(&b(scan(&db, None, None, Some(s))), m, "op {i}: snapshot");
                    }
                }
                Op::Flush => {
                    b(db.flush()).unwrap();
                    h.all_durable();
                }
                Op::Reopen => {
                    snaps.clear();
                    b(db.close()).unwrap();
                    db = open_db(&rt, &spec, &opts);
                    h.check_exact(b(scan(&db, None, None, None)));
                }
                Op::Crash => {
                    snaps.clear();
                    crash(db);
                    db = open_db(&rt, &spec, &opts);
                    let got = b(scan(&db, None, None, None));
                    h.check_crash(&db, got);
                }
            }
        }
        assert_eq!(b(scan(&db, None, None, None)), h.state());
        snaps.clear();
        b(db.close()).unwrap();
        let db = open_db(&rt, &spec, &opts);
        h.check_exact(b(scan(&db, None, None, None)));
        b(db.close()).unwrap();
    });
}

proptest! {
    // PROPTEST_CASES=n runs more (or fewer) cases.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(12),
        ..ProptestConfig::default()
    })]

    #[test]
    fn db_matches_the_model_across_reopens_and_crashes(
        ops in proptest::collection::vec(op(), 1..160),
        shards in 1usize..4,
        buffered: bool,
    ) {
        run(ops, shards, buffered);
    }
}

/// A longer seeded run per configuration (many flushes and compactions between crashes).
#[test]
fn long_runs_with_crashes() {
    for (seed, shards, buffered) in [(1u64, 2usize, true), (2, 3, false), (3, 1, true)] {
        let mut rng = durable_support::Rng(seed * 0x9e37_79b9 + 1);
        let ops: Vec<Op> = (0..1200)
            .map(|_| match rng.below(100) {
                0..=49 => Op::Put(rng.below(POOL), rng.below(8) == 0),
                50..=59 => Op::Delete(rng.below(POOL), rng.below(8) == 0),
                60..=74 => Op::Batch(
                    (0..rng.below(5)).map(|_| rng.below(POOL)).collect(),
                    1 + rng.below(4) as u8,
                    rng.below(6) == 0,
                ),
                75..=84 => Op::Get(rng.below(POOL)),
                85..=88 => Op::Snapshot,
                89..=92 => Op::CheckSnapshot(rng.below(4) as usize),
                93 => Op::Scan(rng.below(POOL / 2), POOL / 2 + rng.below(POOL / 2)),
                94 => Op::Flush,
                95 => Op::Reopen,
                _ => Op::Crash,
            })
            .collect();
        run(ops, shards, buffered);
    }
}

/// A batch over two shards, then a sync write to one of them only (its WAL durable with the
/// batch, the other's not), a crash, then enough writes to that shard alone that it flushes
/// and moves its WAL start past the batch, then a clean reopen: the other shard's half of
/// the batch, recovered from the first shard's WAL, must still be there.
#[test]
fn a_batch_recovered_from_another_shards_wal_stays() {
    let in_shard = |s: usize| {
        (0..POOL)
            .filter(move |k| kv_demo::db::shard_of(&pool_key(*k), 2) == s)
            .collect::<Vec<u64>>()
    };
    let (x, y) = (in_shard(0), in_shard(1));
    let mut ops = vec![
        Op::Batch(vec![x[0], y[0]], 1, false),
        Op::Put(x[1], true),
        Op::Crash,
    ];
    for i in 0..300 {
        ops.push(Op::Put(x[2 + i % (x.len() - 2)], false));
    }
    ops.push(Op::Reopen);
    run(ops, 2, true);
}
