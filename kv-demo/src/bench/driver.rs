//! Runs the benchmarks as db_bench 7.8.3 does (`Benchmark::Run`, `RunBenchmark` and the
//! benchmark methods of `tools/db_bench_tool.cc`), on any [`Engine`]:
//!
//! - the store is destroyed at the start unless `--use_existing_db`, and again before each
//!   fill (a fill with `--use_existing_db` prints `skipped`);
//! - each benchmark runs `--threads` threads (readwhilewriting one more, the writer, whose
//!   numbers are not reported); thread *k* of the process (counting from 1 across all
//!   benchmarks) draws from `mt19937_64(seed + k)`, and draws exactly as db_bench does
//!   (fillrandom/overwrite/readrandom/deleterandom/the writer first draw once to pick a
//!   database, then the key), so the same `--seed` gives the same keys;
//! - every thread does the full count (`--num` writes, `--reads` reads, `--deletes`
//!   deletes), values come from db_bench's generator, and the report is db_bench's.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::engine::{Cursor, Engine, EngineError, EngineHost, EngineStats, Placement};
use super::flags::{BenchConfig, BenchName};
use super::keys::{fill_key, key_from_int};
use super::progress::{Counter, Progress};
use super::rng::Random64;
use super::stats::{OpKind, Stats};
use super::values::ValueGenerator;
use super::write_rate::WriteRate;

/// A benchmark run failed.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Writing the report failed.
    #[error("writing the report: {0}")]
    Output(#[from] std::io::Error),
    /// A benchmark task could not run on the ZIOB runtime.
    #[error("running a benchmark task on the ZIOB runtime: {0}")]
    Runtime(String),
    /// A benchmark thread panicked.
    #[error("a benchmark thread panicked")]
    Panicked,
}

/// One benchmark's merged measurements.
#[derive(Debug, Clone)]
pub struct BenchResult {
    /// The benchmark.
    pub bench: BenchName,
    /// Threads merged (the readwhilewriting writer excluded).
    pub stats: Stats,
    /// `(found, read)` of readrandom, readwhilewriting and seekrandom.
    pub found: Option<(u64, u64)>,
}

/// Operations between two yields to the core when the threads are ZIOB tasks.
const YIELD_EVERY: u64 = 32;
/// Operations between two updates of the shared progress counter.
const PROGRESS_EVERY: u64 = 256;

/// What one benchmark thread does.
struct Work {
    bench: BenchName,
    tid: usize,
    rand: Random64,
    cfg: Arc<BenchConfig>,
    values: ValueGenerator,
    progress: Counter,
    readers_left: Arc<AtomicUsize>,
    yields: bool,
    /// `--benchmark_write_rate_limit`'s budget, shared by the benchmark's threads.
    write_rate: Option<Arc<WriteRate>>,
}

