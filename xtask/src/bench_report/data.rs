//! Reading the benchmarks' output files into measured points: every point is the median of
//! its repeats with their min and max ([`Stat`]). Nothing here invents a number: a point
//! that a file does not hold is absent.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::store::{RunRecord, Tool};

/// Median, min and max of the repeats of one measured point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stat {
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// Smallest repeat.
    pub min: f64,
    /// Largest repeat.
    pub max: f64,
    /// Number of repeats.
    pub n: usize,
}

impl Stat {
    /// The stat of `xs` (non-finite values dropped); `None` when nothing is left.
    pub fn of(xs: &[f64]) -> Option<Stat> {
        let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let m = v.len() / 2;
        let median = if v.len() % 2 == 1 {
            v[m]
        } else {
            (v[m - 1] + v[m]) / 2.0
        };
        Some(Stat {
            median,
            min: v[0],
            max: v[v.len() - 1],
            n: v.len(),
        })
    }

    /// Every value multiplied by `k` (unit changes).
    pub fn scaled(self, k: f64) -> Stat {
        Stat {
            median: self.median * k,
            min: self.min * k,
            max: self.max * k,
            n: self.n,
        }
    }

    /// `median (min–max)` with `prec` decimals; just the median for one repeat.
    pub fn show(&self, prec: usize) -> String {
        if self.n <= 1 {
            format!("{:.prec$}", self.median)
        } else {
            format!(
                "{:.prec$} ({:.prec$}–{:.prec$})",
                self.median, self.min, self.max
            )
        }
    }
}

/// [`Stat::show`] of an optional stat, `–` when absent.
pub fn show(s: Option<Stat>, prec: usize) -> String {
    s.map(|s| s.show(prec)).unwrap_or_else(|| "–".into())
}

/// The number at the dotted `path` (e.g. `under_writeback.read_lat_ns.p99`) of `v`.
pub fn num(v: &Value, path: &str) -> Option<f64> {
    let mut cur = v;
    for part in path.split('.') {
        cur = cur.get(part)?;
    }
    cur.as_f64()
}

/// The [`Stat`] of the number at `path` over `values` (the repeats of one point).
pub fn stat(values: &[Value], path: &str) -> Option<Stat> {
    let xs: Vec<f64> = values.iter().filter_map(|v| num(v, path)).collect();
    Stat::of(&xs)
}

fn read_json(dir: &Path, file: &str) -> Result<Value> {
    let p = dir.join(file);
    let text = fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))
}

/// The points of a `ziob-bench` run: one file per repeat, each one result object or an
/// array of them; results with the same `key` are the repeats of one point (in the order the
/// points first appear).
pub fn ziob_points<K: Ord + Clone>(
    dir: &Path,
    rec: &RunRecord,
    key: impl Fn(&Value) -> K,
) -> Result<Vec<(K, Vec<Value>)>> {
    if rec.tool != Tool::ZiobBench {
        bail!("suite {} is not a ziob-bench run", rec.suite);
    }
    let mut order: Vec<K> = Vec::new();
    let mut by_key: BTreeMap<K, Vec<Value>> = BTreeMap::new();
    for f in &rec.files {
        let doc = read_json(dir, f)?;
        let items = match doc {
            Value::Array(a) => a,
            v @ Value::Object(_) => vec![v],
            _ => bail!("{f}: expected a JSON object or array"),
        };
        for it in items {
            let k = key(&it);
            if !by_key.contains_key(&k) {
                order.push(k.clone());
            }
            by_key.entry(k).or_default().push(it);
        }
    }
    Ok(order
        .into_iter()
        .map(|k| {
            let v = by_key.remove(&k).unwrap_or_default();
            (k, v)
        })
        .collect())
}

/// One runner on one `rt-bench` configuration.
#[derive(Debug, Clone)]
pub struct RtRunner {
    /// Runner name (`ziob`, `tokio-uring`, ...).
    pub name: String,
    /// Ops per second.
    pub iops: Option<Stat>,
    /// Process CPU time per op, nanoseconds.
    pub cpu_ns: Option<Stat>,
    /// First error of a failed repeat, if any.
    pub error: Option<String>,
}

/// One `rt-bench` configuration (workload, mode, QD) and its runners.
#[derive(Debug, Clone)]
pub struct RtConfig {
    /// `nop`, `randread` or `yield`.
    pub workload: String,
    /// `buffered` / `direct` for randread.
    pub mode: Option<String>,
    /// Ops in flight.
    pub qd: u64,
    /// Every runner measured on it.
    pub runners: Vec<RtRunner>,
}

impl RtConfig {
    /// `nop`, `randread buffered`, ...
    pub fn group(&self) -> String {
        match &self.mode {
            Some(m) => format!("{} {m}", self.workload),
            None => self.workload.clone(),
        }
    }
}

