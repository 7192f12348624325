//! "How much faster are small writes with the buffer?": the append, commit log and many-zones
//! figures (host, ziob-bench).

use anyhow::Result;
use serde_json::Value;

use super::{num_u, onoff, ratio, show_ratio, size, Doc};
use crate::bench_report::data::{self, show, Stat};
use crate::bench_report::plots::{self, Chart, Series};
use crate::bench_report::store::RunRecord;

impl Doc<'_> {
    /// Append throughput with the buffer on and off over sizes × zones.
    pub(super) fn append(&mut self, r: &RunRecord) -> Result<()> {
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

    /// Commit-log records/s with the buffer on and off over flush intervals.
    pub(super) fn commitlog(&mut self, r: &RunRecord) -> Result<()> {
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

    /// Appends/s spread over many zones, buffer on and off.
    pub(super) fn manyzones(&mut self, r: &RunRecord) -> Result<()> {
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
}
