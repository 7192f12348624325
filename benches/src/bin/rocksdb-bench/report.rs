//! Medians, ratios against the reference targets, and the Markdown tables.

use std::fmt::Write as _;

use crate::run::Results;
use crate::targets::TargetId;

pub use ziob_benches::report::median;

fn target_of(name: &str) -> Option<TargetId> {
    TargetId::ALL.into_iter().find(|t| t.name() == name)
}

/// Median ops/sec of `target`, `bench`, `value_size` in `r`.
pub fn median_ops(r: &Results, target: &str, bench: &str, value_size: u64) -> Option<f64> {
    let xs: Vec<f64> = r
        .samples
        .iter()
        .filter(|s| s.target == target && s.bench == bench && s.value_size == value_size)
        .map(|s| s.ops_per_sec)
        .collect();
    median(&xs)
}

fn median_of<F: Fn(&crate::run::Sample) -> Option<f64>>(
    r: &Results,
    target: &str,
    bench: &str,
    value_size: u64,
    f: F,
) -> Option<f64> {
    let xs: Vec<f64> = r
        .samples
        .iter()
        .filter(|s| s.target == target && s.bench == bench && s.value_size == value_size)
        .filter_map(f)
        .collect();
    median(&xs)
}

/// Targets with samples, in [`TargetId::ALL`] order.
fn measured(r: &Results) -> Vec<&'static str> {
    TargetId::ALL
        .iter()
        .map(|t| t.name())
        .filter(|n| r.samples.iter().any(|s| s.target == *n))
        .collect()
}

fn value_sizes(r: &Results) -> Vec<u64> {
    let mut v: Vec<u64> = r.samples.iter().map(|s| s.value_size).collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn benches(r: &Results) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for s in &r.samples {
        if !v.contains(&s.bench) {
            v.push(s.bench.clone());
        }
    }
    v
}

fn mib(b: f64) -> String {
    format!("{:.1}", b / 1048576.0)
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "–".into())
}

