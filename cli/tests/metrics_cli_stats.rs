//! Issue #13, metrics: `ziob stats` shows every core's counters and gauges with the total
//! and the latency percentiles per operation kind, as a table and as JSON, and they match
//! the workload it ran.

mod cli_support;

use std::io::Write;

use cli_support::ziob;

fn device(dir: &tempfile::TempDir) -> String {
    let dev = format!("emu:{}", dir.path().join("m.zns").display());
    let (code, _, err) = ziob(&["create", &dev, "--zones", "4", "--zone-size", "4M"], b"");
    assert_eq!(code, 0, "{err}");
    dev
}

#[test]
fn stats_json_has_latencies_per_op_matching_the_workload() {
    let dir = tempfile::tempdir().unwrap();
    let dev = device(&dir);
    // 300 appends of 4 KiB and one of 1000 bytes to zone 2 (core 0 of 2).
    let data: Vec<u8> = (0..300 * 4096 + 1000).map(|i| (i % 253) as u8).collect();
    let (code, out, err) = ziob(
        &[
            "stats", &dev, "--zone", "2", "--bs", "4K", "--cores", "2", "--json",
        ],
        &data,
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let t = &v["total"];
    let lat = &t["latency"];
    assert_eq!(lat["append"]["count"], 301, "{lat}");
    assert_eq!(lat["read"]["count"], 1);
    assert_eq!(lat["flush"]["count"], 1);
    assert_eq!(lat["device_write"]["count"], t["writebacks"]);
    assert_eq!(lat["device_flush"]["count"], t["device_flushes"]);
    assert!(lat.get("device_read").is_none(), "no miss: {lat}");
    assert!(
        lat.get("sync").is_none(),
        "close syncs inside, after the snapshot"
    );
    for op in ["append", "read", "flush", "device_write", "device_flush"] {
        let s = &lat[op];
        let p = |k: &str| s[k].as_u64().unwrap();
        assert!(p("p50_ns") > 0, "{op}: {s}");
        assert!(
            p("p50_ns") <= p("p99_ns") && p("p99_ns") <= p("max_ns"),
            "{op}: {s}"
        );
        assert!(p("sum_ns") >= p("max_ns") * 999 / 1000, "{op}: {s}");
    }
    assert_eq!(t["append_bytes"], data.len());
    assert_eq!(t["read_bytes"], data.len());
    assert_eq!(t["writeback_retries"], 0);
    assert_eq!(t["calls_in_flight"], 0);
    assert_eq!(t["zones_buffered"], 1);
    let shards = v["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 2);
    assert_eq!(shards[0]["latency"]["append"]["count"], 301);
    assert!(
        shards[1]["latency"].as_object().unwrap().is_empty(),
        "core 1 did nothing: {}",
        shards[1]
    );
}

#[test]
fn stats_table_shows_cores_total_and_latency_rows() {
    let dir = tempfile::tempdir().unwrap();
    let dev = device(&dir);
    let data = vec![9u8; 3 * 4096];
    let (code, out, err) = ziob(
        &["stats", &dev, "--zone", "1", "--bs", "4K", "--cores", "2"],
        &data,
    );
    assert_eq!(code, 0, "{err}");
    let header = out.lines().next().unwrap();
    let cols: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(cols, ["core", "0", "core", "1", "total"], "{out}");
    // Counters first, then the latency table: a label is looked up in its own part.
    let (counters, latency) = out.split_once("latency (µs)").expect("a latency table");
    let row = |label: &str| -> Vec<String> {
        let part = if ["append", "flush", "device_write"].contains(&label) {
            latency
        } else {
            counters
        };
        let line = part
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no row {label:?} in\n{out}"));
        line[label.len()..]
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    assert_eq!(row("append bytes"), ["0", "12288", "12288"]);
    assert_eq!(row("write-back retries"), ["0", "0", "0"]);
    assert_eq!(row("read hits"), ["0", "1", "1"]);
    assert_eq!(row("device flushes"), ["0", "1", "1"]);
    // emu has no durable writes: the flush was a write-back and a device flush.
    assert_eq!(row("durable writes"), ["0", "0", "0"]);
    let lat_header: Vec<&str> = latency.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(lat_header, ["count", "p50", "p90", "p99", "p99.9", "max"]);
    assert_eq!(row("append")[0], "3");
    assert_eq!(row("flush")[0], "1");
    assert_eq!(row("device_write")[0], "1");
    let p: Vec<f64> = row("append")[1..]
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    assert!(
        p.windows(2).all(|w| w[0] <= w[1]),
        "percentiles rise: {p:?}"
    );
    // --per-core adds each core's latency table: core 1 owns zone 1, core 0 did nothing.
    let (code, out, err) = ziob(
        &["stats", &dev, "--zone", "1", "--cores", "2", "--per-core"],
        b"abc",
    );
    assert_eq!(code, 0, "{err}");
    let (_, core0) = out.split_once("core 0 (µs)").expect("core 0's table");
    let (core0, core1) = core0.split_once("core 1 (µs)").expect("core 1's table");
    assert!(!core0.contains("append"), "{out}");
    assert!(core1.lines().any(|l| l.starts_with("append ")), "{out}");
    // The reader of stdout going away is not an error.
    let mut child = cli_support::spawn(&["stats", &dev, "--zone", "1", "--json"], &[]);
    child.stdin.take().unwrap().write_all(b"x").unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
