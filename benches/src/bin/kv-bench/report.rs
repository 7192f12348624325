//! Medians, ratios kv-demo / db_bench (and / fjall, / ZIOB off) and the Markdown tables.

use std::fmt::Write as _;

use crate::options::Mode;
use crate::run::{Results, WriteCounters};

pub use ziob_benches::report::median;

fn median_ops(r: &Results, m: Mode, sync: bool, vs: u64, bench: &str) -> Option<f64> {
    let xs: Vec<f64> = r
        .samples
        .iter()
        .filter(|s| s.mode == m && s.sync == sync && s.value_size == vs && s.bench == bench)
        .map(|s| s.ops_per_sec)
        .collect();
    median(&xs)
}

fn median_w(
    r: &Results,
    m: Mode,
    sync: bool,
    vs: u64,
    f: impl Fn(&WriteCounters) -> Option<f64>,
) -> Option<f64> {
    let xs: Vec<f64> = r
        .writes
        .iter()
        .filter(|w| w.mode == m && w.sync == sync && w.value_size == vs)
        .filter_map(f)
        .collect();
    median(&xs)
}

fn cell(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "–".into())
}

/// The ratio columns: (numerator, denominator).
const RATIOS: [(Mode, Mode); 12] = [
    (Mode::KvDemo, Mode::Rocksdb),
    (Mode::KvDemo, Mode::RocksdbDirect),
    (Mode::KvDemoPagecache, Mode::Rocksdb),
    (Mode::KvDemoNobuf, Mode::Rocksdb),
    (Mode::KvDemo, Mode::Fjall),
    (Mode::KvDemoPagecache, Mode::Fjall),
    (Mode::KvDemo, Mode::KvDemoNobuf),
    (Mode::KvDemoNvme, Mode::RocksdbExt4),
    (Mode::KvDemoZbd, Mode::RocksdbExt4),
    (Mode::KvDemoNvme, Mode::RocksdbZenfs),
    (Mode::KvDemoZbd, Mode::RocksdbZenfs),
    (Mode::RocksdbZenfs, Mode::RocksdbExt4),
];

/// The tables of `r`.
pub fn markdown(r: &Results) -> String {
    let mut s = String::new();
    let modes: Vec<Mode> = Mode::ALL
        .into_iter()
        .filter(|m| r.samples.iter().any(|x| x.mode == *m))
        .collect();
    let mut benches: Vec<&str> = Vec::new();
    for x in &r.samples {
        if !benches.contains(&x.bench.as_str()) {
            benches.push(&x.bench);
        }
    }
    let mut combos: Vec<(bool, u64)> = r.samples.iter().map(|x| (x.sync, x.value_size)).collect();
    combos.sort_unstable();
    combos.dedup();
    let ratios: Vec<(Mode, Mode)> = RATIOS
        .into_iter()
        .filter(|(a, b)| modes.contains(a) && modes.contains(b))
        .collect();
    let _ = writeln!(s, "db_bench: {}; kv-demo: {}", r.db_bench, r.kv_demo);
    let _ = writeln!(s, "common flags: `{}`\n", r.common_flags.join(" "));
    for (sync, vs) in combos {
        let num = if sync { r.num.1 } else { r.num.0 };
        let _ = writeln!(
            s,
            "### --sync={} --value_size={vs} --num={num}: ops/sec (median of {} runs)\n",
            u8::from(sync),
            r.runs
        );
        let mut head = String::from("| benchmark |");
        let mut rule = String::from("|---|");
        for m in &modes {
            let _ = write!(head, " {} |", m.name());
            rule.push_str("---:|");
        }
        for (a, b) in &ratios {
            let _ = write!(head, " {} / {} |", a.name(), b.name());
            rule.push_str("---:|");
        }
        let _ = writeln!(s, "{head}\n{rule}");
        for b in &benches {
            let mut row = format!("| {b} |");
            for m in &modes {
                let _ = write!(
                    row,
                    " {} |",
                    cell(median_ops(r, *m, sync, vs, b), |v| format!("{v:.0}"))
                );
            }
            for (x, y) in &ratios {
                let q = match (
                    median_ops(r, *x, sync, vs, b),
                    median_ops(r, *y, sync, vs, b),
                ) {
                    (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                    _ => None,
                };
                let _ = write!(row, " {} |", cell(q, |v| format!("{v:.2}x")));
            }
            let _ = writeln!(s, "{row}");
        }
        let _ = writeln!(
            s,
            "\n#### write amplification (whole process: every benchmark's writes)\n\n\
             | mode | user MiB | (flush + compaction) / user | all bytes written / user | what `--sync={}` promises |\n|---|---:|---:|---:|---|",
            u8::from(sync)
        );
        for m in &modes {
            let user = median_w(r, *m, sync, vs, |w| Some(w.user_bytes as f64 / 1_048_576.0));
            let wa = median_w(r, *m, sync, vs, WriteCounters::write_amp);
            let all = median_w(r, *m, sync, vs, WriteCounters::total_write_amp);
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                m.name(),
                cell(user, |v| format!("{v:.1}")),
                cell(wa, |v| format!("{v:.2}")),
                cell(all, |v| format!("{v:.2}")),
                m.durability(sync)
            );
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "\"all bytes written\": kv-demo = every byte written to its device (WAL, tables, \
         metadata, relocation); RocksDB = flush + compaction + WAL bytes (its own tickers)."
    );
    for k in &r.skipped {
        let _ = writeln!(s, "\nskipped {}: {}", k.mode.name(), k.reason);
    }
    for f in &r.failures {
        let _ = writeln!(s, "\nFAILED {}: {}", f.mode.name(), f.error);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::Sample;

    #[test]
    fn tables_show_medians_and_ratios() {
        let mut r = Results {
            num: (1000, 100),
            runs: 3,
            ..Results::default()
        };
        for (m, ops) in [
            (Mode::Rocksdb, [100.0, 300.0, 200.0]),
            (Mode::KvDemo, [400.0, 500.0, 450.0]),
        ] {
            for (run, v) in ops.into_iter().enumerate() {
                r.samples.push(Sample {
                    mode: m,
                    sync: false,
                    value_size: 100,
                    run: run as u32,
                    bench: "fillrandom".into(),
                    ops_per_sec: v,
                    found: None,
                });
            }
        }
        let md = markdown(&r);
        assert!(
            md.contains("| benchmark | rocksdb | kv-demo | kv-demo / rocksdb |"),
            "{md}"
        );
        assert!(md.contains("| fillrandom | 200 | 450 | 2.25x |"), "{md}");
        assert_eq!(median(&[1.0, 2.0, 3.0, 10.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