/// The configurations of an `rt-bench` run (its files merged in order); the stats come from
/// each runner's `samples` (one per repeat).
pub fn rt_configs(dir: &Path, rec: &RunRecord) -> Result<Vec<RtConfig>> {
    if rec.tool != Tool::RtBench {
        bail!("suite {} is not an rt-bench run", rec.suite);
    }
    let mut out = Vec::new();
    for f in &rec.files {
        let doc = read_json(dir, f)?;
        let configs = doc["configs"]
            .as_array()
            .with_context(|| format!("{f}: no `configs` array"))?;
        for c in configs {
            let runners = c["runners"]
                .as_array()
                .map(|rs| {
                    rs.iter()
                        .map(|r| {
                            let samples = r["samples"].as_array().cloned().unwrap_or_default();
                            RtRunner {
                                name: r["runner"].as_str().unwrap_or("?").to_string(),
                                iops: stat(&samples, "iops"),
                                cpu_ns: stat(&samples, "cpu_ns_per_op"),
                                error: r["errors"]
                                    .as_array()
                                    .and_then(|e| e.first())
                                    .and_then(|e| e.as_str())
                                    .map(str::to_string),
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            out.push(RtConfig {
                workload: c["workload"].as_str().unwrap_or("?").to_string(),
                mode: c["mode"].as_str().map(str::to_string),
                qd: c["qd"].as_u64().unwrap_or(0),
                runners,
            });
        }
    }
    Ok(out)
}

/// One (workload, runner, QD) of an `nvme-bench` run, over its rounds.
#[derive(Debug, Clone)]
pub struct NvmeRow {
    /// `write64k`, `append64k`, `randread4k`.
    pub workload: String,
    /// `ziob` or `fio`.
    pub runner: String,
    /// Queue depth.
    pub qd: u64,
    /// Ops per second.
    pub iops: Option<Stat>,
    /// Latency p50, microseconds.
    pub p50_us: Option<Stat>,
    /// Latency p99, microseconds.
    pub p99_us: Option<Stat>,
}

/// The rows of an `nvme-bench --json` run, from its per-round rows.
pub fn nvme_rows(dir: &Path, rec: &RunRecord) -> Result<Vec<NvmeRow>> {
    if rec.tool != Tool::NvmeBench {
        bail!("suite {} is not an nvme-bench run", rec.suite);
    }
    let mut order = Vec::new();
    let mut by: BTreeMap<(String, String, u64), Vec<Value>> = BTreeMap::new();
    for f in &rec.files {
        let doc = read_json(dir, f)?;
        let rounds = doc["rounds"]
            .as_array()
            .with_context(|| format!("{f}: no `rounds` array"))?;
        for r in rounds {
            let k = (
                r["workload"].as_str().unwrap_or("?").to_string(),
                r["runner"].as_str().unwrap_or("?").to_string(),
                r["qd"].as_u64().unwrap_or(0),
            );
            if !by.contains_key(&k) {
                order.push(k.clone());
            }
            by.entry(k).or_default().push(r.clone());
        }
    }
    Ok(order
        .into_iter()
        .map(|k| {
            let v = by.remove(&k).unwrap_or_default();
            NvmeRow {
                iops: stat(&v, "iops"),
                p50_us: stat(&v, "lat_p50_us"),
                p99_us: stat(&v, "lat_p99_us"),
                workload: k.0,
                runner: k.1,
                qd: k.2,
            }
        })
        .collect())
}

/// One workload of `guest-bench` (zbd: vs fio), over its repeats.
#[derive(Debug, Clone)]
pub struct GuestBenchRow {
    /// `seq write 64K QD1`, ...
    pub workload: String,
    /// ZIOB zbd: ops per second.
    pub zbd: Option<Stat>,
    /// fio io_uring ops per second.
    pub fio: Option<Stat>,
}

/// Parses `guest-bench`'s table: a header line, then `<workload words> <zbd> <fio> <ratio>`.
pub fn parse_guest_bench(text: &str) -> Vec<(String, f64, f64)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.len() < 4 || words[0] == "workload" {
            continue;
        }
        let n = words.len();
        let nums: Vec<Option<f64>> = words[n - 3..].iter().map(|w| w.parse().ok()).collect();
        if let [Some(z), Some(f), Some(_)] = nums[..] {
            out.push((words[..n - 3].join(" "), z, f));
        }
    }
    out
}

/// The rows of a `guest-bench` run (one table per repeat).
pub fn guest_bench_rows(dir: &Path, rec: &RunRecord) -> Result<Vec<GuestBenchRow>> {
    if rec.tool != Tool::GuestBench {
        bail!("suite {} is not a guest-bench run", rec.suite);
    }
    let mut order = Vec::new();
    let mut by: BTreeMap<String, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for f in &rec.files {
        let p = dir.join(f);
        let text = fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        for (name, z, fio) in parse_guest_bench(&text) {
            if !by.contains_key(&name) {
                order.push(name.clone());
            }
            let e = by.entry(name).or_default();
            e.0.push(z);
            e.1.push(fio);
        }
    }
    Ok(order
        .into_iter()
        .map(|name| {
            let (z, f) = by.remove(&name).unwrap_or_default();
            GuestBenchRow {
                workload: name,
                zbd: Stat::of(&z),
                fio: Stat::of(&f),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_medians_and_spread() {
        let s = Stat::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(Stat::of(&[4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
        assert!(Stat::of(&[f64::NAN]).is_none());
        assert_eq!(s.show(1), "2.0 (1.0–3.0)");
        assert_eq!(Stat::of(&[5.0]).unwrap().show(0), "5");
    }

    #[test]
    fn dotted_paths() {
        let v = serde_json::json!({"a": {"b": {"p99": 7}}});
        assert_eq!(num(&v, "a.b.p99"), Some(7.0));
        assert_eq!(num(&v, "a.c"), None);
    }

    #[test]
    fn guest_bench_table() {
        let t = "guest-bench: zbd:/dev/nvme0n1: Geometry {..}\n\
                 workload                zbd ops/s    fio ops/s   zbd/fio\n\
                 seq write 64K QD1            5034         4085      1.23\n\
                 randread 4K QD32            25982        23450      1.11\n";
        let rows = parse_guest_bench(t);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0], ("seq write 64K QD1".into(), 5034.0, 4085.0));
    }
}