/// Runs `cfg`'s benchmarks on `host`'s store, writing db_bench's report to `out`.
pub fn run<H: EngineHost>(
    cfg: &BenchConfig,
    host: &mut H,
    out: &mut dyn Write,
    progress_bar: bool,
) -> Result<Vec<BenchResult>, DriverError> {
    write_header(cfg, out)?;
    if !cfg.use_existing_db {
        host.destroy()?;
    }
    let mut engine = Some(Arc::new(host.open()?));
    let shared_cfg = Arc::new(cfg.clone());
    let values = ValueGenerator::new(cfg.value_size, cfg.compression_ratio);
    let mut threads_so_far = 0u64;
    let mut results = Vec::new();
    // Counters of the stores closed before a fill, so that `--statistics` covers the whole
    // process as RocksDB's statistics object (made once per db_bench process) does.
    let mut earlier: Option<EngineStats> = None;
    let outcome = (|| -> Result<(), DriverError> {
        for &bench in &cfg.benchmarks {
            if bench.fresh() {
                if cfg.use_existing_db {
                    writeln!(
                        out,
                        "{:<12} : skipped (--use_existing_db is true)",
                        bench.name()
                    )?;
                    continue;
                }
                let e = engine.take().expect("the store is open between benchmarks");
                let s = futures::executor::block_on(e.stats());
                earlier = Some(earlier.map_or(s, |x| x.plus(s)));
                close(host, e)?;
                host.destroy()?;
                engine = Some(Arc::new(host.open()?));
            }
            writeln!(out, "DB path: [{}]", host.describe())?;
            out.flush()?;
            let e = engine
                .as_ref()
                .expect("the store is open between benchmarks");
            log_shape(e.as_ref(), "before", bench);
            let n = cfg.threads + usize::from(bench == BenchName::Readwhilewriting);
            let counter = Counter::default();
            let readers_left = Arc::new(AtomicUsize::new(cfg.threads));
            let yields = matches!(e.placement(), Placement::Ziob(_));
            let write_rate = WriteRate::starting_now(cfg.write_rate_limit).map(Arc::new);
            let works: Vec<Work> = (0..n)
                .map(|tid| {
                    threads_so_far += 1;
                    Work {
                        bench,
                        tid,
                        rand: Random64::new(cfg.seed.wrapping_add(threads_so_far)),
                        cfg: shared_cfg.clone(),
                        values: values.clone(),
                        progress: counter.clone(),
                        readers_left: readers_left.clone(),
                        yields,
                        write_rate: write_rate.clone(),
                    }
                })
                .collect();
            let bar = Progress::start(
                bench.name(),
                expected_ops(cfg, bench),
                &counter,
                progress_bar,
            );
            let per_thread = run_threads(e, works);
            bar.finish();
            let per_thread = per_thread?;
            let found = per_thread
                .iter()
                .filter_map(|(_, f)| *f)
                .reduce(|a, b| (a.0 + b.0, a.1 + b.1));
            let all: Vec<Stats> = per_thread.into_iter().map(|(s, _)| s).collect();
            let merged = Stats::merge_all(&all).expect("at least one reporting thread");
            log_shape(e.as_ref(), "after", bench);
            out.write_all(merged.report(bench.name()).as_bytes())?;
            out.flush()?;
            results.push(BenchResult {
                bench,
                stats: merged,
                found,
            });
        }
        if cfg.statistics {
            let e = engine
                .as_ref()
                .expect("the store is open between benchmarks");
            let now = futures::executor::block_on(e.stats());
            let s = earlier.map_or(now, |x| x.plus(now));
            write_statistics(&s, out)?;
        }
        Ok(())
    })();
    if let Some(e) = engine.take() {
        let closed = close(host, e);
        outcome?;
        closed?;
    } else {
        outcome?;
    }
    Ok(results)
}

fn close<H: EngineHost>(host: &mut H, e: Arc<H::Engine>) -> Result<(), DriverError> {
    match Arc::try_unwrap(e) {
        Ok(e) => Ok(host.close(e)?),
        Err(_) => Err(DriverError::Runtime(
            "the store is still in use by a benchmark task".into(),
        )),
    }
}

/// The operations a benchmark is expected to do (for the progress bar).
fn expected_ops(cfg: &BenchConfig, bench: BenchName) -> u64 {
    let per = match bench {
        BenchName::Fillseq | BenchName::Fillrandom | BenchName::Overwrite => cfg.num,
        BenchName::Deleterandom => cfg.deletes,
        BenchName::Readseq => cfg.reads.min(cfg.num),
        _ => cfg.reads,
    };
    per * cfg.threads as u64
}

/// db_bench's header lines (stdout part), for `--compression_type=none`.
pub fn write_header(cfg: &BenchConfig, out: &mut dyn Write) -> std::io::Result<()> {
    if cfg.seed_from_clock {
        writeln!(out, "Set seed to {} because --seed was 0", cfg.seed)?;
    }
    let (k, v, n) = (cfg.key_size as f64, cfg.value_size as f64, cfg.num as f64);
    writeln!(
        out,
        "Keys:       {} bytes each (+ 0 bytes user-defined timestamp)",
        cfg.key_size
    )?;
    writeln!(
        out,
        "Values:     {} bytes each ({} bytes after compression)",
        cfg.value_size,
        (v * cfg.compression_ratio + 0.5) as i64
    )?;
    writeln!(out, "Entries:    {}", cfg.num)?;
    writeln!(
        out,
        "RawSize:    {:.1} MB (estimated)",
        (k + v) * n / 1_048_576.0
    )?;
    writeln!(
        out,
        "FileSize:   {:.1} MB (estimated)",
        (k + v * cfg.compression_ratio) * n / 1_048_576.0
    )?;
    writeln!(out, "Compression: NoCompression")?;
    writeln!(out, "Engine:     {}", engine_line(cfg))?;
    writeln!(out, "------------------------------------------------")?;
    Ok(())
}

