//! Query parameters: only the documented keys, each at most once, with typed values.

use axum::extract::rejection::QueryRejection;
use axum::extract::Query;

use super::error::ApiError;
use crate::position::Position;

/// A request's query parameters, checked against the keys its route takes.
pub struct Params(Vec<(String, String)>);

/// What axum's `Query` extractor gives for a list of pairs.
pub type RawParams = Result<Query<Vec<(String, String)>>, QueryRejection>;

impl Params {
    /// Checks the query: well-formed, only `allowed` keys, none twice. An unknown key is an
    /// error, not ignored (`?synk=true` must not silently append without sync).
    pub fn parse(raw: RawParams, allowed: &[&str]) -> Result<Self, ApiError> {
        let Query(pairs) = raw.map_err(|e| ApiError::bad_request("bad_query", e.body_text()))?;
        for (i, (key, _)) in pairs.iter().enumerate() {
            if !allowed.contains(&key.as_str()) {
                return Err(ApiError::bad_request(
                    "bad_query",
                    format!("unknown parameter {key:?} (this route takes: {allowed:?})"),
                ));
            }
            if pairs[..i].iter().any(|(k, _)| k == key) {
                return Err(ApiError::bad_request(
                    "bad_query",
                    format!("parameter {key:?} given twice"),
                ));
            }
        }
        Ok(Params(pairs))
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A position parameter.
    pub fn position(&self, key: &str) -> Result<Option<Position>, ApiError> {
        self.get(key)
            .map(|v| {
                v.parse()
                    .map_err(|e| ApiError::bad_request("bad_position", format!("{key}: {e}")))
            })
            .transpose()
    }

    /// A boolean parameter: `true`/`false`/`1`/`0` (a bare `?key` is `true`).
    pub fn flag(&self, key: &str) -> Result<Option<bool>, ApiError> {
        self.get(key)
            .map(|v| match v {
                "true" | "1" | "" => Ok(true),
                "false" | "0" => Ok(false),
                other => Err(ApiError::bad_request(
                    "bad_query",
                    format!("{key}: expected true or false, got {other:?}"),
                )),
            })
            .transpose()
    }

    /// A count in `1..=max`.
    pub fn count(&self, key: &str, max: usize) -> Result<Option<usize>, ApiError> {
        self.get(key)
            .map(|v| match v.parse::<usize>() {
                Ok(n) if (1..=max).contains(&n) && v.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
                _ => Err(ApiError::bad_request(
                    "bad_query",
                    format!("{key}: expected a number from 1 to {max}, got {v:?}"),
                )),
            })
            .transpose()
    }
}
