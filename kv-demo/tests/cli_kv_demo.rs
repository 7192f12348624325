//! The `kv-demo` binary end to end on a temporary `emu:` device: db_bench's lines, read with
//! the parser `rocksdb-bench` and `kv-bench` use for db_bench's own output; flag errors;
//! a foreign device is refused and left alone.

use std::process::{Command, Output};

use ziob_benches::db_bench::Output as DbBenchOutput;

/// Runs the binary with mimalloc's purge delay left to the binary (it keeps freed memory).
fn kv_demo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kv-demo"))
        .env_remove("MIMALLOC_PURGE_DELAY")
        .env_remove("MIMALLOC_RESET_DELAY")
        .args(args)
        .output()
        .expect("kv-demo runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_small_run_prints_db_bench_lines_that_the_db_bench_parser_reads() {
    let dir = tempfile::tempdir().unwrap();
    let spec = format!("emu:{}", dir.path().join("dev.zns").display());
    let db = format!("--db={spec}");
    let out = kv_demo(&[
        "--benchmarks=fillrandom,overwrite,readrandom,readseq,seekrandom,deleterandom,readrandom",
        "--num=3000",
        "--seed=42",
        "--cores=1",
        "--write_buffer_size=65536",
        "--bloom_bits=10",
        "--histogram",
        "--statistics",
        &db,
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // Piped: no progress bar, nothing on stderr.
    assert_eq!(stderr, "");
    // The binary faulted its configured buffers in before the store opened (mimalloc
    // keeps them), and said so.
    #[cfg(feature = "mimalloc")]
    assert!(stdout.contains("MiB stayed resident"), "{stdout}");
    let parsed = DbBenchOutput::parse(&stdout);
    let names: Vec<&str> = parsed.results.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "fillrandom",
            "overwrite",
            "readrandom",
            "readseq",
            "seekrandom",
            "deleterandom",
            "readrandom"
        ]
    );
    for r in &parsed.results {
        if r.name != "readseq" {
            assert_eq!(r.operations, Some(3000), "{r:?}");
        }
        assert!(r.ops_per_sec > 0.0 && r.micros_per_op > 0.0, "{r:?}");
        assert!(r.seconds.is_some());
    }
    let fill = parsed.result("fillrandom").unwrap();
    assert!(fill.mb_per_sec.is_some());
    // The draws are db_bench's: with --seed=42 and 3000 keys, fillrandom + overwrite leave
    // the keys readrandom then finds (the count depends only on the seed).
    let reads: Vec<_> = parsed
        .results
        .iter()
        .filter(|r| r.name == "readrandom")
        .map(|r| r.found.unwrap())
        .collect();
    assert_eq!(reads[0].1, 3000);
    assert!(reads[0].0 > 2000, "{reads:?}");
    assert!(
        reads[1].0 < reads[0].0,
        "deleterandom removed keys: {reads:?}"
    );
    let readseq = parsed.result("readseq").unwrap();
    assert!(readseq.operations.unwrap() > 2000);
    assert!(stdout.contains("Microseconds per write:\nCount: 3000 "));
    assert!(stdout.contains("Percentiles: P50: "));
    assert!(parsed.ticker("kvdemo.bytes.written") > 0);
}

#[test]
fn the_same_seed_finds_what_db_bench_finds() {
    // db_bench 7.8.3: `--benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq
    // --num=20000 --seed=5 --compression_type=none` prints `(17362 of 20000 found)` and
    // readseq `17251 operations`.
    // Also with device options after the path: fillrandom must still start from an empty
    // store (the wipe once looked for a file named `dev.zns,direct=0`, found none, and kept
    // fillseq's keys).
    for options in ["", ",direct=0"] {
        let dir = tempfile::tempdir().unwrap();
        let db = format!("--db=emu:{}{options}", dir.path().join("dev.zns").display());
        let out = kv_demo(&[
            "--benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq",
            "--num=20000",
            "--seed=5",
            &db,
        ]);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
        let parsed = DbBenchOutput::parse(&stdout);
        assert_eq!(
            parsed.result("readrandom").unwrap().found,
            Some((17362, 20000)),
            "{db}"
        );
        assert_eq!(
            parsed.result("readseq").unwrap().operations,
            Some(17251),
            "{db}"
        );
    }
}

