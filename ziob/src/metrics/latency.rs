//! Latency histograms, one per [`OpKind`], as one core records them and as they merge.

use hdrhistogram::Histogram;
use serde::ser::SerializeMap;

use super::op::OpKind;

/// Significant digits the histograms keep (values within 0.1 %).
const SIGNIFICANT_DIGITS: u8 = 3;

/// Latency histograms of every [`OpKind`], in nanoseconds, with the exact count and sum of
/// each. One core records into its own (no sharing, no atomics); [`OpLatencies::merge`] adds
/// another core's.
///
/// Serialized (JSON) as an object from each kind's [name](OpKind::name) to its
/// [`LatencySummary`], kinds with no samples left out.
#[derive(Debug, Clone)]
pub struct OpLatencies {
    histograms: Vec<Histogram<u64>>,
    sums_ns: [u64; OpKind::COUNT],
}

impl Default for OpLatencies {
    fn default() -> Self {
        OpLatencies::new()
    }
}

impl OpLatencies {
    /// Empty histograms (they grow to the largest value recorded).
    pub fn new() -> OpLatencies {
        OpLatencies {
            histograms: (0..OpKind::COUNT)
                .map(|_| Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is valid"))
                .collect(),
            sums_ns: [0; OpKind::COUNT],
        }
    }

    /// Records one `op` that took `ns` nanoseconds.
    #[inline]
    pub fn record(&mut self, op: OpKind, ns: u64) {
        let i = op as usize;
        // Auto-resizing: recording cannot fail for any u64.
        let _ = self.histograms[i].record(ns);
        self.sums_ns[i] = self.sums_ns[i].saturating_add(ns);
    }

    /// Adds `other`'s samples (another core's) to these.
    pub fn merge(&mut self, other: &OpLatencies) {
        for (i, h) in other.histograms.iter().enumerate() {
            self.histograms[i]
                .add(h)
                .expect("auto-resizing histograms of the same precision add");
            self.sums_ns[i] = self.sums_ns[i].saturating_add(other.sums_ns[i]);
        }
    }

    /// The histogram of `op`, in nanoseconds.
    pub fn histogram(&self, op: OpKind) -> &Histogram<u64> {
        &self.histograms[op as usize]
    }

    /// How many `op` were recorded.
    pub fn count(&self, op: OpKind) -> u64 {
        self.histograms[op as usize].len()
    }

    /// The exact total time of the recorded `op`, in nanoseconds.
    pub fn sum_ns(&self, op: OpKind) -> u64 {
        self.sums_ns[op as usize]
    }

    /// Count, sum and percentiles of `op`.
    pub fn summary(&self, op: OpKind) -> LatencySummary {
        let h = &self.histograms[op as usize];
        if h.is_empty() {
            return LatencySummary::default();
        }
        let q = |q: f64| h.highest_equivalent(h.value_at_quantile(q));
        LatencySummary {
            count: h.len(),
            sum_ns: self.sums_ns[op as usize],
            p50_ns: q(0.5),
            p90_ns: q(0.9),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            max_ns: h.max(),
        }
    }
}

impl serde::Serialize for OpLatencies {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let kinds: Vec<OpKind> = OpKind::ALL
            .into_iter()
            .filter(|&k| self.count(k) > 0)
            .collect();
        let mut map = s.serialize_map(Some(kinds.len()))?;
        for k in kinds {
            map.serialize_entry(k.name(), &self.summary(k))?;
        }
        map.end()
    }
}

/// Count, total and percentiles of one kind's latencies, in nanoseconds. Percentiles are
/// within 0.1 % (the histograms keep 3 significant digits); `max_ns` is exact up to that
/// precision too. All zero when nothing was recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LatencySummary {
    /// Operations recorded.
    pub count: u64,
    /// Their total time (exact).
    pub sum_ns: u64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest.
    pub max_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_counts_sums_and_keeps_the_largest() {
        let mut a = OpLatencies::new();
        let mut b = OpLatencies::new();
        for ns in 1..=1000 {
            a.record(OpKind::Append, ns * 1000);
        }
        b.record(OpKind::Append, 5_000_000);
        b.record(OpKind::DeviceFlush, 42);
        let mut m = a.clone();
        m.merge(&b);
        assert_eq!(m.count(OpKind::Append), 1001);
        assert_eq!(
            m.sum_ns(OpKind::Append),
            a.sum_ns(OpKind::Append) + 5_000_000
        );
        assert_eq!(m.count(OpKind::DeviceFlush), 1);
        assert_eq!(m.count(OpKind::Read), 0);
        let s = m.summary(OpKind::Append);
        assert!(s.max_ns.abs_diff(5_000_000) <= 5_000, "{s:?}");
        // The median of 1..=1000 µs plus one outlier is ~501 µs.
        assert!(s.p50_ns.abs_diff(501_000) <= 1_000, "{s:?}");
        assert!(s.p99_ns.abs_diff(991_000) <= 1_000, "{s:?}");
        assert_eq!(m.summary(OpKind::Read), LatencySummary::default());
    }

    #[test]
    fn serializes_only_recorded_kinds_by_name() {
        let mut a = OpLatencies::new();
        a.record(OpKind::WriteAt, 7);
        let v = serde_json::to_value(&a).unwrap();
        let obj = v.as_object().unwrap();
        assert_eq!(obj.len(), 1);
        assert_eq!(obj["write_at"]["count"], 1);
        assert_eq!(obj["write_at"]["sum_ns"], 7);
    }
}
