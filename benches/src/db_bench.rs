//! Reading `db_bench`'s stdout: the result line of each benchmark, the `--statistics` tickers
//! and the level table of the `stats` benchmark (formats in /work/shared/ANCHORS.md §3 and
//! RocksDB 7.8.3's `tools/db_bench_tool.cc`, `monitoring/statistics.cc`,
//! `db/internal_stats.cc`). Shared by `rocksdb-bench` and `kv-bench`; kv-demo prints the same
//! lines (its tickers are named `kvdemo.*`), so one parser reads both tools.

use std::collections::BTreeMap;

/// One benchmark's result line, e.g.
/// `fillrandom   :       8.940 micros/op 111810 ops/sec 0.179 seconds 20000 operations;   12.4 MB/s`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ResultLine {
    /// Benchmark name (`fillrandom`).
    pub name: String,
    /// Microseconds per operation.
    pub micros_per_op: f64,
    /// Operations per second (db_bench prints it truncated to an integer).
    pub ops_per_sec: f64,
    /// Elapsed seconds (the V2 format only).
    pub seconds: Option<f64>,
    /// Operations done (the V2 format only).
    pub operations: Option<u64>,
    /// MB/s, when db_bench counted bytes.
    pub mb_per_sec: Option<f64>,
    /// `(found, of)` of a read benchmark's `(N of M found)`.
    pub found: Option<(u64, u64)>,
}

/// Parses a result line in either format RocksDB's `benchmark.sh` accepts (V1 `… ops/sec;
/// 12.4 MB/s …`, V2 `… ops/sec 0.179 seconds 20000 operations; 12.4 MB/s …`); `None` for any
/// other line (the header, `… : skipped`, statistics).
pub fn parse_result_line(line: &str) -> Option<ResultLine> {
    let t: Vec<&str> = line.split_whitespace().collect();
    if t.len() < 5 || t[1] != ":" || t[3] != "micros/op" || !t[5..].first()?.starts_with("ops/sec")
    {
        return None;
    }
    let micros_per_op = t[2].parse().ok()?;
    let ops_per_sec = t[4].parse().ok()?;
    let v2 = t.len() >= 10 && t[7] == "seconds";
    let (seconds, operations, mb_at) = if v2 {
        (t[6].parse().ok(), t[8].parse().ok(), 10)
    } else {
        (None, None, 6)
    };
    let mb_per_sec = match (t.get(mb_at), t.get(mb_at + 1)) {
        (Some(v), Some(&"MB/s")) => v.parse().ok(),
        _ => None,
    };
    let found = line.rfind('(').and_then(|i| {
        let inner = line[i + 1..]
            .strip_suffix(')')
            .or_else(|| line[i + 1..].split(')').next())?;
        let w: Vec<&str> = inner.split_whitespace().collect();
        match w.as_slice() {
            [n, "of", m, "found"] => Some((n.parse().ok()?, m.parse().ok()?)),
            _ => None,
        }
    });
    Some(ResultLine {
        name: t[0].to_string(),
        micros_per_op,
        ops_per_sec,
        seconds,
        operations,
        mb_per_sec,
        found,
    })
}

/// A ticker of `--statistics`: `rocksdb.bytes.written COUNT : 2620000` (or kv-demo's
/// `kvdemo.bytes.written COUNT : 2620000`).
pub fn parse_ticker(line: &str) -> Option<(&str, u64)> {
    let t: Vec<&str> = line.split_whitespace().collect();
    match t.as_slice() {
        [name, "COUNT", ":", n] if name.starts_with("rocksdb.") || name.starts_with("kvdemo.") => {
            Some((name, n.parse().ok()?))
        }
        _ => None,
    }
}