fn engine_line(cfg: &BenchConfig) -> String {
    match cfg.engine {
        super::flags::EngineName::KvDemo => format!(
            "kv-demo (ZIOB buffer {}, sync {})",
            if cfg.ziob_buffered { "on" } else { "off" },
            u8::from(cfg.sync)
        ),
        super::flags::EngineName::Fjall => format!("fjall (sync {})", u8::from(cfg.sync)),
    }
}

/// The stores' write counters (every store the process opened) in the form of db_bench's `--statistics` tickers
/// (`NAME COUNT : N`), under `kvdemo.`: user bytes, then flush, compaction and device
/// bytes where the engine counts them.
pub fn write_statistics(s: &EngineStats, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "STATISTICS:")?;
    writeln!(out, "kvdemo.bytes.written COUNT : {}", s.user_bytes)?;
    if let Some(f) = s.flush_bytes {
        writeln!(out, "kvdemo.flush.write.bytes COUNT : {f}")?;
    }
    if let Some(c) = s.compaction_bytes {
        writeln!(out, "kvdemo.compact.write.bytes COUNT : {c}")?;
    }
    if let Some(d) = s.device_bytes {
        writeln!(out, "kvdemo.device.write.bytes COUNT : {d}")?;
    }
    Ok(())
}

type ThreadOutcome = (Stats, Option<(u64, u64)>);

/// The runtime core benchmark thread `tid` (of `n`) runs on: thread *i* on core *i* mod
/// `cores`, except that readwhilewriting's readers (threads 1..) come first and its writer
/// (thread 0) last. The readers are what the benchmark measures: with one reader on a
/// two-core store whose shard is on core 0, the reader runs on core 0, next to the data it
/// reads, and the writer on core 1.
fn core_of(bench: BenchName, tid: usize, n: usize, cores: usize) -> usize {
    let slot = if bench == BenchName::Readwhilewriting {
        (tid + n - 1) % n
    } else {
        tid
    };
    slot % cores
}

fn run_threads<E: Engine>(
    engine: &Arc<E>,
    works: Vec<Work>,
) -> Result<Vec<ThreadOutcome>, DriverError> {
    match engine.placement() {
        Placement::Threads => std::thread::scope(|s| {
            let handles: Vec<_> = works
                .into_iter()
                .map(|w| {
                    let e = engine.clone();
                    s.spawn(move || futures::executor::block_on(thread_body(e, w)))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .map_err(|_| DriverError::Panicked)?
                        .map_err(Into::into)
                })
                .collect()
        }),
        Placement::Ziob(handle) => {
            let cores = handle.cores().max(1);
            let n = works.len();
            let calls: Vec<_> = works
                .into_iter()
                .map(|w| {
                    let e = engine.clone();
                    let core = core_of(w.bench, w.tid, n, cores);
                    handle.call(core, move || thread_body(e, w))
                })
                .collect();
            futures::executor::block_on(futures::future::join_all(calls))
                .into_iter()
                .map(|r| match r {
                    Ok(r) => r.map_err(Into::into),
                    Err(e) => Err(DriverError::Runtime(e.to_string())),
                })
                .collect()
        }
    }
}

/// Lets other tasks of the core run (used between operations on a ZIOB core).
async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await
}

/// Logs the store's shape (`RUST_LOG=kv_demo=info`) `when` (before or after) `bench`; asks
/// the store only when the line is printed.
fn log_shape<E: Engine>(e: &E, when: &str, bench: BenchName) {
    if !tracing::enabled!(tracing::Level::INFO) {
        return;
    }
    if let Some(shape) = futures::executor::block_on(e.shape()) {
        tracing::info!("{when} {}: {shape}", bench.name());
    }
}