/// The `(target, reference)` pairs whose ratio is shown: every non-reference target against
/// every reference target of the same environment.
pub fn ratio_pairs(targets: &[&'static str]) -> Vec<(&'static str, &'static str)> {
    let mut pairs = Vec::new();
    for &t in targets {
        let Some(id) = target_of(t) else { continue };
        if id.is_reference() {
            continue;
        }
        for &r in targets {
            let Some(rid) = target_of(r) else { continue };
            if rid.is_reference() && rid.guest_only() == id.guest_only() {
                pairs.push((t, r));
            }
        }
    }
    pairs
}

/// The Markdown report of one environment's results.
pub fn markdown(r: &Results) -> String {
    let mut s = String::new();
    let targets = measured(r);
    let _ = writeln!(
        s,
        "## {} (db_bench: {}; --num={}; {} run(s), medians)\n",
        r.environment, r.db_bench, r.num, r.runs
    );
    let _ = writeln!(s, "Flags of every target: `{}`\n", r.common_flags.join(" "));
    for t in &r.targets {
        let _ = writeln!(
            s,
            "- `{}`: {}{}; {}",
            t.target,
            t.preload
                .as_ref()
                .map(|p| format!("LD_PRELOAD={p} "))
                .unwrap_or_default(),
            t.fs_uri
                .as_ref()
                .map(|u| format!("--fs_uri={u}"))
                .unwrap_or_else(|| "default file system".into()),
            t.durability
        );
    }
    for k in &r.skipped {
        let _ = writeln!(s, "- `{}` skipped: {}", k.target, k.reason);
    }
    for f in &r.failures {
        let _ = writeln!(
            s,
            "- `{}` FAILED: {}",
            f.target,
            f.error.replace('\n', " / ")
        );
    }
    s.push('\n');
    let pairs = ratio_pairs(&targets);
    for vs in value_sizes(r) {
        let _ = writeln!(
            s,
            "### {} — value {vs} B: ops/sec (median)\n",
            r.environment
        );
        let mut head = String::from("| benchmark |");
        let mut rule = String::from("|---|");
        for t in &targets {
            let _ = write!(head, " {t} |");
            rule.push_str("---:|");
        }
        for (t, rf) in &pairs {
            let _ = write!(head, " {t} / {rf} |");
            rule.push_str("---:|");
        }
        let _ = writeln!(s, "{head}\n{rule}");
        for b in benches(r) {
            let mut row = format!("| {b} |");
            for t in &targets {
                let _ = write!(
                    row,
                    " {} |",
                    opt(median_ops(r, t, &b, vs), |v| format!("{v:.0}"))
                );
            }
            for (t, rf) in &pairs {
                let ratio = median_ops(r, t, &b, vs)
                    .zip(median_ops(r, rf, &b, vs))
                    .map(|(a, b)| a / b);
                let _ = write!(row, " {} |", opt(ratio, |v| format!("{v:.2}x")));
            }
            let _ = writeln!(s, "{row}");
        }
        let _ = writeln!(
            s,
            "\n### {} — value {vs} B: write amplification and space (median)\n\n\
             | target | WA fillseq | WA fillrandom | WA overwrite | WAL MiB (overwrite) | live SST MiB | space used MiB | space used / live SST | space detail (last run) |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---|",
            r.environment
        );
        for t in &targets {
            let wa = |b: &str| {
                opt(median_of(r, t, b, vs, |x| x.write_amp), |v| {
                    format!("{v:.2}")
                })
            };
            let wal = median_of(r, t, "overwrite", vs, |x| Some(x.wal_bytes as f64));
            let live = median_of(r, t, "readrandom", vs, |x| {
                x.live_sst_bytes.map(|b| b as f64)
            });
            let used: Vec<f64> = r
                .space
                .iter()
                .filter(|x| x.target == *t && x.value_size == vs)
                .filter_map(|x| x.space.used_bytes.map(|b| b as f64))
                .collect();
            let used = median(&used);
            let detail = r
                .space
                .iter()
                .rev()
                .find(|x| x.target == *t && x.value_size == vs)
                .map(|x| x.space.detail.replace(['\n', '|'], " "))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "| {t} | {} | {} | {} | {} | {} | {} | {} | {detail} |",
                wa("fillseq"),
                wa("fillrandom"),
                wa("overwrite"),
                opt(wal, mib),
                opt(live, mib),
                opt(used, mib),
                opt(used.zip(live).map(|(u, l)| u / l), |v| format!("{v:.2}")),
            );
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::Sample;

    fn sample(target: &str, bench: &str, run: u32, ops: f64) -> Sample {
        Sample {
            target: target.into(),
            value_size: 100,
            run,
            bench: bench.into(),
            ops_per_sec: ops,
            micros_per_op: 1e6 / ops,
            write_amp: Some(2.0),
            user_bytes: 10,
            wal_bytes: 10,
            live_sst_bytes: Some(1 << 20),
            found: None,
        }
    }

    #[test]
    fn medians_and_ratios_against_the_references_of_the_same_environment() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(
            ratio_pairs(&["local", "ziob-emu", "zenfs", "ext4", "ziob-nvme"]),
            vec![
                ("ziob-emu", "local"),
                ("ziob-nvme", "zenfs"),
                ("ziob-nvme", "ext4")
            ]
        );
        let mut r = Results {
            environment: "host".into(),
            num: 10,
            runs: 3,
            ..Results::default()
        };
        for (run, (a, b)) in [(100.0, 200.0), (300.0, 250.0), (200.0, 1000.0)]
            .into_iter()
            .enumerate()
        {
            r.samples.push(sample("local", "fillrandom", run as u32, a));
            r.samples
                .push(sample("ziob-emu", "fillrandom", run as u32, b));
        }
        let md = markdown(&r);
        assert!(md.contains("| fillrandom | 200 | 250 | 1.25x |"), "{md}");
        assert!(md.contains("| ziob-emu / local |"), "{md}");
    }
}
