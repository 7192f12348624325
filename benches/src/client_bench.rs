//! The `client` benchmark (issue #13): what the cross-thread [`ziob::Client`] costs against
//! the same call made on the owning ZIOB core. Pieces shared by [`crate::client_round_trip`]
//! and [`crate::client_throughput`]: the instance, the zone-cycling append, latency
//! summaries. Run by the `client-bench` binary.
//!
//! Every append is `RECORD_BYTES` (4 KiB). A zone that fills is reset by whoever meets
//! the Zone Full (its later appends start over at offset 0), so runs of any length fit a small
//! device; resets are counted, not timed separately.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;
use ziob::{Client, ErrorKind, Runtime, Ziob, ZiobConfig, ZiobError};

/// Bytes per append.
pub const RECORD_BYTES: usize = 4096;

/// Latency percentiles in nanoseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Percentiles {
    /// Samples.
    pub count: u64,
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
}

impl Percentiles {
    /// Summarises `h`.
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        Percentiles {
            count: h.len(),
            p50_ns: h.value_at_quantile(0.5),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
        }
    }
}

/// A latency histogram from 10 ns to 10 s, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(10, 10_000_000_000, 3).expect("valid histogram bounds")
}

/// Records `d` in `h`, clamped to its range.
pub fn record(h: &mut Histogram<u64>, d: Duration) {
    h.saturating_record((d.as_nanos() as u64).max(10));
}

/// Whether `e` means the zone is full (then the caller resets it and goes on).
pub fn zone_full(e: &ZiobError) -> bool {
    matches!(
        e.kind(),
        Some(ErrorKind::ZoneFull | ErrorKind::BoundaryError)
    )
}

/// Opens `spec` on `rt` with the buffer on (defaults), resets every zone, and returns a
/// client of it.
pub fn open(rt: &Runtime, spec: &str) -> Result<Client, String> {
    let spec = spec.to_string();
    let z = rt
        .block_on(move || async move {
            let z = Ziob::open(&spec, ZiobConfig::default()).await?;
            z.zone_action(ziob::ZoneAction::Reset, ziob::ZoneTarget::All)
                .await?;
            Ok::<_, ZiobError>(z.client())
        })
        .map_err(|e| e.to_string())?;
    z.map_err(|e| e.to_string())
}

/// Syncs and closes the instance.
pub fn close(client: Client) -> Result<(), String> {
    futures::executor::block_on(async {
        client.sync().await?;
        client.close().await
    })
    .map_err(|e| e.to_string())
}

/// Median of `xs` (`0.0` when empty).
pub fn median(xs: &[f64]) -> f64 {
    crate::report::median(xs).unwrap_or(0.0)
}
