//! The route handlers.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use futures::StreamExt;
use serde::Serialize;

use super::error::ApiError;
use super::params::{Params, RawParams};
use super::App;
use crate::name::LogName;
use crate::position::Position;
use crate::store::{Durability, LogInfo, LogStore, StoreError};

/// `POST /logs/{name}`'s answer.
#[derive(Serialize)]
pub struct Appended {
    /// The log.
    pub log: String,
    /// The record's position.
    pub position: u64,
    /// Whether the record was durable when this answer was sent (`sync=true`).
    pub durable: bool,
}

/// One record of `GET /logs/{name}`.
#[derive(Serialize)]
pub struct RecordJson {
    /// The record's position.
    pub position: u64,
    /// The record's bytes, base64 (standard alphabet, padded).
    pub data: String,
}

/// `GET /logs/{name}`'s answer.
#[derive(Serialize)]
pub struct Records {
    /// The log.
    pub log: String,
    /// The records, in order.
    pub records: Vec<RecordJson>,
    /// Where to read on.
    pub next: u64,
    /// The log's start when the read began.
    pub start: u64,
    /// The log's end when the read began.
    pub end: u64,
}

/// `GET /logs`'s answer.
#[derive(Serialize)]
pub struct Logs {
    /// Every log, by name.
    pub logs: Vec<LogInfo>,
}

fn log_name(raw: &str) -> Result<LogName, ApiError> {
    Ok(LogName::new(raw)?)
}

/// `GET /logs`.
pub async fn list<S: LogStore>(
    State(app): State<Arc<App<S>>>,
    raw: RawParams,
) -> Result<Json<Logs>, ApiError> {
    Params::parse(raw, &[])?;
    Ok(Json(Logs {
        logs: app.store.list().await?,
    }))
}

/// `POST /logs/{name}[?sync=true]`: appends the body as one record.
pub async fn append<S: LogStore>(
    State(app): State<Arc<App<S>>>,
    Path(name): Path<String>,
    raw: RawParams,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Appended>, ApiError> {
    let log = log_name(&name)?;
    let params = Params::parse(raw, &["sync"])?;
    let sync = params.flag("sync")?.unwrap_or(false);
    let body = body.map_err(|e| match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            code: "record_too_large",
            message: format!("a record has at most {} bytes", app.record_bytes_max),
        },
        status => ApiError {
            status,
            code: "bad_body",
            message: e.body_text(),
        },
    })?;
    if body.len() > app.record_bytes_max {
        return Err(StoreError::RecordTooLarge {
            len: body.len(),
            max_bytes: app.record_bytes_max,
        }
        .into());
    }
    let durability = if sync {
        Durability::Durable
    } else {
        Durability::Buffered
    };
    let len = body.len();
    let position = app.store.append(&log, body, durability).await?;
    let labels = [
        ("store", app.store.kind()),
        ("sync", if sync { "true" } else { "false" }),
    ];
    metrics::counter!("log_server_appended_records_total", &labels).increment(1);
    metrics::counter!("log_server_appended_bytes_total", &labels).increment(len as u64);
    Ok(Json(Appended {
        log: name,
        position: position.0,
        durable: sync,
    }))
}

/// `GET /logs/{name}[?from=POS][&max=N]`: reads records (from the start by default).
pub async fn read<S: LogStore>(
    State(app): State<Arc<App<S>>>,
    Path(name): Path<String>,
    raw: RawParams,
) -> Result<Json<Records>, ApiError> {
    let log = log_name(&name)?;
    let params = Params::parse(raw, &["from", "max"])?;
    let max = params
        .count("max", app.options.read_records_max)?
        .unwrap_or(app.options.read_records_default);
    let info = app.store.info(&log).await?;
    let from = params.position("from")?.unwrap_or(Position(info.start));
    let batch = app.store.read(&log, from, max).await?;
    Ok(Json(Records {
        log: name,
        records: batch
            .records
            .iter()
            .map(|(pos, data)| RecordJson {
                position: pos.0,
                data: BASE64.encode(data),
            })
            .collect(),
        next: batch.next.0,
        start: info.start,
        end: info.end,
    }))
}

/// `GET /logs/{name}/tail[?from=POS]`: Server-Sent Events, one `record` event per record
/// (`id` = position, `data` = base64), from `from` (default: the end, i.e. new records only;
/// with a `Last-Event-ID` header and no `from`: after that position). An `error` event ends
/// the stream; so does the server's shutdown.
pub async fn tail<S: LogStore>(
    State(app): State<Arc<App<S>>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    raw: RawParams,
) -> Result<Response, ApiError> {
    let log = log_name(&name)?;
    let params = Params::parse(raw, &["from"])?;
    let last_seen = match (params.position("from")?, headers.get("last-event-id")) {
        (Some(_), _) | (None, None) => None,
        (None, Some(v)) => Some(
            v.to_str()
                .ok()
                .and_then(|s| s.parse::<Position>().ok())
                .ok_or_else(|| {
                    ApiError::bad_request("bad_position", "Last-Event-ID: not a position")
                })?,
        ),
    };
    let from = match (params.position("from")?, last_seen) {
        (Some(from), _) => from,
        (None, Some(seen)) => seen,
        (None, None) => Position(app.store.info(&log).await?.end),
    };
    let records = app.store.tail(&log, from).await?;
    let mut shutdown = app.shutdown.clone();
    let events = records
        .filter(move |r| {
            let keep = !matches!((r, last_seen), (Ok((pos, _)), Some(seen)) if *pos <= seen);
            std::future::ready(keep)
        })
        .map(|r| {
            Ok::<_, Infallible>(match r {
                Ok((pos, data)) => Event::default()
                    .event("record")
                    .id(pos.to_string())
                    .data(BASE64.encode(&data)),
                Err(e) => {
                    let e = ApiError::from(e);
                    Event::default().event("error").data(
                        serde_json::json!({ "error": e.code, "message": e.message }).to_string(),
                    )
                }
            })
        })
        .take_until(async move {
            let _ = shutdown.wait_for(|stopping| *stopping).await;
        });
    let sse = Sse::new(events).keep_alive(KeepAlive::new().interval(app.options.sse_keep_alive));
    Ok(([(header::CACHE_CONTROL, "no-store")], sse).into_response())
}

/// `DELETE /logs/{name}?before=POS`: drops the records before `POS`.
pub async fn truncate<S: LogStore>(
    State(app): State<Arc<App<S>>>,
    Path(name): Path<String>,
    raw: RawParams,
) -> Result<Json<LogInfo>, ApiError> {
    let log = log_name(&name)?;
    let params = Params::parse(raw, &["before"])?;
    let before = params.position("before")?.ok_or_else(|| {
        ApiError::bad_request("bad_query", "before: required (DELETE truncates the log)")
    })?;
    app.store.truncate_before(&log, before).await?;
    Ok(Json(app.store.info(&log).await?))
}

/// `GET /metrics`: Prometheus text format.
pub async fn metrics<S: LogStore>(State(app): State<Arc<App<S>>>) -> impl IntoResponse {
    app.store.publish_metrics().await;
    app.prometheus.run_upkeep();
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        app.prometheus.render(),
    )
}

/// Any other path.
pub async fn no_route() -> ApiError {
    ApiError {
        status: StatusCode::NOT_FOUND,
        code: "no_route",
        message: "no such route (see docs/LOG-SERVER.md)".into(),
    }
}
