//! Errors of decoding kv-demo's on-zone formats.

/// A decoder found bytes that are not a valid encoding: `what` names the structure and the
/// field, so the message says where the damage is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("corrupt {what}")]
pub struct CorruptionError {
    /// What was being decoded and what was wrong with it.
    pub what: String,
}

impl CorruptionError {
    /// A corruption of `what`.
    pub fn new(what: impl Into<String>) -> CorruptionError {
        CorruptionError { what: what.into() }
    }
}

/// The result of a decoder.
pub type Result<T> = std::result::Result<T, CorruptionError>;
