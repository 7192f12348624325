//! Publishing a [`MetricsSnapshot`] through the `metrics` crate facade, to whatever recorder
//! the application installed (a Prometheus exporter, statsd, ...). The names, kinds and units
//! are listed in docs/METRICS.md; [`STAT_METRICS`] and [`LATENCY_METRIC`] are the source.

use ::metrics::{Label, Unit};

use super::latency::LatencySummary;
use super::op::OpKind;
use super::snapshot::MetricsSnapshot;
use super::ShardStats;

/// How a counter or gauge of [`ShardStats`] is published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatKind {
    /// A monotonic counter, set to the snapshot's absolute value.
    Counter,
    /// A gauge: a level now (or a peak).
    Gauge,
}

/// One published metric read from the merged [`ShardStats`].
#[derive(Debug, Clone, Copy)]
pub struct StatMetric {
    /// The metric's name.
    pub name: &'static str,
    /// Counter or gauge.
    pub kind: StatKind,
    /// Its unit.
    pub unit: Unit,
    /// What it counts.
    pub help: &'static str,
    /// Reads it from the merged stats.
    pub get: fn(&ShardStats) -> u64,
}

const fn stat(
    name: &'static str,
    kind: StatKind,
    unit: Unit,
    help: &'static str,
    get: fn(&ShardStats) -> u64,
) -> StatMetric {
    StatMetric {
        name,
        kind,
        unit,
        help,
        get,
    }
}

use StatKind::{Counter, Gauge};
use Unit::{Bytes, Count, Nanoseconds};

