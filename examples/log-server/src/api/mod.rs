//! The HTTP routes over a [`LogStore`] (formats and status codes: `docs/LOG-SERVER.md`).

pub mod error;
pub mod handlers;
pub mod metrics;
pub mod params;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::watch;

use crate::store::LogStore;

/// Limits and timings of the routes.
#[derive(Clone, Debug)]
pub struct ApiOptions {
    /// Largest request body (one record) in bytes; larger ones get 413. The store's own limit
    /// applies too.
    pub record_bytes_max: usize,
    /// Records one `GET /logs/{name}` returns when `max` is not given.
    pub read_records_default: usize,
    /// Largest `max` of `GET /logs/{name}`.
    pub read_records_max: usize,
    /// How often an idle SSE tail sends a keep-alive comment.
    pub sse_keep_alive: Duration,
}

impl Default for ApiOptions {
    fn default() -> Self {
        ApiOptions {
            record_bytes_max: 1 << 20,
            read_records_default: 100,
            read_records_max: 1000,
            sse_keep_alive: Duration::from_secs(15),
        }
    }
}

/// What every handler shares.
pub struct App<S> {
    /// The storage.
    pub store: Arc<S>,
    /// Limits and timings.
    pub options: ApiOptions,
    /// The effective record limit (the smaller of the option and the store's).
    pub record_bytes_max: usize,
    /// Becomes `true` when the server starts shutting down (tails end then).
    pub shutdown: watch::Receiver<bool>,
    /// Renders `/metrics`.
    pub prometheus: PrometheusHandle,
}

/// The service's routes over `store`. `shutdown` turning `true` ends the open tails.
pub fn router<S: LogStore>(
    store: Arc<S>,
    options: ApiOptions,
    shutdown: watch::Receiver<bool>,
) -> Router {
    let record_bytes_max = options.record_bytes_max.min(store.record_bytes_max());
    let app = Arc::new(App {
        store,
        options,
        record_bytes_max,
        shutdown,
        prometheus: metrics::prometheus(),
    });
    Router::new()
        .route("/logs", get(handlers::list::<S>))
        .route(
            "/logs/{name}",
            get(handlers::read::<S>)
                .post(handlers::append::<S>)
                .delete(handlers::truncate::<S>),
        )
        .route("/logs/{name}/tail", get(handlers::tail::<S>))
        .route("/metrics", get(handlers::metrics::<S>))
        .fallback(handlers::no_route)
        // One byte over the limit is enough to tell "too large" (the handler answers 413).
        .layer(DefaultBodyLimit::max(record_bytes_max.saturating_add(1)))
        .layer(axum::middleware::from_fn(metrics::track))
        .with_state(app)
}
