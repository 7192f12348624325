//! Medians, ratios, the text table and the JSON document.

use serde::Serialize;

use crate::meter::Sample;
use crate::spec::{Mode, Runner, Workload};
use crate::ziob_rt::ZiobExtra;

/// Median of the finite values of `xs` (mean of the middle two for even counts); `None` when
/// there are none.
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

/// Every repeat of one runner on one configuration, with medians and ratios.
#[derive(Debug, Clone, Serialize)]
pub struct RunnerResult {
    /// Runner name.
    pub runner: Runner,
    /// One sample per successful repeat.
    pub samples: Vec<Sample>,
    /// Errors of failed repeats.
    pub errors: Vec<String>,
    /// Median IOPS over the samples.
    pub median_iops: Option<f64>,
    /// Median process CPU time per op, in nanoseconds.
    pub median_cpu_ns_per_op: Option<f64>,
    /// Median `io_uring_enter` calls per op (runners that count them).
    pub median_enters_per_op: Option<f64>,
    /// Median IOPS / the best plain-loop variant's median IOPS.
    pub iops_vs_plain_best: Option<f64>,
    /// Median CPU per op / the best (lowest) plain-loop variant's median CPU per op.
    pub cpu_vs_plain_best: Option<f64>,
    /// Median IOPS / fio's median IOPS.
    pub iops_vs_fio: Option<f64>,
    /// Runtime counters of the last ZIOB repeat.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ziob: Option<ZiobExtra>,
}

impl RunnerResult {
    /// An empty result for `runner`.
    pub fn new(runner: Runner) -> Self {
        RunnerResult {
            runner,
            samples: Vec::new(),
            errors: Vec::new(),
            median_iops: None,
            median_cpu_ns_per_op: None,
            median_enters_per_op: None,
            iops_vs_plain_best: None,
            cpu_vs_plain_best: None,
            iops_vs_fio: None,
            ziob: None,
        }
    }

    fn summarize(&mut self) {
        let col = |f: fn(&Sample) -> f64| self.samples.iter().map(f).collect::<Vec<_>>();
        self.median_iops = median(&col(|s| s.iops));
        self.median_cpu_ns_per_op = median(&col(|s| s.cpu_ns_per_op));
        let enters: Vec<f64> = self
            .samples
            .iter()
            .filter_map(|s| s.enters_per_op)
            .collect();
        self.median_enters_per_op = median(&enters);
    }
}

/// One configuration (workload, mode, QD) with every runner measured on it.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigResult {
    /// What the ops are.
    pub workload: Workload,
    /// Buffered or direct (absent for NOP).
    pub mode: Option<Mode>,
    /// Ops in flight.
    pub qd: usize,
    /// The plain-loop variant with the lowest median CPU per op.
    pub plain_best: Option<Runner>,
    /// Results per runner, in the order they ran.
    pub runners: Vec<RunnerResult>,
}

impl ConfigResult {
    /// Computes medians and the ratios against the plain loop and fio.
    pub fn summarize(&mut self) {
        for r in &mut self.runners {
            r.summarize();
        }
        let plain: Vec<&RunnerResult> = self
            .runners
            .iter()
            .filter(|r| matches!(r.runner, Runner::Plain { .. }))
            .collect();
        let plain_iops = plain
            .iter()
            .filter_map(|r| r.median_iops)
            .max_by(|a, b| a.total_cmp(b));
        let plain_best = plain
            .iter()
            .filter(|r| r.median_cpu_ns_per_op.is_some())
            .min_by(|a, b| {
                a.median_cpu_ns_per_op
                    .unwrap()
                    .total_cmp(&b.median_cpu_ns_per_op.unwrap())
            })
            .map(|r| (r.runner, r.median_cpu_ns_per_op.unwrap()));
        let fio_iops = self
            .runners
            .iter()
            .find(|r| r.runner == Runner::Fio { fixed: false })
            .and_then(|r| r.median_iops);
        self.plain_best = plain_best.map(|(r, _)| r);
        for r in &mut self.runners {
            r.iops_vs_plain_best = r.median_iops.zip(plain_iops).map(|(a, b)| a / b);
            r.cpu_vs_plain_best = r
                .median_cpu_ns_per_op
                .zip(plain_best.map(|(_, c)| c))
                .map(|(a, b)| a / b);
            r.iops_vs_fio = r.median_iops.zip(fio_iops).map(|(a, b)| a / b);
        }
    }

    fn label(&self) -> String {
        match self.mode {
            Some(m) => format!("{} {} qd{}", self.workload, m, self.qd),
            None => format!("{} qd{}", self.workload, self.qd),
        }
    }
}

