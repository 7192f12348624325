//! Writing `docs/benchmarks.md` and its SVG figures from a results directory: one section per
//! question a user asks, each figure with its caption (machine, exact command, date, repeats)
//! and the table of the plotted numbers under it.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

use super::data::{self, show, Stat};
use super::plots::{self, Chart, Series};
use super::store::{relative_path, Manifest, RunRecord};

/// What [`render`] wrote.
#[derive(Debug, Default)]
pub struct Rendered {
    /// Section headings, in order.
    pub sections: Vec<String>,
    /// SVG files written (absolute paths).
    pub figures: Vec<PathBuf>,
    /// SVG files of an earlier report that this one did not write, deleted from the figure
    /// directory.
    pub removed: Vec<PathBuf>,
    /// Headline ratios (one markdown bullet each), also at the top of the document.
    pub headlines: Vec<String>,
}

/// The questions, in order, with the suites that answer them.
pub const SECTIONS: &[(&str, &[&str])] = &[
    (
        "How much faster are small writes with the buffer?",
        &["append", "commitlog", "manyzones"],
    ),
    (
        "What does the runtime cost per op against tokio-uring/monoio/glommio?",
        &["runtime"],
    ),
    (
        "Which backend for which workload?",
        &[
            "guest-zbd",
            "guest-nvme",
            "guest-spdk",
            "guest-fio-zbd",
            "guest-fio-nvme",
        ],
    ),
    ("What latency do reads of fresh data see?", &["latency"]),
    (
        "How does the store compare with RocksDB?",
        &["kv-demo", "rocksdb-plugin"],
    ),
];

struct Doc<'a> {
    results: &'a Path,
    manifest: &'a Manifest,
    svg_dir: PathBuf,
    svg_link: String,
    raw_link: String,
    md: String,
    out: Rendered,
}

fn size(b: f64) -> String {
    let b = b as u64;
    if b >= 1 << 20 && b % (1 << 20) == 0 {
        format!("{}M", b >> 20)
    } else if b >= 1024 && b % 1024 == 0 {
        format!("{}K", b >> 10)
    } else {
        format!("{b}")
    }
}

fn onoff(v: &Value) -> &'static str {
    if v["ziob"].as_bool().unwrap_or(false) {
        "on"
    } else {
        "off"
    }
}

fn ratio(a: Option<Stat>, b: Option<Stat>) -> Option<f64> {
    let (a, b) = (a?, b?);
    (b.median != 0.0).then(|| a.median / b.median)
}

fn show_ratio(r: Option<f64>) -> String {
    r.map(|r| format!("{r:.2}×")).unwrap_or_else(|| "–".into())
}

/// The backend part of a device spec: `emu`, `zbd`, `nvme`, ...
fn backend(v: &Value) -> String {
    v["dev"]
        .as_str()
        .and_then(|d| d.split(':').next())
        .unwrap_or("?")
        .to_string()
}

