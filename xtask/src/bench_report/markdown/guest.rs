//! "Which backend for which workload?": the guest backend figure and the two comparisons
//! with fio.

use anyhow::Result;
use serde_json::Value;

use super::{backend, num_u, onoff, ratio, show_ratio, size, Doc};
use crate::bench_report::data::{self, show};
use crate::bench_report::plots::{self, Chart, Series};
use crate::bench_report::store::RunRecord;

/// (backend, buffered, (append size, zones), the repeats) of the guest backend figure.
type BackendPoint = (String, bool, (u64, u64), Vec<Value>);

impl Doc<'_> {
    /// The guest backends figure: zbd:/nvme:/spdk: appends, buffered and direct, in one chart.
    pub(super) fn guest_backends(&mut self, runs: &[&RunRecord]) -> Result<()> {
        // (backend, buffered) series over (bs, zones) categories.
        let mut cats: Vec<(u64, u64)> = Vec::new();
        let mut all: Vec<BackendPoint> = Vec::new();
        for r in runs {
            let pts = data::ziob_points(self.results, r, |v| {
                (
                    backend(v),
                    onoff(v) == "on",
                    num_u(v, "bs"),
                    num_u(v, "zones"),
                )
            })?;
            for ((b, on, bs, z), v) in pts {
                if !cats.contains(&(bs, z)) {
                    cats.push((bs, z));
                }
                all.push((b, on, (bs, z), v));
            }
        }
        cats.sort();
        let mut keys: Vec<(bool, String)> = all.iter().map(|a| (a.1, a.0.clone())).collect();
        keys.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        keys.dedup();
        let series: Vec<Series> = keys
            .iter()
            .map(|(on, b)| Series {
                name: format!("{b}: buffer {}", if *on { "on" } else { "off" }),
                points: cats
                    .iter()
                    .enumerate()
                    .filter_map(|(i, c)| {
                        let v = &all.iter().find(|a| &a.0 == b && a.1 == *on && a.2 == *c)?.3;
                        Some((i as f64, data::stat(v, "bytes_per_sec")?.scaled(1e-6)))
                    })
                    .collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect();
        let chart = Chart {
            title: "Appends per backend in the guest (buffer off = the backend alone)".into(),
            x_desc: "append size × zones".into(),
            y_desc: "MB/s".into(),
            x: cats
                .iter()
                .map(|(bs, z)| format!("{}×{z}", size(*bs as f64)))
                .collect(),
            y_log: true,
            series,
        };
        self.figure(
            "guest-backends",
            "append MB/s per backend in the guest",
            |p| plots::bar_svg(p, &chart),
        )?;
        self.caption(runs);
        let head_keys: Vec<String> = keys
            .iter()
            .map(|(on, b)| format!("{b} {} MB/s", if *on { "on" } else { "off" }))
            .collect();
        let mut head: Vec<&str> = vec!["append", "zones"];
        head.extend(head_keys.iter().map(String::as_str));
        let rows: Vec<Vec<String>> = cats
            .iter()
            .map(|c| {
                let mut row = vec![size(c.0 as f64), c.1.to_string()];
                for (on, b) in &keys {
                    let v = all.iter().find(|a| &a.0 == b && a.1 == *on && a.2 == *c);
                    row.push(show(
                        v.and_then(|a| data::stat(&a.3, "bytes_per_sec"))
                            .map(|s| s.scaled(1e-6)),
                        1,
                    ));
                }
                row
            })
            .collect();
        self.table(&head, &rows);
        Ok(())
    }

    /// `nvme:` against fio on the same namespace (nvme-bench).
    pub(super) fn guest_fio_nvme(&mut self, r: &RunRecord) -> Result<()> {
        let rows = data::nvme_rows(self.results, r)?;
        let mut cats: Vec<(String, u64)> = Vec::new();
        for x in &rows {
            if !cats.contains(&(x.workload.clone(), x.qd)) {
                cats.push((x.workload.clone(), x.qd));
            }
        }
        let runners = ["ziob", "fio"];
        let series: Vec<Series> = runners
            .iter()
            .map(|&n| Series {
                name: if n == "ziob" {
                    "ZIOB nvme: (uring_cmd)".into()
                } else {
                    "fio io_uring_cmd".into()
                },
                points: cats
                    .iter()
                    .enumerate()
                    .filter_map(|(i, c)| {
                        let x = rows
                            .iter()
                            .find(|x| x.runner == n && x.workload == c.0 && x.qd == c.1)?;
                        Some((i as f64, x.iops?))
                    })
                    .collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect();
        let chart = Chart {
            title: "nvme: backend vs fio io_uring_cmd (guest ZNS namespace)".into(),
            x_desc: "workload, queue depth".into(),
            y_desc: "IOPS".into(),
            x: cats.iter().map(|c| format!("{} QD{}", c.0, c.1)).collect(),
            y_log: true,
            series,
        };
        self.figure("guest-nvme-vs-fio", "nvme: vs fio IOPS", |p| {
            plots::bar_svg(p, &chart)
        })?;
        self.caption(&[r]);
        let mut table = Vec::new();
        for c in &cats {
            let get = |n: &str| {
                rows.iter()
                    .find(|x| x.runner == n && x.workload == c.0 && x.qd == c.1)
            };
            let (z, f) = (get("ziob"), get("fio"));
            table.push(vec![
                c.0.clone(),
                c.1.to_string(),
                show(z.and_then(|x| x.iops), 0),
                show(f.and_then(|x| x.iops), 0),
                show_ratio(ratio(z.and_then(|x| x.iops), f.and_then(|x| x.iops))),
                show(z.and_then(|x| x.p50_us), 1),
                show(f.and_then(|x| x.p50_us), 1),
                show(z.and_then(|x| x.p99_us), 1),
                show(f.and_then(|x| x.p99_us), 1),
            ]);
            if c.0 == "randread4k" {
                if let Some(x) = ratio(z.and_then(|x| x.iops), f.and_then(|x| x.iops)) {
                    self.out.headlines.push(format!(
                        "guest (TCG) 4K random reads QD{}: ZIOB `nvme:` **{x:.2}×** fio io_uring_cmd's IOPS",
                        c.1
                    ));
                }
            }
        }
        self.table(
            &[
                "workload",
                "QD",
                "ZIOB IOPS",
                "fio IOPS",
                "ZIOB/fio",
                "ZIOB p50 µs",
                "fio p50 µs",
                "ZIOB p99 µs",
                "fio p99 µs",
            ],
            &table,
        );
        Ok(())
    }

    /// `zbd:` against fio on the same zoned block device (guest-bench).
    pub(super) fn guest_fio_zbd(&mut self, r: &RunRecord) -> Result<()> {
        let rows = data::guest_bench_rows(self.results, r)?;
        let series = vec![
            Series {
                name: "ZIOB zbd:".into(),
                points: rows
                    .iter()
                    .enumerate()
                    .filter_map(|(i, x)| Some((i as f64, x.zbd?)))
                    .collect(),
            },
            Series {
                name: "fio io_uring".into(),
                points: rows
                    .iter()
                    .enumerate()
                    .filter_map(|(i, x)| Some((i as f64, x.fio?)))
                    .collect(),
            },
        ];
        let chart = Chart {
            title: "zbd: backend vs fio io_uring (guest ZNS block device)".into(),
            x_desc: "workload".into(),
            y_desc: "ops/s".into(),
            x: rows.iter().map(|x| x.workload.clone()).collect(),
            y_log: true,
            series,
        };
        self.figure("guest-zbd-vs-fio", "zbd: vs fio ops/s", |p| {
            plots::bar_svg(p, &chart)
        })?;
        self.caption(&[r]);
        let table: Vec<Vec<String>> = rows
            .iter()
            .map(|x| {
                vec![
                    x.workload.clone(),
                    show(x.zbd, 0),
                    show(x.fio, 0),
                    show_ratio(ratio(x.zbd, x.fio)),
                ]
            })
            .collect();
        self.table(
            &["workload", "ZIOB zbd: ops/s", "fio ops/s", "zbd/fio"],
            &table,
        );
        Ok(())
    }
}