/// The size column of the level table's `Sum` row (` Sum     11/9   41.39 MB   0.0 …`) in
/// bytes: the live SST bytes of the column family when `stats` ran.
pub fn parse_sum_row_size(line: &str) -> Option<u64> {
    let t: Vec<&str> = line.split_whitespace().collect();
    match t.as_slice() {
        ["Sum", files, size, unit, ..] if files.contains('/') => {
            let v: f64 = size.parse().ok()?;
            let mult = match *unit {
                "KB" => 1u64 << 10,
                "MB" => 1 << 20,
                "GB" => 1 << 30,
                "TB" => 1 << 40,
                _ => return None,
            };
            Some((v * mult as f64).round() as u64)
        }
        _ => None,
    }
}

/// Everything read from one db_bench process's stdout.
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct Output {
    /// Result lines, in order.
    pub results: Vec<ResultLine>,
    /// `--statistics` tickers (the COUNT lines; histograms are not kept).
    pub tickers: BTreeMap<String, u64>,
    /// Live SST bytes from the last level table (`stats` benchmark).
    pub live_sst_bytes: Option<u64>,
}

impl Output {
    /// Parses a whole stdout.
    pub fn parse(stdout: &str) -> Output {
        let mut o = Output::default();
        for line in stdout.lines() {
            if let Some(r) = parse_result_line(line) {
                o.results.push(r);
            } else if let Some((k, v)) = parse_ticker(line) {
                o.tickers.insert(k.to_string(), v);
            } else if let Some(b) = parse_sum_row_size(line) {
                o.live_sst_bytes = Some(b);
            }
        }
        o
    }

    /// The result line of benchmark `name`.
    pub fn result(&self, name: &str) -> Option<&ResultLine> {
        self.results.iter().find(|r| r.name == name)
    }

    /// The ticker `name`, 0 when absent.
    pub fn ticker(&self, name: &str) -> u64 {
        self.tickers.get(name).copied().unwrap_or(0)
    }

    /// Write amplification of the process: (flush + compaction bytes written) / user bytes
    /// written (`rocksdb.bytes.written`); `None` without statistics or writes. The WAL is not
    /// counted (see [`Output::wal_bytes`]); a memtable flushed at close (after db_bench
    /// printed the statistics) is not either.
    pub fn write_amp(&self) -> Option<f64> {
        let user = self.ticker("rocksdb.bytes.written");
        (user > 0).then(|| {
            (self.ticker("rocksdb.flush.write.bytes") + self.ticker("rocksdb.compact.write.bytes"))
                as f64
                / user as f64
        })
    }

    /// WAL bytes written (`rocksdb.wal.bytes`).
    pub fn wal_bytes(&self) -> u64 {
        self.ticker("rocksdb.wal.bytes")
    }
}