#[test]
fn bad_flags_and_foreign_devices_are_refused() {
    let out = kv_demo(&["--benchmarks=fillrandom,nosuch"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("nosuch"));
    let out = kv_demo(&["--threads=0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--threads=0"));
    let out = kv_demo(&["--compression_type=snappy"]);
    assert!(text(&out.stderr).contains("only `none`"));
    if !cfg!(feature = "peers") {
        let out = kv_demo(&["--engine=fjall"]);
        assert_eq!(out.status.code(), Some(1));
        assert!(text(&out.stderr).contains("`peers` feature"));
    }
    // A file that is not a kv-demo device: the fill's "destroy" opens it first and refuses.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("foreign.zns");
    let junk = vec![0xABu8; 1 << 20];
    std::fs::write(&path, &junk).unwrap();
    let out = kv_demo(&[
        "--benchmarks=fillseq",
        "--num=10",
        &format!("--db=emu:{}", path.display()),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(text(&out.stderr).starts_with("kv-demo: kv-demo: "));
    assert_eq!(std::fs::read(&path).unwrap(), junk, "left untouched");
}

/// Keys one db_bench thread with `seed` writes or reads at random: a draw for the database,
/// then the key.
fn drawn_keys(seed: u64, n: u64, num: u64) -> Vec<Vec<u8>> {
    let mut r = kv_demo::bench::rng::Random64::new(seed);
    (0..n)
        .map(|_| {
            r.next_u64();
            kv_demo::bench::keys::key_from_int(r.next_u64() % num, 16)
        })
        .collect()
}

#[test]
fn use_existing_db_reads_what_an_earlier_process_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db=emu:{}", dir.path().join("dev.zns").display());
    let num = 4000u64;
    let n = format!("--num={num}");
    let out = kv_demo(&["--benchmarks=fillrandom", &n, "--seed=7", "--cores=1", &db]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = kv_demo(&[
        "--benchmarks=fillseq,readrandom",
        &n,
        "--seed=9",
        "--use_existing_db",
        &db,
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("fillseq      : skipped (--use_existing_db is true)"));
    // Each process's first thread draws from its seed + 1.
    let written: std::collections::HashSet<_> = drawn_keys(8, num, num).into_iter().collect();
    let want = drawn_keys(10, num, num)
        .iter()
        .filter(|k| written.contains(*k))
        .count() as u64;
    assert!(want > num / 2 && want < num, "{want}");
    let parsed = DbBenchOutput::parse(&stdout);
    assert_eq!(
        parsed.result("readrandom").unwrap().found,
        Some((want, num))
    );
}

/// A store keeps the shard count it was made with: a run of other `--threads` or `--cores`
/// reads it with `--use_existing_db` and replaces it without.
#[test]
fn runs_with_other_thread_counts_reuse_or_replace_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db=emu:{}", dir.path().join("dev.zns").display());
    let ok = |args: &[&str]| {
        let out = kv_demo(args);
        let stdout = text(&out.stdout);
        assert!(
            out.status.success(),
            "{args:?}\n{stdout}{}",
            text(&out.stderr)
        );
        DbBenchOutput::parse(&stdout)
    };
    // One shard (one core), then read by two threads on two cores, and by readwhilewriting
    // (three cores' worth of threads).
    ok(&["--benchmarks=fillseq", "--num=2000", "--cores=1", &db]);
    for flags in [
        ["--benchmarks=readrandom", "--cores=2"],
        ["--benchmarks=readrandom", "--threads=2"],
        ["--benchmarks=readwhilewriting", "--threads=2"],
    ] {
        let parsed = ok(&[flags[0], flags[1], "--num=2000", "--use_existing_db", &db]);
        let found = parsed.results[0].found.unwrap();
        assert!(found.0 > 0, "{flags:?}: {found:?}");
    }
    // Without --use_existing_db the one-shard store is destroyed and a two-shard one made.
    let parsed = ok(&[
        "--benchmarks=fillseq,readrandom",
        "--num=2000",
        "--threads=2",
        &db,
    ]);
    let found = parsed.result("readrandom").unwrap().found.unwrap();
    assert!(found.0 == found.1 && found.0 > 0, "{found:?}");
}

/// `--prefault_memory=0` faults nothing in and prints no `Prefault:` line; a size is
/// faulted in as given.
#[test]
fn prefault_memory_zero_turns_the_prefault_off() {
    let off = kv_demo(&["--benchmarks=fillseq", "--num=100", "--prefault_memory=0"]);
    assert!(off.status.success(), "{}", text(&off.stderr));
    assert!(
        !text(&off.stdout).contains("Prefault:"),
        "{}",
        text(&off.stdout)
    );
    let two = kv_demo(&["--benchmarks=fillseq", "--num=100", "--prefault_memory=2M"]);
    assert!(two.status.success(), "{}", text(&two.stderr));
    let out = text(&two.stdout);
    let line = out.lines().find(|l| l.starts_with("Prefault:")).unwrap();
    #[cfg(feature = "mimalloc")]
    assert!(line.contains("2.0 MiB written"), "{line}");
    #[cfg(not(feature = "mimalloc"))]
    assert!(line.contains("none"), "{line}");
}

#[test]
fn benchmark_write_rate_limit_holds_the_writes_to_the_rate() {
    // 300 writes of 116 bytes at 58,000 bytes/s take about 0.6 s (500 writes/s, less at most
    // 100 ms of catch-up); without the limit this fill runs at 100,000s per second. Noise
    // can only slow it further. Readwhilewriting's writer is held to the rate too.
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db=emu:{}", dir.path().join("dev.zns").display());
    let out = kv_demo(&[
        "--benchmarks=fillrandom,readwhilewriting",
        "--num=300",
        "--reads=3000",
        "--value_size=100",
        "--benchmark_write_rate_limit=58000",
        "--prefault_memory=0",
        "--statistics",
        &db,
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let parsed = DbBenchOutput::parse(&stdout);
    let fill = &parsed.results[0];
    assert_eq!(fill.name, "fillrandom");
    assert!(fill.ops_per_sec < 1000.0, "{stdout}");
    let rww = &parsed.results[1];
    assert_eq!(rww.name, "readwhilewriting");
    // User bytes written in all: the fill's, then the writer's during readwhilewriting.
    let written: f64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("kvdemo.bytes.written COUNT : "))
        .expect("--statistics prints the user bytes")
        .trim()
        .parse()
        .unwrap();
    let writer = written - 300.0 * 116.0;
    let allowed = 58_000.0 * (rww.seconds.unwrap() + 0.1) + 116.0;
    assert!(
        writer <= allowed,
        "writer wrote {writer} bytes, at most {allowed}\n{stdout}"
    );
    // A bad value is refused with the flag named.
    let bad = kv_demo(&["--benchmarks=fillseq", "--benchmark_write_rate_limit=fast"]);
    assert!(!bad.status.success());
    assert!(
        text(&bad.stderr).contains("benchmark_write_rate_limit"),
        "{}",
        text(&bad.stderr)
    );
}