/// Every counter and gauge [`MetricsSnapshot::publish`] sets, all cores summed, each with
/// the label `instance`.
pub const STAT_METRICS: &[StatMetric] = &[
    stat(
        "ziob_bytes_written_total",
        Counter,
        Bytes,
        "Bytes accepted from applications (appends and writes).",
        |s| s.bytes_written,
    ),
    stat(
        "ziob_append_bytes_total",
        Counter,
        Bytes,
        "Bytes accepted by appends.",
        |s| s.append_bytes,
    ),
    stat(
        "ziob_read_bytes_total",
        Counter,
        Bytes,
        "Bytes returned by reads.",
        |s| s.read_bytes,
    ),
    stat(
        "ziob_read_hits_total",
        Counter,
        Count,
        "Reads served entirely from buffer memory.",
        |s| s.read_hits,
    ),
    stat(
        "ziob_read_misses_total",
        Counter,
        Count,
        "Reads that needed the device (at least partly).",
        |s| s.read_misses,
    ),
    stat(
        "ziob_direct_reads_total",
        Counter,
        Count,
        "Reads served straight from the device on the reading core, without the zone's owner.",
        |s| s.direct_reads,
    ),
    stat(
        "ziob_direct_read_bytes_total",
        Counter,
        Bytes,
        "Bytes returned by direct reads.",
        |s| s.direct_read_bytes,
    ),
    stat(
        "ziob_direct_read_fallbacks_total",
        Counter,
        Count,
        "Direct reads that went to the zone's owner after all (reset meanwhile, device error).",
        |s| s.direct_read_fallbacks,
    ),
    stat(
        "ziob_writebacks_total",
        Counter,
        Count,
        "Device writes issued by write-back and completed.",
        |s| s.writebacks,
    ),
    stat(
        "ziob_writeback_bytes_total",
        Counter,
        Bytes,
        "Bytes written to the device by write-back.",
        |s| s.writeback_bytes,
    ),
    stat(
        "ziob_writeback_errors_total",
        Counter,
        Count,
        "Write-backs that failed.",
        |s| s.writeback_errors,
    ),
    stat(
        "ziob_writeback_retries_total",
        Counter,
        Count,
        "Failed write-backs retried (transient errors).",
        |s| s.writeback_retries,
    ),
    stat(
        "ziob_device_flushes_total",
        Counter,
        Count,
        "Device write-cache flushes issued (group commit shares them).",
        |s| s.device_flushes,
    ),
    stat(
        "ziob_device_durable_writes_total",
        Counter,
        Count,
        "Write-backs completed as durable writes (Force Unit Access) that extended a zone's durable prefix.",
        |s| s.device_durable_writes,
    ),
    stat(
        "ziob_device_zone_opens_total",
        Counter,
        Count,
        "Device zones opened by write-back.",
        |s| s.device_zone_opens,
    ),
    stat(
        "ziob_device_zone_closes_total",
        Counter,
        Count,
        "Device zones closed to free an open resource.",
        |s| s.device_zone_closes,
    ),
    stat(
        "ziob_device_zone_finishes_total",
        Counter,
        Count,
        "Device zones finished.",
        |s| s.device_zone_finishes,
    ),
    stat(
        "ziob_device_zone_resets_total",
        Counter,
        Count,
        "Device zones reset.",
        |s| s.device_zone_resets,
    ),
    stat(
        "ziob_backpressure_waits_total",
        Counter,
        Count,
        "Times a writer waited for buffer memory.",
        |s| s.backpressure_waits,
    ),
    stat(
        "ziob_backpressure_wait_nanoseconds_total",
        Counter,
        Nanoseconds,
        "Total time writers waited for buffer memory.",
        |s| s.backpressure_wait_ns,
    ),
    stat(
        "ziob_pressure_pads_total",
        Counter,
        Count,
        "Partial blocks padded and written back because memory was short.",
        |s| s.pressure_pads,
    ),
    stat(
        "ziob_dirty_bytes",
        Gauge,
        Bytes,
        "Bytes buffered and not yet on the device.",
        |s| s.dirty_bytes,
    ),
    stat(
        "ziob_clean_bytes",
        Gauge,
        Bytes,
        "Bytes on the device and kept in memory for reads.",
        |s| s.clean_bytes,
    ),
    stat(
        "ziob_memory_used_bytes",
        Gauge,
        Bytes,
        "Buffer memory charged against the budget.",
        |s| s.memory_used_bytes,
    ),
    stat(
        "ziob_memory_peak_bytes",
        Gauge,
        Bytes,
        "Most buffer memory charged at once (sum of the cores' peaks).",
        |s| s.memory_peak_bytes,
    ),
    stat(
        "ziob_memory_budget_bytes",
        Gauge,
        Bytes,
        "Buffer memory budget (all cores).",
        |s| s.memory_budget_bytes,
    ),
    stat(
        "ziob_writeback_size_p50_bytes",
        Gauge,
        Bytes,
        "Median write-back size (largest of the cores' medians).",
        |s| s.writeback_size_p50_bytes,
    ),
    stat(
        "ziob_writeback_size_max_bytes",
        Gauge,
        Bytes,
        "Largest write-back.",
        |s| s.writeback_size_max_bytes,
    ),
    stat(
        "ziob_calls_in_flight",
        Gauge,
        Count,
        "Calls admitted on the cores and not finished (queue depth).",
        |s| s.calls_in_flight,
    ),
    stat(
        "ziob_calls_in_flight_peak",
        Gauge,
        Count,
        "Most calls in flight at once (sum of the cores' peaks).",
        |s| s.calls_in_flight_peak,
    ),
    stat(
        "ziob_device_writes_in_flight",
        Gauge,
        Count,
        "Write-back device writes in flight.",
        |s| s.device_writes_in_flight,
    ),
    stat(
        "ziob_zones_buffered",
        Gauge,
        Count,
        "Zones holding buffer memory.",
        |s| s.zones_buffered,
    ),
    stat(
        "ziob_zones_waiting_for_resource",
        Gauge,
        Count,
        "Zones whose write-back waits for a device open/active resource.",
        |s| s.zones_waiting_for_resource,
    ),
    stat(
        "ziob_cores",
        Gauge,
        Count,
        "Cores (shards) of the instance.",
        |s| s.core as u64,
    ),
];