impl Doc<'_> {
    fn skip_line(&mut self, suite: &str) {
        let reason = self
            .manifest
            .skip_reason(suite)
            .unwrap_or("skipped: not run in this report (no result)");
        let _ = writeln!(self.md, "- `{suite}`: {reason}\n");
    }

    fn caption(&mut self, runs: &[&RunRecord]) {
        for r in runs {
            let _ = writeln!(
                self.md,
                "*{}: {}; {} repeats per point (medians, whiskers and ranges min–max); {}; {:.0} s. \
                 Command:* `{}` *— raw: {}*\n",
                r.suite,
                r.machine.describe(),
                r.repeats,
                self.manifest.date,
                r.secs,
                r.command,
                r.files
                    .iter()
                    .map(|f| format!("[{f}]({}/{f})", self.raw_link))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }

    fn figure(
        &mut self,
        name: &str,
        alt: &str,
        svg: impl FnOnce(&Path) -> Result<()>,
    ) -> Result<()> {
        let path = self.svg_dir.join(format!("{name}.svg"));
        svg(&path).with_context(|| format!("drawing {}", path.display()))?;
        let _ = writeln!(self.md, "![{alt}]({}/{name}.svg)\n", self.svg_link);
        self.out.figures.push(path);
        Ok(())
    }

    fn table(&mut self, head: &[&str], rows: &[Vec<String>]) {
        let _ = writeln!(self.md, "| {} |", head.join(" | "));
        let _ = writeln!(
            self.md,
            "|{}",
            head.iter().map(|_| "---|").collect::<String>()
        );
        for r in rows {
            let _ = writeln!(self.md, "| {} |", r.join(" | "));
        }
        self.md.push('\n');
    }

    // ---- the sections -------------------------------------------------------------------

    fn append(&mut self, r: &RunRecord) -> Result<()> {
        let pts = data::ziob_points(self.results, r, |v| {
            (num_u(v, "bs"), num_u(v, "zones"), onoff(v) == "on")
        })?;
        let mut bss: Vec<u64> = pts.iter().map(|p| p.0 .0).collect();
        bss.sort();
        bss.dedup();
        let mut zones: Vec<u64> = pts.iter().map(|p| p.0 .1).collect();
        zones.sort();
        zones.dedup();
        let get = |bs: u64, z: u64, on: bool| {
            pts.iter()
                .find(|p| p.0 == (bs, z, on))
                .map(|p| p.1.as_slice())
        };
        let mut series = Vec::new();
        for &z in &zones {
            for on in [true, false] {
                let points: Vec<(f64, Stat)> = bss
                    .iter()
                    .enumerate()
                    .filter_map(|(i, &bs)| {
                        let st = data::stat(get(bs, z, on)?, "bytes_per_sec")?.scaled(1e-6);
                        Some((i as f64, st))
                    })
                    .collect();
                if !points.is_empty() {
                    series.push(Series {
                        name: format!("{z} zone(s), buffer {}", if on { "on" } else { "off" }),
                        points,
                    });
                }
            }
        }
        let chart = Chart {
            title: "Appends: ZIOB buffer on vs off (pass-through)".into(),
            x_desc: "append size".into(),
            y_desc: "MB/s".into(),
            x: bss.iter().map(|&b| size(b as f64)).collect(),
            y_log: true,
            series,
        };
        self.figure("append-on-off", "append throughput on vs off", |p| {
            plots::line_svg(p, &chart)
        })?;
        self.caption(&[r]);
        let mut rows = Vec::new();
        for &bs in &bss {
            for &z in &zones {
                let on = get(bs, z, true).unwrap_or(&[]);
                let off = get(bs, z, false).unwrap_or(&[]);
                let mb = |v: &[Value]| data::stat(v, "bytes_per_sec").map(|s| s.scaled(1e-6));
                let p50 = |v: &[Value]| data::stat(v, "lat_ns.p50").map(|s| s.scaled(1e-3));
                rows.push(vec![
                    size(bs as f64),
                    z.to_string(),
                    show(mb(on), 1),
                    show(mb(off), 1),
                    show_ratio(ratio(mb(on), mb(off))),
                    show(p50(on), 1),
                    show(p50(off), 1),
                ]);
            }
        }
        self.table(
            &[
                "append",
                "zones",
                "on MB/s",
                "off MB/s",
                "on/off",
                "on p50 µs",
                "off p50 µs",
            ],
            &rows,
        );
        // Headline: the smallest append to the fewest zones.
        if let (Some(&bs), Some(&z)) = (bss.first(), zones.first()) {
            let (on, off) = (get(bs, z, true), get(bs, z, false));
            if let Some(x) = ratio(
                on.and_then(|v| data::stat(v, "iops")),
                off.and_then(|v| data::stat(v, "iops")),
            ) {
                self.out.headlines.push(format!(
                    "{} appends to {z} zone(s) on the emulated device: **{x:.1}×** the pass-through's throughput with the buffer",
                    size(bs as f64)
                ));
            }
        }
        Ok(())
    }

    fn commitlog(&mut self, r: &RunRecord) -> Result<()> {
        let pts = data::ziob_points(self.results, r, |v| {
            (num_u(v, "bs"), num_u(v, "flush_every"), onoff(v) == "on")
        })?;
        let mut bss: Vec<u64> = pts.iter().map(|p| p.0 .0).collect();
        bss.sort();
        bss.dedup();
        let mut every: Vec<u64> = pts.iter().map(|p| p.0 .1).collect();
        every.sort();
        every.dedup();
        let get = |bs: u64, n: u64, on: bool| {
            pts.iter()
                .find(|p| p.0 == (bs, n, on))
                .map(|p| p.1.as_slice())
        };
        let mut series = Vec::new();
        for &bs in &bss {
            for on in [true, false] {
                let points: Vec<(f64, Stat)> = every
                    .iter()
                    .enumerate()
                    .filter_map(|(i, &n)| {
                        Some((i as f64, data::stat(get(bs, n, on)?, "records_per_sec")?))
                    })
                    .collect();
                if !points.is_empty() {
                    series.push(Series {
                        name: format!(
                            "{} records, buffer {}",
                            size(bs as f64),
                            if on { "on" } else { "off" }
                        ),
                        points,
                    });
                }
            }
        }
        let chart = Chart {
            title: "Commit log: records/s with a flush every N appends".into(),
            x_desc: "appends per flush (N)".into(),
            y_desc: "records/s".into(),
            x: every.iter().map(|n| n.to_string()).collect(),
            y_log: true,
            series,
        };
        self.figure("commitlog-on-off", "commit log records/s on vs off", |p| {
            plots::line_svg(p, &chart)
        })?;
        self.caption(&[r]);
        let mut rows = Vec::new();
        for &bs in &bss {
            for &n in &every {
                let on = get(bs, n, true).unwrap_or(&[]);
                let off = get(bs, n, false).unwrap_or(&[]);
                let rec = |v: &[Value]| data::stat(v, "records_per_sec");
                rows.push(vec![
                    size(bs as f64),
                    n.to_string(),
                    show(rec(on), 0),
                    show(rec(off), 0),
                    show_ratio(ratio(rec(on), rec(off))),
                    show(
                        data::stat(on, "append_lat_ns.p99").map(|s| s.scaled(1e-3)),
                        1,
                    ),
                    show(
                        data::stat(off, "append_lat_ns.p50").map(|s| s.scaled(1e-3)),
                        1,
                    ),
                    show(data::stat(on, "device_flushes"), 0),
                    show(data::stat(off, "device_flushes"), 0),
                ]);
            }
        }
        self.table(
            &[
                "record",
                "N",
                "on rec/s",
                "off rec/s",
                "on/off",
                "on append p99 µs",
                "off append p50 µs",
                "on device flushes",
                "off device flushes",
            ],
            &rows,
        );
        Ok(())
    }

    fn manyzones(&mut self, r: &RunRecord) -> Result<()> {
        let pts = data::ziob_points(self.results, r, |v| {
            (num_u(v, "bs"), num_u(v, "zones"), onoff(v) == "on")
        })?;
        let mut zones: Vec<u64> = pts.iter().map(|p| p.0 .1).collect();
        zones.sort();
        zones.dedup();
        let mut keys: Vec<(u64, bool)> = pts.iter().map(|p| (p.0 .0, p.0 .2)).collect();
        keys.sort();
        keys.dedup();
        let series: Vec<Series> = keys
            .iter()
            .map(|&(bs, on)| Series {
                name: format!(
                    "{} appends, buffer {}",
                    size(bs as f64),
                    if on { "on" } else { "off" }
                ),
                points: zones
                    .iter()
                    .enumerate()
                    .filter_map(|(i, &z)| {
                        let v = &pts.iter().find(|p| p.0 == (bs, z, on))?.1;
                        Some((i as f64, data::stat(v, "appends_per_sec")?))
                    })
                    .collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect();
        let chart = Chart {
            title: "Tiny appends spread over many zones".into(),
            x_desc: "zones appended to in turn".into(),
            y_desc: "appends/s".into(),
            x: zones.iter().map(|z| z.to_string()).collect(),
            y_log: true,
            series,
        };
        self.figure("manyzones", "appends/s over many zones", |p| {
            plots::line_svg(p, &chart)
        })?;
        self.caption(&[r]);
        let rows: Vec<Vec<String>> = pts
            .iter()
            .map(|((bs, z, on), v)| {
                let done = v
                    .iter()
                    .filter(|x| x["completed"].as_bool() == Some(true))
                    .count();
                let refusal = v
                    .iter()
                    .find_map(|x| x["refusal_kind"].as_str())
                    .unwrap_or("")
                    .to_string();
                vec![
                    size(*bs as f64),
                    z.to_string(),
                    if *on { "on" } else { "off" }.to_string(),
                    format!("{done}/{}", v.len()),
                    show(data::stat(v, "appends_per_sec"), 0),
                    show(
                        data::stat(v, "memory_used_bytes").map(|s| s.scaled(1.0 / 1048576.0)),
                        1,
                    ),
                    refusal,
                ]
            })
            .collect();
        self.table(
            &[
                "append",
                "zones",
                "buffer",
                "completed",
                "appends/s",
                "memory MiB",
                "refusal",
            ],
            &rows,
        );
        Ok(())
    }

    fn runtime(&mut self, r: &RunRecord) -> Result<()> {
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

    fn guest_backends(&mut self, runs: &[&RunRecord]) -> Result<()> {
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

    fn guest_fio_nvme(&mut self, r: &RunRecord) -> Result<()> {
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

    fn guest_fio_zbd(&mut self, r: &RunRecord) -> Result<()> {
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

    fn latency(&mut self, r: &RunRecord) -> Result<()> {
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

/// (backend, buffered, (append size, zones), the repeats) of the guest backend figure.
type BackendPoint = (String, bool, (u64, u64), Vec<Value>);

fn num_u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or(0)
}

/// Renders the report of the results directory `results` into `md_path`, with the SVGs in
/// `<md dir>/benchmarks/`.
pub fn render(results: &Path, md_path: &Path) -> Result<Rendered> {
    let manifest = Manifest::load(results)?;
    let docs_dir = md_path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let svg_dir = docs_dir.join("benchmarks");
    fs::create_dir_all(&svg_dir).with_context(|| format!("creating {}", svg_dir.display()))?;
    let abs_docs = super::store::absolute(&docs_dir);
    let mut doc = Doc {
        results,
        manifest: &manifest,
        svg_link: "benchmarks".into(),
        raw_link: relative_path(&abs_docs, &super::store::absolute(results)),
        svg_dir,
        md: String::new(),
        out: Rendered::default(),
    };
    for (question, suites) in SECTIONS {
        let _ = writeln!(doc.md, "## {question}\n");
        doc.out.sections.push(question.to_string());
        let ran: Vec<&RunRecord> = suites.iter().filter_map(|s| manifest.run(s)).collect();
        for s in suites.iter() {
            if manifest.run(s).is_none() {
                doc.skip_line(s);
            }
        }
        // Guest backends share one figure; everything else has its own.
        let backends: Vec<&RunRecord> = ran
            .iter()
            .copied()
            .filter(|r| matches!(r.suite.as_str(), "guest-zbd" | "guest-nvme" | "guest-spdk"))
            .collect();
        if !backends.is_empty() {
            doc.guest_backends(&backends)?;
        }
        for r in ran {
            match r.suite.as_str() {
                "append" => doc.append(r)?,
                "commitlog" => doc.commitlog(r)?,
                "manyzones" => doc.manyzones(r)?,
                "runtime" => doc.runtime(r)?,
                "latency" => doc.latency(r)?,
                "guest-fio-nvme" => doc.guest_fio_nvme(r)?,
                "guest-fio-zbd" => doc.guest_fio_zbd(r)?,
                _ => {}
            }
        }
    }
    let mut head = String::new();
    let _ = writeln!(
        head,
        "# ZIOB benchmarks\n\n\
         Generated by `{}` on {} (a {} run). Do not edit by hand: re-run the command. Every \
         figure names the machine, the exact command, the date and the repeats; every number is \
         measured (median of the repeats, with min–max). Under QEMU TCG absolute numbers vary \
         between runs: compare within a figure.\n",
        manifest.command,
        manifest.date,
        if manifest.quick { "`--quick`" } else { "full" }
    );
    let _ = writeln!(head, "## Headline numbers\n");
    if doc.out.headlines.is_empty() {
        head.push_str("- no suite ran\n");
    }
    for h in &doc.out.headlines {
        let _ = writeln!(head, "- {h}");
    }
    head.push('\n');
    let _ = writeln!(head, "Questions:\n");
    for (q, _) in SECTIONS {
        let anchor: String = q
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '/')
            .collect::<String>()
            .replace('/', "")
            .replace(' ', "-");
        let _ = writeln!(head, "- [{q}](#{anchor})");
    }
    head.push('\n');
    let md = head + &doc.md;
    fs::write(md_path, md).with_context(|| format!("writing {}", md_path.display()))?;
    doc.out.removed = remove_stale_svgs(&doc.svg_dir, &doc.out.figures)?;
    Ok(doc.out)
}

/// Deletes the `*.svg` files directly in `svg_dir` that are not in `written` (figures of an
/// earlier report whose suite did not run, or was renamed, this time); the deleted paths.
/// Nothing else in the directory is touched.
fn remove_stale_svgs(svg_dir: &Path, written: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let keep: Vec<_> = written.iter().filter_map(|p| p.file_name()).collect();
    let mut removed = Vec::new();
    for entry in fs::read_dir(svg_dir).with_context(|| format!("listing {}", svg_dir.display()))? {
        let path = entry?.path();
        let is_svg = path.extension().is_some_and(|e| e == "svg") && path.is_file();
        if is_svg && !path.file_name().is_some_and(|n| keep.contains(&n)) {
            fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
            removed.push(path);
        }
    }
    removed.sort();
    Ok(removed)
}
