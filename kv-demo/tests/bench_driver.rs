//! The benchmark driver against an in-memory double of a store: the workload is db_bench's
//! own, byte for byte (vectors read with `ldb scan --hex` from databases db_bench 7.8.3 made),
//! and the counts it reports agree with a model.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use clap::Parser;
use kv_demo::bench::keys::key_from_int;
use kv_demo::bench::rng::Random64;
use kv_demo::bench::{
    run, BenchName, Cursor, Engine, EngineError, EngineHost, EngineStats, Flags, Placement,
};

type Map = Arc<Mutex<BTreeMap<Vec<u8>, Vec<u8>>>>;

/// The store double: a shared sorted map (what survives close), counting writes.
struct MapEngine {
    map: Map,
    user_bytes: Mutex<u64>,
}

struct MapCursor {
    rest: std::vec::IntoIter<(Vec<u8>, Vec<u8>)>,
}

impl Cursor for MapCursor {
    async fn next_with<R, F>(&mut self, f: F) -> Result<Option<R>, EngineError>
    where
        R: Send,
        F: FnOnce(&[u8], &[u8]) -> R + Send,
    {
        Ok(self.rest.next().map(|(k, v)| f(&k, &v)))
    }
}

impl Engine for MapEngine {
    type Cursor = MapCursor;

