//! "What does the runtime cost per op against tokio-uring/monoio/glommio?": the rt-bench
//! figures.

use anyhow::Result;

use super::Doc;
use crate::bench_report::data::{self, show, Stat};
use crate::bench_report::plots::{self, Chart, Series};
use crate::bench_report::store::RunRecord;

impl Doc<'_> {
    /// rt-bench: IOPS and CPU per op of every runner, one figure per workload group.
    pub(super) fn runtime(&mut self, r: &RunRecord) -> Result<()> {
        let configs = data::rt_configs(self.results, r)?;
        let mut groups: Vec<String> = Vec::new();
        for c in &configs {
            if !groups.contains(&c.group()) {
                groups.push(c.group());
            }
        }
        for g in &groups {
            let cs: Vec<&data::RtConfig> = configs.iter().filter(|c| &c.group() == g).collect();
            let mut runners: Vec<String> = Vec::new();
            for c in &cs {
                for rr in &c.runners {
                    if !runners.contains(&rr.name) {
                        runners.push(rr.name.clone());
                    }
                }
            }
            let mut qds: Vec<u64> = cs.iter().map(|c| c.qd).collect();
            qds.sort();
            qds.dedup();
            let qd_index = |qd: u64| qds.iter().position(|&q| q == qd).unwrap_or(0) as f64;
            let series_of = |f: fn(&data::RtRunner) -> Option<Stat>| -> Vec<Series> {
                runners
                    .iter()
                    .map(|name| Series {
                        name: name.clone(),
                        points: cs
                            .iter()
                            .filter_map(|c| {
                                let rr = c.runners.iter().find(|x| &x.name == name)?;
                                Some((qd_index(c.qd), f(rr)?))
                            })
                            .collect(),
                    })
                    .filter(|s| !s.points.is_empty())
                    .collect()
            };
            let iops = Chart {
                title: format!("{g}: ops/s"),
                x_desc: "queue depth".into(),
                y_desc: "ops/s".into(),
                x: qds.iter().map(|q| q.to_string()).collect(),
                y_log: true,
                series: series_of(|x| x.iops),
            };
            let cpu = Chart {
                title: format!("{g}: CPU per op"),
                x_desc: "queue depth".into(),
                y_desc: "CPU ns per op".into(),
                x: qds.iter().map(|q| q.to_string()).collect(),
                y_log: true,
                series: series_of(|x| x.cpu_ns),
            };
            let name = format!("runtime-{}", g.replace(' ', "-"));
            self.figure(
                &name,
                &format!("{g}: ops/s and CPU per op vs queue depth"),
                |p| plots::line_pair_svg(p, &iops, &cpu),
            )?;
            self.caption(&[r]);
            let mut rows = Vec::new();
            for c in &cs {
                let plain_best = c
                    .runners
                    .iter()
                    .filter(|x| x.name.starts_with("plain"))
                    .filter_map(|x| x.cpu_ns.map(|s| s.median))
                    .fold(f64::INFINITY, f64::min);
                for rr in &c.runners {
                    rows.push(vec![
                        c.qd.to_string(),
                        rr.name.clone(),
                        show(rr.iops.map(|s| s.scaled(1e-3)), 1),
                        show(rr.cpu_ns, 0),
                        match rr.cpu_ns {
                            Some(s) if plain_best.is_finite() => {
                                format!("{:.2}", s.median / plain_best)
                            }
                            _ => "–".into(),
                        },
                        rr.error.clone().unwrap_or_default(),
                    ]);
                }
            }
            self.table(
                &[
                    "QD",
                    "runner",
                    "kops/s",
                    "CPU ns/op",
                    "CPU vs best plain loop",
                    "error",
                ],
                &rows,
            );
            // Headlines: ZIOB's CPU per op against each peer at the deepest queue.
            if let Some(c) = cs.iter().max_by_key(|c| c.qd) {
                let cpu_of = |n: &str| {
                    c.runners
                        .iter()
                        .find(|x| x.name == n)
                        .and_then(|x| x.cpu_ns)
                };
                let ziob = if cpu_of("ziob-fixed").is_some() {
                    "ziob-fixed"
                } else {
                    "ziob"
                };
                if let Some(z) = cpu_of(ziob) {
                    let peers: Vec<String> = ["plain-fixed", "tokio-uring", "monoio", "glommio"]
                        .iter()
                        .filter_map(|p| {
                            cpu_of(p).map(|s| format!("{p} {:.2}×", z.median / s.median))
                        })
                        .collect();
                    if !peers.is_empty() {
                        self.out.headlines.push(format!(
                            "runtime, {g} at QD{}: CPU per op of `{ziob}` ÷ the other runner's: {}",
                            c.qd,
                            peers.join(", ")
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}
