//! Issue #13, metrics: `MetricsSnapshot::publish` hands every counter, gauge and latency
//! summary to the installed `metrics` recorder, with the names of docs/METRICS.md, the
//! `instance` and `op` labels and the snapshot's values.

use std::collections::HashMap;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::MetricKind;
use ziob::metrics::{
    MetricsSnapshot, OpKind, StatKind, LATENCY_COUNT_METRIC, LATENCY_METRIC, LATENCY_SUM_METRIC,
    STAT_METRICS,
};
use ziob::{DmaBuf, Runtime, Ziob, ZiobConfig, ZoneAction, ZoneTarget};

/// (kind, name, sorted labels) → value.
type Published = HashMap<(MetricKind, String, Vec<(String, String)>), DebugValue>;

fn publish(snapshot: &MetricsSnapshot, instance: &str) -> (Published, Vec<String>) {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || snapshot.publish(instance));
    let mut out = Published::new();
    let mut described = Vec::new();
    for (key, unit, description, value) in snapshotter.snapshot().into_vec() {
        let (kind, key) = key.into_parts();
        let mut labels: Vec<(String, String)> = key
            .labels()
            .map(|l| (l.key().to_string(), l.value().to_string()))
            .collect();
        labels.sort();
        if description.is_some() && unit.is_some() {
            described.push(key.name().to_string());
        }
        let old = out.insert((kind, key.name().to_string(), labels), value);
        assert!(old.is_none(), "published twice: {}", key.name());
    }
    (out, described)
}

fn workload_snapshot() -> MetricsSnapshot {
    let rt = Runtime::builder().cores(2).build().unwrap();
    rt.block_on(|| async {
        let z = Ziob::open("mem:zones=8,zone_size=1M", ZiobConfig::default())
            .await
            .unwrap();
        for i in 0..50u32 {
            z.append(
                i % 4,
                DmaBuf::from_slice(&vec![i as u8; 100 + i as usize * 10]),
            )
            .await
            .unwrap();
        }
        z.read(1, 0, 100).await.unwrap();
        z.flush(3).await.unwrap();
        z.zone_action(ZoneAction::Finish, ZoneTarget::One(2))
            .await
            .unwrap();
        z.sync().await.unwrap();
        let m = z.metrics().await.unwrap();
        z.close().await.unwrap();
        m
    })
    .unwrap()
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    v.sort();
    v
}

fn gauge(p: &Published, name: &str, l: &[(&str, &str)]) -> f64 {
    match p.get(&(MetricKind::Gauge, name.to_string(), labels(l))) {
        Some(DebugValue::Gauge(v)) => v.into_inner(),
        other => panic!("gauge {name} {l:?}: {other:?}"),
    }
}

fn counter(p: &Published, name: &str, l: &[(&str, &str)]) -> u64 {
    match p.get(&(MetricKind::Counter, name.to_string(), labels(l))) {
        Some(DebugValue::Counter(v)) => *v,
        other => panic!("counter {name} {l:?}: {other:?}"),
    }
}

#[test]
fn publish_sets_every_metric_to_the_snapshot_values() {
    let m = workload_snapshot();
    let (p, described) = publish(&m, "test-instance");
    let inst = [("instance", "test-instance")];
    let t = m.total();
    assert_eq!(t.latency.count(OpKind::Append), 50);
    assert_eq!(t.stats.read_hits, 1);
    for s in STAT_METRICS {
        let want = (s.get)(&t.stats);
        match s.kind {
            StatKind::Counter => assert_eq!(counter(&p, s.name, &inst), want, "{}", s.name),
            StatKind::Gauge => assert_eq!(gauge(&p, s.name, &inst), want as f64, "{}", s.name),
        }
        assert!(
            described.iter().any(|d| d == s.name),
            "{} not described",
            s.name
        );
    }
    // A few by name, as a scraper would see them.
    assert_eq!(counter(&p, "ziob_read_hits_total", &inst), 1);
    assert_eq!(
        counter(&p, "ziob_bytes_written_total", &inst),
        (0..50).map(|i| 100 + i * 10).sum::<u64>()
    );
    assert_eq!(gauge(&p, "ziob_cores", &inst), 2.0);
    assert!(counter(&p, "ziob_device_flushes_total", &inst) >= 1);
    for op in OpKind::ALL {
        let s = t.latency.summary(op);
        let l = [("instance", "test-instance"), ("op", op.name())];
        assert_eq!(counter(&p, LATENCY_COUNT_METRIC, &l), s.count, "{op}");
        assert_eq!(
            gauge(&p, LATENCY_SUM_METRIC, &l),
            s.sum_ns as f64 / 1e3,
            "{op}"
        );
        for (q, ns) in [
            ("0.5", s.p50_ns),
            ("0.9", s.p90_ns),
            ("0.99", s.p99_ns),
            ("0.999", s.p999_ns),
            ("1", s.max_ns),
        ] {
            let ql = [
                ("instance", "test-instance"),
                ("op", op.name()),
                ("quantile", q),
            ];
            assert_eq!(gauge(&p, LATENCY_METRIC, &ql), ns as f64 / 1e3, "{op} q{q}");
        }
    }
    assert_eq!(
        counter(
            &p,
            LATENCY_COUNT_METRIC,
            &[("instance", "test-instance"), ("op", "zone_finish")]
        ),
        1
    );
    assert!(
        gauge(
            &p,
            LATENCY_METRIC,
            &[
                ("instance", "test-instance"),
                ("op", "append"),
                ("quantile", "1")
            ]
        ) > 0.0
    );
    for name in [LATENCY_METRIC, LATENCY_SUM_METRIC, LATENCY_COUNT_METRIC] {
        assert!(described.iter().any(|d| d == name), "{name} not described");
    }
    // Nothing else: every published series is one of the above.
    let expected_series = STAT_METRICS.len() + OpKind::COUNT * (5 + 2);
    assert_eq!(p.len(), expected_series);
}

/// docs/METRICS.md lists every metric name published, and no other `ziob_` name.
#[test]
fn the_metrics_doc_lists_every_published_name() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/METRICS.md"))
        .unwrap();
    let mut names: Vec<&str> = STAT_METRICS.iter().map(|s| s.name).collect();
    names.extend([LATENCY_METRIC, LATENCY_SUM_METRIC, LATENCY_COUNT_METRIC]);
    for n in &names {
        assert!(
            doc.contains(&format!("`{n}`")),
            "docs/METRICS.md lacks `{n}`"
        );
    }
    for word in doc.split('`').skip(1).step_by(2) {
        let plain_name = word
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if word.starts_with("ziob_") && plain_name {
            assert!(
                names.contains(&word),
                "docs/METRICS.md names `{word}`, not published"
            );
        }
    }
    for op in OpKind::ALL {
        assert!(
            doc.contains(&format!("`{}`", op.name())),
            "docs/METRICS.md lacks op {op}"
        );
    }
}