/// A program on PATH (or the path itself when it names a file): how both benches find
/// `db_bench` (Debian package rocksdb-tools).
pub fn which(name: &str) -> Option<std::path::PathBuf> {
    if name.contains('/') {
        return Some(std::path::PathBuf::from(name)).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// db_bench's version line (`RocksDB: version 7.8.3`, printed on stderr by any run; a
/// `--num=0` run on a throwaway directory), `unknown` when it cannot be had.
pub fn version(db_bench: &str) -> String {
    // db_bench prints `RocksDB:    version 7.8.3` on stderr for any run; --num=0 on a
    // throwaway directory keeps it short.
    let dir = std::env::temp_dir().join(format!("rocksdb-bench-version-{}", std::process::id()));
    let out = std::process::Command::new(db_bench)
        .args([
            &format!("--db={}", dir.display()),
            "--benchmarks=fillseq",
            "--num=0",
        ])
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    out.ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .find(|l| l.starts_with("RocksDB:"))
                .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact lines of /work/shared/ANCHORS.md §3 (from RocksDB's benchmark.sh) and of
    /// db_bench 7.8.3 on this machine.
    #[test]
    fn reads_the_anchor_lines_in_both_formats() {
        let v1 = parse_result_line("readrandom   :      10.218 micros/op 3131616 ops/sec; 1254.3 MB/s (176144999 of 176144999 found)").unwrap();
        assert_eq!(v1.name, "readrandom");
        assert_eq!(v1.micros_per_op, 10.218);
        assert_eq!(v1.ops_per_sec, 3131616.0);
        assert_eq!(v1.mb_per_sec, Some(1254.3));
        assert_eq!(v1.found, Some((176144999, 176144999)));
        assert_eq!((v1.seconds, v1.operations), (None, None));

        let v2 = parse_result_line("overwrite    :       7.854 micros/op 127320 ops/sec 1800.001 seconds 229176999 operations;   51.0 MB/s").unwrap();
        assert_eq!(v2.name, "overwrite");
        assert_eq!(v2.ops_per_sec, 127320.0);
        assert_eq!(v2.seconds, Some(1800.001));
        assert_eq!(v2.operations, Some(229176999));
        assert_eq!(v2.mb_per_sec, Some(51.0));
        assert_eq!(v2.found, None);

        let local = parse_result_line("readwhilewriting :       8.505 micros/op 117438 ops/sec 0.170 seconds 20000 operations;    9.0 MB/s (13858 of 20000 found)").unwrap();
        assert_eq!(local.name, "readwhilewriting");
        assert_eq!(local.found, Some((13858, 20000)));
        assert_eq!(local.mb_per_sec, Some(9.0));
        let readseq = parse_result_line("readseq      :       0.158 micros/op 5915111 ops/sec 0.002 seconds 12682 operations;  654.4 MB/s").unwrap();
        assert_eq!(readseq.operations, Some(12682));
    }

    #[test]
    fn other_lines_are_not_results() {
        for l in [
            "fillseq      : skipped (--use_existing_db is true)",
            "Keys:       16 bytes each (+ 0 bytes user-defined timestamp)",
            "DB path: [/var/tmp/x]",
            "rocksdb.bytes.written COUNT : 2620000",
            "",
            "readrandom [AVG    3 runs] : 1000 (± 10) ops/sec;    1.0 MB/sec",
        ] {
            assert_eq!(parse_result_line(l), None, "{l}");
        }
    }

    #[test]
    fn statistics_and_level_table_give_write_amp_and_live_size() {
        let out = "\
DB path: [/var/tmp/x]
overwrite    :      25.353 micros/op 39174 ops/sec 1.276 seconds 50000 operations;   38.9 MB/s
 Sum     11/9   41.39 MB   0.0      0.0     0.0      0.0       0.1      0.1       0.0   1.6     58.4    129.5      0.56              0.13        15    0.037     61K    13K       0.0       0.0
 Int      0/0    0.00 KB   0.0      0.0     0.0      0.0       0.1      0.1       0.0   1.6     59.1    129.5      0.56              0.13        14    0.040     61K    13K       0.0       0.0
STATISTICS:
rocksdb.bytes.written COUNT : 1000
rocksdb.wal.bytes COUNT : 1000
rocksdb.compact.write.bytes COUNT : 700
rocksdb.flush.write.bytes COUNT : 800
rocksdb.db.get.micros P50 : 1.000000 P95 : 2.000000 P99 : 3.000000 P100 : 4.000000 COUNT : 5 SUM : 9
";
        let o = Output::parse(out);
        assert_eq!(o.results.len(), 1);
        assert_eq!(o.result("overwrite").unwrap().ops_per_sec, 39174.0);
        assert_eq!(o.write_amp(), Some(1.5));
        assert_eq!(o.wal_bytes(), 1000);
        assert_eq!(
            o.live_sst_bytes,
            Some((41.39 * 1048576.0f64).round() as u64)
        );
        assert!(!o.tickers.contains_key("rocksdb.db.get.micros"));
        let kv = Output::parse("STATISTICS:\nkvdemo.bytes.written COUNT : 2620000\nkvdemo.device.write.bytes COUNT : 5\n");
        assert_eq!(kv.ticker("kvdemo.bytes.written"), 2_620_000);
        assert_eq!(kv.ticker("kvdemo.device.write.bytes"), 5);
        assert_eq!(parse_ticker("other.thing COUNT : 3"), None);
        assert_eq!(Output::parse("nothing").write_amp(), None);
    }
}
