//! Log names: 1..=64 bytes of `[A-Za-z0-9._-]`.

use crate::error::{Result, ZiobError};

/// The longest log name in bytes.
pub const LOG_NAME_BYTES_MAX: usize = 64;

/// `Ok` if `name` is a valid log name, else [`ZiobError::InvalidLogName`] saying why.
pub fn validate_log_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        "it is empty".to_string()
    } else if name.len() > LOG_NAME_BYTES_MAX {
        format!(
            "it is {} bytes long, the limit is {LOG_NAME_BYTES_MAX}",
            name.len()
        )
    } else if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        format!("it contains {c:?}; only A-Z, a-z, 0-9, '.', '_' and '-' are allowed")
    } else {
        return Ok(());
    };
    Err(ZiobError::InvalidLogName {
        name: name.chars().take(80).collect(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_and_refuses() {
        for ok in ["a", "wal", "raft-7.log_A", &"x".repeat(64)] {
            validate_log_name(ok).unwrap();
        }
        for bad in ["", &"x".repeat(65), "a b", "a/b", "é", "a\0", "log:1"] {
            let e = validate_log_name(bad).unwrap_err();
            assert!(matches!(e, ZiobError::InvalidLogName { .. }), "{bad:?}");
        }
    }
}
