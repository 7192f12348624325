//! `/metrics`: the process's Prometheus recorder, and the per-request counters and latency
//! histograms every route feeds.

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Latency buckets in seconds (50 µs .. 10 s).
const LATENCY_BUCKETS_SECONDS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 10.0,
];

/// The process's Prometheus handle. The first call installs the recorder as the `metrics`
/// facade's global one; when another recorder is installed already, the handle renders only
/// what this recorder sees (nothing of the facade) and a warning says so.
pub fn prometheus() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS_SECONDS)
                .expect("non-empty buckets")
                .build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder is installed already: /metrics stays empty");
            }
            handle
        })
        .clone()
}

/// Counts each request by method, route and status, and records its latency (to the
/// response's head: an SSE tail counts until its stream starts).
pub async fn track(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let response = next.run(req).await;
    let status = response.status().as_u16().to_string();
    metrics::histogram!(
        "log_server_http_request_duration_seconds",
        "method" => method.clone(),
        "route" => route.clone(),
    )
    .record(started.elapsed().as_secs_f64());
    metrics::counter!(
        "log_server_http_requests_total",
        "method" => method,
        "route" => route,
        "status" => status,
    )
    .increment(1);
    response
}