/// Which submission policy won where both were measured.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyVerdict {
    /// Configuration label, e.g. `randread direct qd32`.
    pub config: String,
    /// `ziob` or `ziob-fixed` (the batched runner compared with its `-eager` twin).
    pub runner: Runner,
    /// Median IOPS under the default `SubmitPolicy::Adaptive`.
    pub batched_iops: f64,
    /// Median IOPS under `SubmitPolicy::Eager`.
    pub eager_iops: f64,
    /// Median CPU ns per op under the default `Adaptive`.
    pub batched_cpu_ns_per_op: f64,
    /// Median CPU ns per op under `Eager`.
    pub eager_cpu_ns_per_op: f64,
    /// `eager_iops / batched_iops`.
    pub eager_vs_batched_iops: f64,
    /// `Adaptive` or `Eager`: the policy with more IOPS.
    pub winner: &'static str,
}

/// The whole document `--json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `rt-bench`.
    pub tool: &'static str,
    /// How the run was set up.
    pub settings: serde_json::Value,
    /// Kernel release and CPU count.
    pub machine: serde_json::Value,
    /// Every configuration measured.
    pub configs: Vec<ConfigResult>,
    /// Adaptive (default) vs Eager, where both were measured.
    pub submit_policy: Vec<PolicyVerdict>,
    /// Runner and workload pairs that were selected but not measured, and why.
    pub notes: Vec<String>,
}

impl Report {
    /// Summarizes every configuration and derives the policy verdicts.
    pub fn finish(&mut self) {
        self.submit_policy.clear();
        for c in &mut self.configs {
            c.summarize();
        }
        for c in &self.configs {
            for fixed in [false, true] {
                let get = |eager| {
                    c.runners
                        .iter()
                        .find(|r| r.runner == Runner::Ziob { fixed, eager })
                        .and_then(|r| r.median_iops.zip(r.median_cpu_ns_per_op))
                };
                if let (Some(b), Some(e)) = (get(false), get(true)) {
                    self.submit_policy.push(PolicyVerdict {
                        config: c.label(),
                        runner: Runner::Ziob {
                            fixed,
                            eager: false,
                        },
                        batched_iops: b.0,
                        eager_iops: e.0,
                        batched_cpu_ns_per_op: b.1,
                        eager_cpu_ns_per_op: e.1,
                        eager_vs_batched_iops: e.0 / b.0,
                        winner: if e.0 > b.0 { "Eager" } else { "Adaptive" },
                    });
                }
            }
        }
    }

    /// The human-readable table.
    pub fn table(&self) -> String {
        use std::fmt::Write;
        let opt = |v: Option<f64>, prec: usize| match v {
            Some(x) => format!("{x:.prec$}"),
            None => "-".into(),
        };
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<24} {:<17} {:>10} {:>9} {:>9} {:>9} {:>8} {:>8} {:>3}",
            "config",
            "runner",
            "kIOPS",
            "cpu µs/op",
            "iops/plain",
            "cpu/plain",
            "iops/fio",
            "enter/op",
            "n"
        );
        for c in &self.configs {
            for r in &c.runners {
                let best = if c.plain_best == Some(r.runner) {
                    "*"
                } else {
                    ""
                };
                let _ = writeln!(
                    s,
                    "{:<24} {:<17} {:>10} {:>9} {:>10} {:>9} {:>8} {:>8} {:>3}{}",
                    c.label(),
                    format!("{}{best}", r.runner),
                    opt(r.median_iops.map(|x| x / 1e3), 1),
                    opt(r.median_cpu_ns_per_op.map(|x| x / 1e3), 3),
                    opt(r.iops_vs_plain_best, 2),
                    opt(r.cpu_vs_plain_best, 2),
                    opt(r.iops_vs_fio, 2),
                    opt(r.median_enters_per_op, 3),
                    r.samples.len(),
                    if r.errors.is_empty() {
                        String::new()
                    } else {
                        format!("  ERR: {}", r.errors[0])
                    }
                );
            }
        }
        if !self.submit_policy.is_empty() {
            let _ = writeln!(s, "\nsubmit policy (ZIOB, median IOPS):");
            for p in &self.submit_policy {
                let _ = writeln!(
                    s,
                    "  {:<24} {:<11} batched {:>8.1}k ({:.3} µs/op)  eager {:>8.1}k ({:.3} µs/op)  eager/batched {:.2} -> {}",
                    p.config,
                    p.runner.to_string(),
                    p.batched_iops / 1e3,
                    p.batched_cpu_ns_per_op / 1e3,
                    p.eager_iops / 1e3,
                    p.eager_cpu_ns_per_op / 1e3,
                    p.eager_vs_batched_iops,
                    p.winner
                );
            }
        }
        for n in &self.notes {
            let _ = writeln!(s, "note: {n}");
        }
        s.push_str(
            "* = plain-loop variant with the lowest CPU per op (the reference for cpu/plain)\n",
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