    async fn put(&self, key: &[u8], value: &[u8], _sync: bool) -> Result<(), EngineError> {
        *self.user_bytes.lock().unwrap() += (key.len() + value.len()) as u64;
        self.map
            .lock()
            .unwrap()
            .insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    async fn delete(&self, key: &[u8], _sync: bool) -> Result<(), EngineError> {
        self.map.lock().unwrap().remove(key);
        Ok(())
    }

    async fn get(&self, key: &[u8]) -> Result<Option<usize>, EngineError> {
        Ok(self.map.lock().unwrap().get(key).map(Vec::len))
    }

    async fn cursor(&self, start: Option<&[u8]>) -> Result<MapCursor, EngineError> {
        let m = self.map.lock().unwrap();
        let rest: Vec<_> = match start {
            None => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Some(s) => m
                .range(s.to_vec()..)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        };
        Ok(MapCursor {
            rest: rest.into_iter(),
        })
    }

    async fn stats(&self) -> EngineStats {
        // The double "flushes" every byte it is given (a counter to sum across stores).
        let user = *self.user_bytes.lock().unwrap();
        EngineStats {
            user_bytes: user,
            flush_bytes: Some(user),
            ..EngineStats::default()
        }
    }

    fn placement(&self) -> Placement {
        Placement::Threads
    }
}

#[derive(Default)]
struct MapHost {
    map: Map,
    destroyed: usize,
}

impl EngineHost for MapHost {
    type Engine = MapEngine;
    fn open(&mut self) -> Result<MapEngine, EngineError> {
        Ok(MapEngine {
            map: self.map.clone(),
            user_bytes: Mutex::new(0),
        })
    }
    fn close(&mut self, _e: MapEngine) -> Result<(), EngineError> {
        Ok(())
    }
    fn destroy(&mut self) -> Result<(), EngineError> {
        self.destroyed += 1;
        self.map.lock().unwrap().clear();
        Ok(())
    }
    fn describe(&self) -> String {
        "map".into()
    }
}

fn config(args: &[&str]) -> kv_demo::bench::BenchConfig {
    Flags::try_parse_from(std::iter::once("kv-demo").chain(args.iter().copied()))
        .unwrap()
        .check()
        .unwrap()
}

fn run_on(host: &mut MapHost, args: &[&str]) -> (Vec<kv_demo::bench::BenchResult>, String) {
    let mut out = Vec::new();
    let r = run(&config(args), host, &mut out, false).unwrap();
    (r, String::from_utf8(out).unwrap())
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn dump(host: &MapHost) -> Vec<(String, String)> {
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02X}")).collect::<String>();
    host.map
        .lock()
        .unwrap()
        .iter()
        .map(|(k, v)| (hex(k), hex(v)))
        .collect()
}

/// `db_bench --benchmarks=fillrandom --num=5 --seed=42 --value_size=20 --key_size=16
/// --compression_type=none`, then `ldb scan --hex` (db_bench 7.8.3, Debian rocksdb-tools):
/// the same keys (two of the five draws repeat) with the same last values.
#[test]
fn fillrandom_writes_what_db_bench_writes() {
    let mut host = MapHost::default();
    run_on(
        &mut host,
        &[
            "--benchmarks=fillrandom",
            "--num=5",
            "--seed=42",
            "--value_size=20",
            "--key_size=16",
        ],
    );
    let want = [
        (
            "00000000000000013030303030303030",
            "42365B6A6E55642934205E7B56687A22212F2577",
        ),
        (
            "00000000000000033030303030303030",
            "5A4A34547740254E587879323F2E417256435A32",
        ),
        (
            "00000000000000043030303030303030",
            "79323F2E417256435A3242365B6A6E5564293420",
        ),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(dump(&host), want);
}

/// `db_bench --benchmarks=fillseq --num=3 --seed=42 --value_size=120 --key_size=10
/// --compression_type=none`, then `ldb scan --hex`.
#[test]
fn fillseq_writes_what_db_bench_writes() {
    let mut host = MapHost::default();
    run_on(
        &mut host,
        &[
            "--benchmarks=fillseq",
            "--num=3",
            "--seed=42",
            "--value_size=120",
            "--key_size=10",
        ],
    );
    let got = dump(&host);
    assert_eq!(
        got.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        [
            "00000000000000003030",
            "00000000000000013030",
            "00000000000000023030"
        ]
    );
    assert_eq!(
        unhex(&got[0].1),
        unhex("5E7B56687A22212F25774D5A3B276120462F52455A4A34547740254E587879323F2E417256435A3242365B6A6E55642934205E7B56687A22212F25774D5A3B276120462F52455A4A34547740254E587879323F2E417256435A3242365B6A6E5564293420624F7B5C5E61543F566D322E246865633B7E324C")
    );
    assert_eq!(
        unhex(&got[2].1),
        unhex("67636F6F3F4C58793E547E407E543474706F51387A21466F652235444B33764B24346F5933675A22702340544D2E39563D5A67636F6F3F4C58793E544C2A62517C7A4155715B5243476968546A704E5F3C272E4F3B6332385F644D2535242A63784755634056755A62447A4E43624C2A62517C7A4155715B")
    );
}

/// Replays one thread's draws as db_bench does for random writes/reads/deletes: one draw
/// for the database, one for the key.
fn keys_of_thread(seed: u64, n: u64, num: u64, key_size: usize) -> Vec<Vec<u8>> {
    let mut r = Random64::new(seed);
    (0..n)
        .map(|_| {
            r.next_u64();
            key_from_int(r.next_u64() % num, key_size)
        })
        .collect()
}

/// Seeded runs over several seeds and thread counts: the reported counts agree with a model
/// replaying db_bench's draws (thread k of the process uses seed + k).
#[test]
fn reported_counts_agree_with_a_model_of_the_draws() {
    for (seed, threads) in [(1u64, 1usize), (7, 2), (1234, 3)] {
        let mut host = MapHost::default();
        let (num, reads) = (500u64, 300u64);
        let (res, text) = run_on(
            &mut host,
            &[
                "--benchmarks=fillrandom,readrandom,deleterandom,readrandom,seekrandom,readseq",
                &format!("--num={num}"),
                &format!("--reads={reads}"),
                &format!("--seed={seed}"),
                &format!("--threads={threads}"),
            ],
        );
        // Model: fill threads 1..=t, readrandom t+1..=2t, deletes 2t+1..=3t, reads 3t+1..
        let t = threads as u64;
        let mut model: HashSet<Vec<u8>> = HashSet::new();
        for k in 1..=t {
            model.extend(keys_of_thread(seed + k, num, num, 16));
        }
        let found = |model: &HashSet<Vec<u8>>, first: u64| -> u64 {
            (first..first + t)
                .map(|k| {
                    keys_of_thread(seed + k, reads, num, 16)
                        .iter()
                        .filter(|key| model.contains(*key))
                        .count() as u64
                })
                .sum()
        };
        let before = found(&model, t + 1);
        for k in 2 * t + 1..=3 * t {
            for key in keys_of_thread(seed + k, num, num, 16) {
                model.remove(&key);
            }
        }
        let after = found(&model, 3 * t + 1);
        let finds: Vec<_> = res.iter().filter_map(|r| r.found).collect();
        assert_eq!(finds[0], (before, reads * t), "seed {seed}");
        assert_eq!(finds[1], (after, reads * t), "seed {seed}");
        assert!(after < before);
        // seekrandom: exact matches among the seeks (no db draw before the key).
        let seeks: u64 = (4 * t + 1..=5 * t)
            .map(|k| {
                let mut r = Random64::new(seed + k);
                (0..reads)
                    .filter(|_| model.contains(&key_from_int(r.next_u64() % num, 16)))
                    .count() as u64
            })
            .sum();
        assert_eq!(finds[2], (seeks, reads * t), "seed {seed}");
        assert_eq!(host.map.lock().unwrap().len(), model.len());
        // readseq: every thread reads min(reads, live keys) entries.
        let readseq = res.iter().find(|r| r.bench == BenchName::Readseq).unwrap();
        assert_eq!(
            readseq.stats.done(),
            t * reads.min(model.len() as u64),
            "seed {seed}"
        );
        // As db_bench, the line carries the message of one thread (the first): its own
        // `(N of --reads found)`.
        let first = keys_of_thread(seed + t + 1, reads, num, 16);
        let mut fill: HashSet<Vec<u8>> = HashSet::new();
        for k in 1..=t {
            fill.extend(keys_of_thread(seed + k, num, num, 16));
        }
        let n = first.iter().filter(|k| fill.contains(*k)).count();
        let line = "operations;";
        let rr = text.lines().find(|l| l.starts_with("readrandom")).unwrap();
        assert!(
            rr.contains(line) && rr.ends_with(&format!("({n} of {reads} found)")),
            "{rr}"
        );
    }
}

#[test]
fn fills_start_empty_and_use_existing_db_skips_them() {
    let mut host = MapHost::default();
    host.map
        .lock()
        .unwrap()
        .insert(b"stale".to_vec(), b"x".to_vec());
    run_on(&mut host, &["--benchmarks=fillseq", "--num=10", "--seed=3"]);
    assert_eq!(host.map.lock().unwrap().len(), 10);
    assert!(
        host.destroyed >= 2,
        "destroyed at start and before the fill"
    );
    let destroyed = host.destroyed;
    let (res, text) = run_on(
        &mut host,
        &[
            "--benchmarks=fillrandom,readrandom",
            "--num=10",
            "--seed=3",
            "--use_existing_db",
        ],
    );
    assert_eq!(host.destroyed, destroyed, "nothing destroyed");
    assert!(text.contains("fillrandom   : skipped (--use_existing_db is true)"));
    assert_eq!(res.len(), 1);
    assert_eq!(res[0].found.unwrap().1, 10);
}

#[test]
fn readwhilewriting_reports_the_readers_only_and_histograms_print() {
    let mut host = MapHost::default();
    let (res, text) = run_on(
        &mut host,
        &[
            "--benchmarks=fillseq,fillseq,readwhilewriting",
            "--num=200",
            "--threads=2",
            "--seed=9",
            "--histogram",
            "--statistics",
        ],
    );
    let rww = &res[2];
    assert_eq!(
        rww.stats.done(),
        400,
        "two readers × --reads, not the writer"
    );
    assert_eq!(rww.found, Some((400, 400)), "fillseq wrote every key");
    assert!(
        text.contains("Microseconds per write:\nCount: 400 "),
        "{text}"
    );
    assert!(
        text.contains("Microseconds per read:\nCount: 400 "),
        "{text}"
    );
    assert!(text.contains("Percentiles: P50: "));
    // Both stores of the process count: 2 × fillseq (2 threads × 200 puts) and the writer.
    let written: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("kvdemo.bytes.written COUNT : "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(written >= 2 * 400 * 116, "{written}");
    let flushed = format!("kvdemo.flush.write.bytes COUNT : {written}\n");
    assert!(text.contains(&flushed), "{text}");
    assert!(
        !text.contains("kvdemo.compact.write.bytes"),
        "unknown counters are not printed"
    );
}

#[test]
fn default_cores_count_the_readwhilewriting_writer_and_shards_the_readers() {
    use kv_demo::bench::kv_engine::cores_and_shards;
    let all = "--benchmarks=fillseq,readrandom,readwhilewriting";
    let no_rww = "--benchmarks=fillseq,readrandom";
    // (flags, CPUs) -> (cores, shards)
    let cases: [(&[&str], usize, (usize, usize)); 8] = [
        (&[all], 2, (2, 1)),
        (&[all], 1, (1, 1)),
        (&[no_rww], 2, (1, 1)),
        (&[all, "--threads=2"], 2, (2, 2)),
        (&[all, "--threads=2"], 8, (3, 2)),
        (&[all, "--shards=2"], 2, (2, 2)),
        // Given cores: one shard per core unless --shards.
        (&[all, "--cores=2"], 8, (2, 2)),
        (&[no_rww, "--cores=3", "--shards=1"], 8, (3, 1)),
    ];
    for (flags, cpus, want) in cases {
        assert_eq!(
            cores_and_shards(&config(flags), cpus),
            want,
            "{flags:?} on {cpus} CPUs"
        );
    }
}
