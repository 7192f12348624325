//! A snapshot of every core's metrics, merged on demand.

use serde::ser::SerializeMap;

use super::latency::OpLatencies;
use super::ShardStats;

/// One core's metrics: its shard's counters and gauges and its latency histograms.
///
/// Serialized (JSON) as the [`ShardStats`] fields with a `latency` object beside them.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CoreMetrics {
    /// Counters and gauges.
    #[serde(flatten)]
    pub stats: ShardStats,
    /// Latency histograms per operation kind.
    pub latency: OpLatencies,
}

/// Every core's metrics at one moment, and their merge: counters and gauges summed
/// ([`ShardStats::total`]), histograms added ([`OpLatencies::merge`]). From
/// [`Ziob::metrics`](crate::Ziob::metrics); hand it to a `metrics` recorder with
/// [`MetricsSnapshot::publish`].
///
/// Serialized (JSON) as `{"total": {...}, "shards": [{...}, ...]}`, each a [`CoreMetrics`].
#[derive(Debug, Clone)]
pub struct MetricsSnapshot {
    cores: Vec<CoreMetrics>,
    total: CoreMetrics,
}

impl MetricsSnapshot {
    /// Merges the metrics of the cores (in core order).
    pub fn from_cores(cores: Vec<CoreMetrics>) -> MetricsSnapshot {
        let stats: Vec<ShardStats> = cores.iter().map(|c| c.stats.clone()).collect();
        let mut latency = OpLatencies::new();
        for c in &cores {
            latency.merge(&c.latency);
        }
        MetricsSnapshot {
            total: CoreMetrics {
                stats: ShardStats::total(&stats),
                latency,
            },
            cores,
        }
    }

    /// Each core's metrics, in core order.
    pub fn cores(&self) -> &[CoreMetrics] {
        &self.cores
    }

    /// All cores merged (`stats.core` is the number of cores).
    pub fn total(&self) -> &CoreMetrics {
        &self.total
    }
}

impl serde::Serialize for MetricsSnapshot {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("total", &self.total)?;
        map.serialize_entry("shards", &self.cores)?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::OpKind;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        /// Samples spread over cores and merged give the same histogram as all of them
        /// recorded by one core.
        #[test]
        fn merging_cores_equals_recording_in_one(
            samples in proptest::collection::vec((0usize..4, 0usize..OpKind::COUNT, 0u64..10_000_000_000), 0..400)
        ) {
            let mut cores = vec![CoreMetrics::default(); 4];
            let mut one = OpLatencies::new();
            for &(core, op, ns) in &samples {
                cores[core].latency.record(OpKind::ALL[op], ns);
                cores[core].stats.read_hits += 1;
                one.record(OpKind::ALL[op], ns);
            }
            let snap = MetricsSnapshot::from_cores(cores);
            prop_assert_eq!(snap.total().stats.read_hits, samples.len() as u64);
            prop_assert_eq!(snap.total().stats.core, 4);
            for op in OpKind::ALL {
                let merged = snap.total().latency.histogram(op);
                prop_assert!(merged == one.histogram(op), "{op}: histograms differ");
                prop_assert_eq!(snap.total().latency.summary(op), one.summary(op));
            }
        }
    }

    #[test]
    fn serializes_total_and_shards_with_latency() {
        let mut c = CoreMetrics::default();
        c.stats.bytes_written = 10;
        c.latency.record(OpKind::Append, 1500);
        let snap = MetricsSnapshot::from_cores(vec![c.clone(), c]);
        let v = serde_json::to_value(&snap).unwrap();
        assert_eq!(v["total"]["bytes_written"], 20);
        assert_eq!(v["total"]["latency"]["append"]["count"], 2);
        assert_eq!(v["shards"][1]["bytes_written"], 10);
        assert_eq!(v["shards"][0]["latency"]["append"]["sum_ns"], 1500);
    }
}
