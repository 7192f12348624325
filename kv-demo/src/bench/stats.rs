//! Per-thread measurements and db_bench's report: the result line
//! (`Stats::Report` in `tools/db_bench_tool.cc` 7.8.3) and, with `--histogram`, the
//! per-operation latency summary (`HistogramStat::ToString` in `monitoring/histogram.cc`).

use std::collections::BTreeMap;
use std::time::Instant;

use hdrhistogram::Histogram;

/// The kind of operation a latency sample belongs to (db_bench's `OperationType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OpKind {
    /// `get` / iterator step.
    Read,
    /// `put`.
    Write,
    /// `delete`.
    Delete,
    /// `seek`.
    Seek,
}

impl OpKind {
    /// db_bench's name (`Microseconds per read:`).
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Delete => "delete",
            OpKind::Seek => "seek",
        }
    }
}

/// One thread's measurements of one benchmark.
#[derive(Debug, Clone)]
pub struct Stats {
    start: Instant,
    finish: Instant,
    /// Sum of the threads' own elapsed seconds (db_bench's `seconds_`, for micros/op).
    seconds: f64,
    done: u64,
    bytes: u64,
    message: String,
    exclude_from_merge: bool,
    histogram: bool,
    last_op_finish: Instant,
    hist: BTreeMap<OpKind, Histogram<u64>>,
}

impl Stats {
    /// Starts measuring now; `histogram` records each operation's latency.
    pub fn start(histogram: bool) -> Stats {
        let now = Instant::now();
        Stats {
            start: now,
            finish: now,
            seconds: 0.0,
            done: 0,
            bytes: 0,
            message: String::new(),
            exclude_from_merge: false,
            histogram,
            last_op_finish: now,
            hist: BTreeMap::new(),
        }
    }

    /// `n` operations of kind `kind` finished (db_bench's `FinishedOps`): with histograms,
    /// the time since the previous one is one sample in microseconds.
    pub fn finished_ops(&mut self, n: u64, kind: OpKind) {
        if self.histogram {
            let now = Instant::now();
            let micros = now.duration_since(self.last_op_finish).as_micros() as u64;
            self.hist
                .entry(kind)
                .or_insert_with(|| Histogram::new(3).expect("3 significant figures is valid"))
                .saturating_record(micros);
            self.last_op_finish = now;
        }
        self.done += n;
    }

    /// Starts the next operation's latency from now (db_bench's `ResetLastOpTime`): a
    /// wait for the write rate is not an operation's latency.
    pub fn reset_last_op_time(&mut self) {
        if self.histogram {
            self.last_op_finish = Instant::now();
        }
    }

    /// Operations done so far.
    pub fn done(&self) -> u64 {
        self.done
    }

    /// Adds user bytes (key + value) moved.
    pub fn add_bytes(&mut self, n: u64) {
        self.bytes += n;
    }

    /// Appends a message (`(N of M found)`) to the result line.
    pub fn add_message(&mut self, msg: &str) {
        if !self.message.is_empty() {
            self.message.push(' ');
        }
        self.message.push_str(msg);
    }

    /// This thread's numbers are not merged (readwhilewriting's writer).
    pub fn exclude_from_merge(&mut self) {
        self.exclude_from_merge = true;
    }

    /// Stops the clock.
    pub fn stop(&mut self) {
        self.finish = Instant::now();
        self.seconds = self.finish.duration_since(self.start).as_secs_f64();
    }

    /// Merges another thread's measurements into these (db_bench's `Stats::Merge`).
    pub fn merge(&mut self, other: &Stats) {
        if other.exclude_from_merge {
            return;
        }
        for (k, h) in &other.hist {
            match self.hist.get_mut(k) {
                Some(mine) => {
                    let _ = mine.add(h);
                }
                None => {
                    self.hist.insert(*k, h.clone());
                }
            }
        }
        self.done += other.done;
        self.bytes += other.bytes;
        self.seconds += other.seconds;
        self.start = self.start.min(other.start);
        self.finish = self.finish.max(other.finish);
        if self.message.is_empty() {
            self.message = other.message.clone();
        }
    }

    /// Merges the threads of one benchmark: the first thread not excluded is the base.
    pub fn merge_all(all: &[Stats]) -> Option<Stats> {
        let mut it = all.iter().filter(|s| !s.exclude_from_merge);
        let mut total = it.next()?.clone();
        for s in it {
            total.merge(s);
        }
        Some(total)
    }