/// Counts one finished operation: progress and cooperative yields.
async fn tick(w: &Work, done: u64) {
    if done.is_multiple_of(PROGRESS_EVERY) {
        w.progress.add(PROGRESS_EVERY);
    }
    if w.yields && done.is_multiple_of(YIELD_EVERY) {
        yield_now().await;
    }
}

async fn thread_body<E: Engine>(e: Arc<E>, mut w: Work) -> Result<ThreadOutcome, EngineError> {
    let mut stats = Stats::start(w.cfg.histogram);
    let found = match w.bench {
        BenchName::Fillseq => {
            write_keys(&*e, &mut w, &mut stats, true).await?;
            None
        }
        BenchName::Fillrandom | BenchName::Overwrite => {
            write_keys(&*e, &mut w, &mut stats, false).await?;
            None
        }
        BenchName::Readrandom => Some(read_random(&*e, &mut w, &mut stats).await?),
        BenchName::Readwhilewriting if w.tid == 0 => {
            background_writer(&*e, &mut w, &mut stats).await?;
            None
        }
        BenchName::Readwhilewriting => {
            let r = read_random(&*e, &mut w, &mut stats).await;
            w.readers_left.fetch_sub(1, Ordering::AcqRel);
            Some(r?)
        }
        BenchName::Readseq => {
            read_seq(&*e, &mut w, &mut stats).await?;
            None
        }
        BenchName::Seekrandom => Some(seek_random(&*e, &mut w, &mut stats).await?),
        BenchName::Deleterandom => {
            delete_random(&*e, &mut w, &mut stats).await?;
            None
        }
    };
    w.progress.add(stats.done() % PROGRESS_EVERY);
    stats.stop();
    Ok((stats, found))
}

/// fillseq (keys in order), fillrandom and overwrite (db_bench's `DoWrite`).
async fn write_keys<E: Engine>(
    e: &E,
    w: &mut Work,
    stats: &mut Stats,
    sequential: bool,
) -> Result<(), EngineError> {
    let (num, ks, vs, sync) = (w.cfg.num, w.cfg.key_size, w.cfg.value_size, w.cfg.sync);
    let mut key = vec![0u8; ks];
    for i in 0..num {
        let k = if sequential {
            i
        } else {
            let _db = w.rand.next_u64(); // picks one of db_bench's databases
            w.rand.next_u64() % num
        };
        fill_key(k, &mut key);
        let value = w.values.generate(vs);
        if let Some(r) = &w.write_rate {
            r.admit((ks + vs) as u64, w.yields).await;
            stats.reset_last_op_time();
        }
        e.put(&key, value, sync).await?;
        stats.finished_ops(1, OpKind::Write);
        stats.add_bytes((vs + ks) as u64);
        tick(w, i + 1).await;
    }
    Ok(())
}

/// readrandom, and the readers of readwhilewriting (db_bench's `ReadRandom`).
async fn read_random<E: Engine>(
    e: &E,
    w: &mut Work,
    stats: &mut Stats,
) -> Result<(u64, u64), EngineError> {
    let (num, ks) = (w.cfg.num, w.cfg.key_size);
    let mut key = vec![0u8; ks];
    let mut found = 0;
    for i in 0..w.cfg.reads {
        let _db = w.rand.next_u64();
        fill_key(w.rand.next_u64() % num, &mut key);
        if let Some(len) = e.get(&key).await? {
            found += 1;
            stats.add_bytes((ks + len) as u64);
        }
        stats.finished_ops(1, OpKind::Read);
        tick(w, i + 1).await;
    }
    stats.add_message(&format!("({found} of {} found)\n", w.cfg.reads));
    Ok((found, w.cfg.reads))
}

