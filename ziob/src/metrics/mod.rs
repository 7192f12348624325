//! Metrics of a ZIOB instance: what each core's shard counts and times, merged on demand,
//! and published through the [`metrics` crate](https://docs.rs/metrics) facade.
//!
//! Every core records into its own shard's cells (plain counters and [`hdrhistogram`]
//! histograms, no atomics or locks): the latency of every call per [`OpKind`] on the core
//! owning the zone (from its admission there until it completes or is dropped, so the hop
//! from another core is not included) and of the device I/O the buffer issues itself
//! (write-back writes, device reads of misses, cache flushes), plus the counters and gauges
//! of [`ShardStats`]. [`Ziob::metrics`](crate::Ziob::metrics) collects
//! every core's into a [`MetricsSnapshot`] (per core and merged); nothing is merged or
//! exported until then.
//!
//! A service exposes them by installing a `metrics` recorder (e.g. the Prometheus exporter
//! of `metrics-exporter-prometheus`) and calling [`MetricsSnapshot::publish`] when it is
//! scraped or periodically. The names are in docs/METRICS.md.
//!
//! ```
//! use ziob::{DmaBuf, Runtime, Ziob, ZiobConfig};
//! use ziob::metrics::OpKind;
//! let rt = Runtime::builder().cores(2).build().unwrap();
//! rt.block_on(|| async {
//!     let z = Ziob::open("mem:zones=4,zone_size=1M", ZiobConfig::default()).await.unwrap();
//!     z.append(1, DmaBuf::from_slice(b"record")).await.unwrap();
//!     let m = z.metrics().await.unwrap();
//!     assert_eq!(m.total().latency.count(OpKind::Append), 1);
//!     assert_eq!(m.cores()[1].stats.append_bytes, 6); // zone 1 lives on core 1
//!     m.publish("example"); // to the installed `metrics` recorder, if any
//!     z.close().await.unwrap();
//! })
//! .unwrap();
//! ```

pub(crate) mod clock;
mod latency;
mod op;
mod publish;
mod shard_stats;
mod snapshot;

pub use hdrhistogram;
pub use latency::{LatencySummary, OpLatencies};
pub use op::OpKind;
pub use publish::{
    describe, StatKind, StatMetric, LATENCY_COUNT_METRIC, LATENCY_METRIC, LATENCY_SUM_METRIC,
    STAT_METRICS,
};
pub use shard_stats::ShardStats;
pub(crate) use shard_stats::{OpTimer, StatsCell};
pub use snapshot::{CoreMetrics, MetricsSnapshot};