    /// The report of benchmark `name`: db_bench's result line, then with `--histogram`
    /// one latency summary per operation kind.
    pub fn report(&self, name: &str) -> String {
        let done = self.done.max(1);
        let elapsed = self.finish.duration_since(self.start).as_secs_f64();
        let mut out = result_line(name, self.seconds, elapsed, done, self.bytes, &self.message);
        if self.histogram {
            for (k, h) in &self.hist {
                out.push_str(&format!(
                    "Microseconds per {}:\n{}\n",
                    k.name(),
                    histogram_text(h)
                ));
            }
        }
        out
    }
}

/// db_bench's result line (with its newline):
/// `%-12s : %11.3f micros/op %ld ops/sec %.3f seconds %lu operations;%s%s`, where the tail
/// is `%6.1f MB/s` when bytes were counted, then the message. `thread_seconds` is the sum
/// of the threads' own times (for micros/op), `elapsed` the wall time (for ops/sec).
pub fn result_line(
    name: &str,
    thread_seconds: f64,
    elapsed: f64,
    done: u64,
    bytes: u64,
    message: &str,
) -> String {
    let done = done.max(1);
    let mut extra = String::new();
    if bytes > 0 {
        extra = format!("{:6.1} MB/s", (bytes as f64 / 1_048_576.0) / elapsed);
    }
    if !message.is_empty() {
        if !extra.is_empty() {
            extra.push(' ');
        }
        extra.push_str(message);
    }
    let throughput = done as f64 / elapsed;
    format!(
        "{:<12} : {:11.3} micros/op {} ops/sec {:.3} seconds {} operations;{}{}\n",
        name,
        thread_seconds * 1e6 / done as f64,
        throughput as i64,
        elapsed,
        done,
        if extra.is_empty() { "" } else { " " },
        extra
    )
}

/// The summary lines of RocksDB's `HistogramStat::ToString` for one histogram
/// (microseconds): count, average, standard deviation, min, median, max and the
/// percentiles P50 P75 P99 P99.9 P99.99, then the dashed rule. RocksDB's bucket table
/// after the rule is not printed (hdrhistogram has other buckets).
pub fn histogram_text(h: &Histogram<u64>) -> String {
    let n = h.len();
    let (min, max) = if n == 0 { (0, 0) } else { (h.min(), h.max()) };
    let p = |q: f64| h.value_at_quantile(q / 100.0) as f64;
    format!(
        "Count: {n} Average: {:.4}  StdDev: {:.2}\n\
         Min: {min}  Median: {:.4}  Max: {max}\n\
         Percentiles: P50: {:.2} P75: {:.2} P99: {:.2} P99.9: {:.2} P99.99: {:.2}\n\
         ------------------------------------------------------",
        h.mean(),
        h.stdev(),
        p(50.0),
        p(50.0),
        p(75.0),
        p(99.0),
        p(99.9),
        p(99.99),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_line_has_db_bench_columns() {
        let l = result_line("fillrandom", 1.347, 1.347, 200_000, 200_000 * 116, "");
        assert_eq!(
            l,
            "fillrandom   :       6.735 micros/op 148478 ops/sec 1.347 seconds 200000 operations;   16.4 MB/s\n"
        );
        let r = result_line("readrandom", 2.0, 1.0, 10, 0, "(3 of 10 found)\n");
        assert!(r.ends_with("10 operations; (3 of 10 found)\n\n"), "{r:?}");
        let long = result_line("readwhilewriting", 1.0, 1.0, 1, 0, "");
        assert!(long.starts_with("readwhilewriting :"));
    }

    #[test]
    fn histogram_lines_as_rocksdb_prints_them() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in 1..=100 {
            h.record(v).unwrap();
        }
        let t = histogram_text(&h);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "Count: 100 Average: 50.5000  StdDev: 28.87");
        assert_eq!(lines[1], "Min: 1  Median: 50.0000  Max: 100");
        assert_eq!(
            lines[2],
            "Percentiles: P50: 50.00 P75: 75.00 P99: 99.00 P99.9: 100.00 P99.99: 100.00"
        );
        assert_eq!(lines[3], "-".repeat(54));
    }

    #[test]
    fn merge_sums_ops_and_thread_time_and_skips_the_excluded() {
        let mut a = Stats::start(false);
        a.finished_ops(5, OpKind::Read);
        a.stop();
        let mut b = Stats::start(false);
        b.finished_ops(7, OpKind::Read);
        b.add_message("(1 of 7 found)");
        b.stop();
        let mut w = Stats::start(false);
        w.finished_ops(100, OpKind::Write);
        w.exclude_from_merge();
        w.stop();
        let m = Stats::merge_all(&[w, a, b]).unwrap();
        assert_eq!(m.done(), 12);
        assert!(m
            .report("readwhilewriting")
            .contains("12 operations; (1 of 7 found)"));
    }
}