/// readwhilewriting's writer: random puts until every reader is done (`BGWriter`).
async fn background_writer<E: Engine>(
    e: &E,
    w: &mut Work,
    stats: &mut Stats,
) -> Result<(), EngineError> {
    stats.exclude_from_merge();
    let (num, ks, vs, sync) = (w.cfg.num, w.cfg.key_size, w.cfg.value_size, w.cfg.sync);
    let mut key = vec![0u8; ks];
    let mut i = 0u64;
    loop {
        let _db = w.rand.next_u64();
        if w.readers_left.load(Ordering::Acquire) == 0 {
            break;
        }
        fill_key(w.rand.next_u64() % num, &mut key);
        let value = w.values.generate(vs);
        if let Some(r) = &w.write_rate {
            r.admit((ks + vs) as u64, w.yields).await;
            stats.reset_last_op_time();
        }
        e.put(&key, value, sync).await?;
        stats.add_bytes((ks + vs) as u64);
        stats.finished_ops(1, OpKind::Write);
        i += 1;
        // The writer's operations are not in the progress total; it yields all the same.
        if w.yields && i.is_multiple_of(YIELD_EVERY) {
            yield_now().await;
        }
        if !w.yields && i.is_multiple_of(YIELD_EVERY) {
            std::thread::yield_now();
        }
    }
    Ok(())
}

/// readseq: one forward scan from the first key, at most `--reads` entries.
async fn read_seq<E: Engine>(e: &E, w: &mut Work, stats: &mut Stats) -> Result<(), EngineError> {
    let mut cursor = e.cursor(None).await?;
    let mut i = 0u64;
    while i < w.cfg.reads {
        match cursor.next_with(|k, v| (k.len() + v.len()) as u64).await? {
            Some(bytes) => stats.add_bytes(bytes),
            None => break,
        }
        stats.finished_ops(1, OpKind::Read);
        i += 1;
        tick(w, i).await;
    }
    Ok(())
}

/// seekrandom: a new iterator per operation, positioned at a random key; found when the
/// first key at or after it is that key (`--seek_nexts=0`, db_bench's default).
async fn seek_random<E: Engine>(
    e: &E,
    w: &mut Work,
    stats: &mut Stats,
) -> Result<(u64, u64), EngineError> {
    let (num, ks) = (w.cfg.num, w.cfg.key_size);
    let mut found = 0;
    for i in 0..w.cfg.reads {
        let key = key_from_int(w.rand.next_u64() % num, ks);
        let mut cursor = e.cursor(Some(&key)).await?;
        if cursor.next_with(|k, _| k == key.as_slice()).await? == Some(true) {
            found += 1;
        }
        stats.finished_ops(1, OpKind::Seek);
        tick(w, i + 1).await;
    }
    stats.add_message(&format!("({found} of {} found)\n", w.cfg.reads));
    Ok((found, w.cfg.reads))
}

/// deleterandom: `--deletes` deletes of random keys (`DoDelete`, no bytes counted).
async fn delete_random<E: Engine>(
    e: &E,
    w: &mut Work,
    stats: &mut Stats,
) -> Result<(), EngineError> {
    let (num, ks, sync) = (w.cfg.num, w.cfg.key_size, w.cfg.sync);
    let mut key = vec![0u8; ks];
    for i in 0..w.cfg.deletes {
        let _db = w.rand.next_u64();
        fill_key(w.rand.next_u64() % num, &mut key);
        e.delete(&key, sync).await?;
        stats.finished_ops(1, OpKind::Delete);
        tick(w, i + 1).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readwhilewriting_puts_its_readers_first_and_its_writer_last() {
        // One reader: the reader (thread 1) on core 0 with the shard, the writer on core 1.
        assert_eq!(core_of(BenchName::Readwhilewriting, 1, 2, 2), 0);
        assert_eq!(core_of(BenchName::Readwhilewriting, 0, 2, 2), 1);
        // Three readers on three cores: readers on 0, 1, 2, the writer shares core 0.
        let cores: Vec<_> = (0..4)
            .map(|t| core_of(BenchName::Readwhilewriting, t, 4, 3))
            .collect();
        assert_eq!(cores, vec![0, 0, 1, 2]);
        // Everything else: thread i on core i mod cores; one core takes all.
        for t in 0..4 {
            assert_eq!(core_of(BenchName::Readrandom, t, 4, 3), t % 3);
            assert_eq!(core_of(BenchName::Readwhilewriting, t, 4, 1), 0);
        }
    }
}
