//! "What latency do reads of fresh data see?": the latency CDF figure.

use anyhow::Result;

use super::{onoff, Doc};
use crate::bench_report::data::{self, show, Stat};
use crate::bench_report::plots::{self, Chart, Series};
use crate::bench_report::store::RunRecord;

impl Doc<'_> {
    /// Append and read-back latency percentiles, idle and under write-back.
    pub(super) fn latency(&mut self, r: &RunRecord) -> Result<()> {
        let pts = data::ziob_points(self.results, r, |v| onoff(v) == "on")?;
        const PCTS: &[(&str, &str)] = &[
            ("p50", "p50"),
            ("p90", "p90"),
            ("p99", "p99"),
            ("p999", "p99.9"),
            ("p9999", "p99.99"),
        ];
        // Only the percentiles the files hold (older files have no p90 / p99.99).
        let present: Vec<(&str, &str)> = PCTS
            .iter()
            .copied()
            .filter(|(k, _)| {
                pts.iter()
                    .any(|p| data::stat(&p.1, &format!("idle.read_lat_ns.{k}")).is_some())
            })
            .collect();
        let cats: Vec<String> = present.iter().map(|p| p.1.to_string()).collect();
        let mut sets = Vec::new();
        for op in ["read", "append"] {
            let mut series = Vec::new();
            for (on, v) in &pts {
                for (phase, label) in [("idle", "idle"), ("under_writeback", "under write-back")] {
                    let points: Vec<(f64, Stat)> = present
                        .iter()
                        .enumerate()
                        .filter_map(|(i, (k, _))| {
                            let s = data::stat(v, &format!("{phase}.{op}_lat_ns.{k}"))?;
                            Some((i as f64, s.scaled(1e-3)))
                        })
                        .collect();
                    if !points.is_empty() {
                        series.push(Series {
                            name: format!("buffer {}, {label}", if *on { "on" } else { "off" }),
                            points,
                        });
                    }
                }
            }
            sets.push(Chart {
                title: format!("{op} latency percentiles"),
                x_desc: "percentile".into(),
                y_desc: "µs".into(),
                x: cats.clone(),
                y_log: true,
                series,
            });
        }
        self.figure(
            "latency-cdf",
            "read and append latency percentiles, buffer on/off, idle and under write-back",
            |p| plots::line_pair_svg(p, &sets[0], &sets[1]),
        )?;
        self.caption(&[r]);
        let mut head: Vec<String> = vec!["buffer".into(), "phase".into(), "op".into()];
        head.extend(present.iter().map(|p| format!("{} µs", p.1)));
        head.push("ops/s".into());
        let mut rows = Vec::new();
        for (on, v) in &pts {
            for (phase, label) in [("idle", "idle"), ("under_writeback", "under write-back")] {
                for op in ["read", "append"] {
                    let mut row = vec![
                        if *on { "on" } else { "off" }.to_string(),
                        label.to_string(),
                        op.to_string(),
                    ];
                    for (k, _) in &present {
                        row.push(show(
                            data::stat(v, &format!("{phase}.{op}_lat_ns.{k}"))
                                .map(|s| s.scaled(1e-3)),
                            1,
                        ));
                    }
                    row.push(show(data::stat(v, &format!("{phase}.appends_per_sec")), 0));
                    rows.push(row);
                }
            }
        }
        let head_ref: Vec<&str> = head.iter().map(String::as_str).collect();
        self.table(&head_ref, &rows);
        let p99 = |on: bool, phase: &str| {
            pts.iter()
                .find(|p| p.0 == on)
                .and_then(|p| data::stat(&p.1, &format!("{phase}.read_lat_ns.p99")))
        };
        if let (Some(a), Some(b)) = (p99(true, "under_writeback"), p99(false, "under_writeback")) {
            self.out.headlines.push(format!(
                "reads of just-appended data under write-back: p99 **{:.1} µs** with the buffer vs {:.0} µs pass-through (emulated 1 ms device)",
                a.median / 1e3,
                b.median / 1e3
            ));
        }
        Ok(())
    }
}