/// The latency metric: a gauge per quantile (label `quantile`: 0.5, 0.9, 0.99, 0.999 and 1
/// for the largest) in microseconds, with `_sum` (gauge, microseconds) and `_count`
/// (counter) beside it, for every [`OpKind`] (label `op`), as a Prometheus summary.
pub const LATENCY_METRIC: &str = "ziob_op_latency_microseconds";

/// The total time of each kind's operations, in microseconds (gauge, label `op`).
pub const LATENCY_SUM_METRIC: &str = "ziob_op_latency_microseconds_sum";

/// How many operations of each kind were recorded (counter, label `op`).
pub const LATENCY_COUNT_METRIC: &str = "ziob_op_latency_microseconds_count";

/// Reads one percentile of a summary.
type Percentile = fn(&LatencySummary) -> u64;

/// The quantiles published, with their label values.
const QUANTILES: [(&str, Percentile); 5] = [
    ("0.5", |s| s.p50_ns),
    ("0.9", |s| s.p90_ns),
    ("0.99", |s| s.p99_ns),
    ("0.999", |s| s.p999_ns),
    ("1", |s| s.max_ns),
];

fn micros(ns: u64) -> f64 {
    ns as f64 / 1_000.0
}

impl MetricsSnapshot {
    /// Publishes the merged metrics to the `metrics` recorder in effect (the global one, or a
    /// local one): every counter and gauge of [`STAT_METRICS`] and, for every [`OpKind`], the
    /// latency summary [`LATENCY_METRIC`]; all labelled `instance` (a name for this ZIOB
    /// instance, e.g. the device spec or the service's name), latencies also `op`
    /// ([`OpKind::name`]). Counters are set to their absolute value (they restart at 0 when
    /// the instance is opened again, which Prometheus treats as a reset). Descriptions and
    /// units are registered too.
    ///
    /// Call it when the metrics are wanted, e.g. from the handler of a `/metrics` scrape
    /// (`ziob.metrics().await?.publish("log")` then render the exporter), or periodically.
    /// Without a recorder installed it does nothing.
    pub fn publish(&self, instance: &str) {
        describe();
        let base = vec![Label::new("instance", instance.to_owned())];
        let total = self.total();
        for m in STAT_METRICS {
            let v = (m.get)(&total.stats);
            match m.kind {
                StatKind::Counter => ::metrics::counter!(m.name, base.iter()).absolute(v),
                StatKind::Gauge => ::metrics::gauge!(m.name, base.iter()).set(v as f64),
            }
        }
        for op in OpKind::ALL {
            let s = total.latency.summary(op);
            let mut labels = base.clone();
            labels.push(Label::new("op", op.name()));
            for (q, get) in QUANTILES {
                let mut ql = labels.clone();
                ql.push(Label::new("quantile", q));
                ::metrics::gauge!(LATENCY_METRIC, ql.iter()).set(micros(get(&s)));
            }
            ::metrics::gauge!(LATENCY_SUM_METRIC, labels.iter()).set(micros(s.sum_ns));
            ::metrics::counter!(LATENCY_COUNT_METRIC, labels.iter()).absolute(s.count);
        }
    }
}

/// Registers the description and unit of every metric ZIOB publishes with the recorder in
/// effect ([`MetricsSnapshot::publish`] does it too).
pub fn describe() {
    for m in STAT_METRICS {
        match m.kind {
            StatKind::Counter => ::metrics::describe_counter!(m.name, m.unit, m.help),
            StatKind::Gauge => ::metrics::describe_gauge!(m.name, m.unit, m.help),
        }
    }
    ::metrics::describe_gauge!(
        LATENCY_METRIC,
        Unit::Microseconds,
        "Latency per operation kind (label op) at quantile (label quantile; 1 = largest)."
    );
    ::metrics::describe_gauge!(
        LATENCY_SUM_METRIC,
        Unit::Microseconds,
        "Total time of the operations of kind op."
    );
    ::metrics::describe_counter!(
        LATENCY_COUNT_METRIC,
        Unit::Count,
        "Operations of kind op recorded."
    );
}
