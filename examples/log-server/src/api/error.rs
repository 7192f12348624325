//! The errors the routes answer: a status and a JSON body `{"error": CODE, "message": TEXT}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::name::NameError;
use crate::store::StoreError;

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable machine-readable code (`bad_name`, `log_not_found`, ...).
    pub code: &'static str,
    /// What went wrong, for people.
    pub message: String,
}

impl ApiError {
    /// A 400 Bad Request with `code`.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            code,
            message: message.into(),
        }
    }
}

impl From<NameError> for ApiError {
    fn from(e: NameError) -> Self {
        ApiError::bad_request("bad_name", e.to_string())
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let (status, code) = match &e {
            StoreError::NotFound(_) => (StatusCode::NOT_FOUND, "log_not_found"),
            StoreError::Truncated { .. } => (StatusCode::GONE, "truncated"),
            StoreError::PastEnd { .. } => (StatusCode::RANGE_NOT_SATISFIABLE, "past_end"),
            StoreError::NotARecord { .. } => (StatusCode::BAD_REQUEST, "not_a_record"),
            StoreError::RecordTooLarge { .. } => {
                (StatusCode::PAYLOAD_TOO_LARGE, "record_too_large")
            }
            StoreError::NoSpace(_) => (StatusCode::INSUFFICIENT_STORAGE, "no_space"),
            StoreError::Closed => (StatusCode::SERVICE_UNAVAILABLE, "shutting_down"),
            StoreError::Storage(_) => (StatusCode::INTERNAL_SERVER_ERROR, "storage_error"),
        };
        if status.is_server_error() {
            tracing::error!(error = %e, "request failed");
        }
        ApiError {
            status,
            code,
            message: e.to_string(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.code, "message": self.message });
        (self.status, Json(body)).into_response()
    }
}
