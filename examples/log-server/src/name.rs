//! Log names: what a URL may name.

use std::fmt;
use std::str::FromStr;

/// Longest log name, in bytes (the same rule as `ziob::ZoneLog`).
pub const NAME_BYTES_MAX: usize = 64;

/// A validated log name: 1..=64 bytes of `[A-Za-z0-9._-]`. It is also a safe file name
/// (no `/`, never empty), which the file store relies on.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LogName(String);

/// Why a string is not a log name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The name is empty.
    #[error("a log name must not be empty")]
    Empty,
    /// The name is longer than [`NAME_BYTES_MAX`].
    #[error("a log name has at most {NAME_BYTES_MAX} bytes, this one has {0}")]
    TooLong(usize),
    /// The name holds a character outside `[A-Za-z0-9._-]`.
    #[error("a log name may only hold A-Z, a-z, 0-9, '.', '_' and '-' (found {0:?})")]
    BadChar(char),
}

impl LogName {
    /// Validates `name`.
    pub fn new(name: &str) -> Result<Self, NameError> {
        if name.is_empty() {
            return Err(NameError::Empty);
        }
        if let Some(c) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(NameError::BadChar(c));
        }
        if name.len() > NAME_BYTES_MAX {
            return Err(NameError::TooLong(name.len()));
        }
        Ok(Self(name.to_string()))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for LogName {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl fmt::Display for LogName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_alphabet() {
        for ok in ["a", "A-z_0.9", "..", &"x".repeat(NAME_BYTES_MAX)] {
            assert_eq!(LogName::new(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn refuses_everything_else() {
        assert_eq!(LogName::new(""), Err(NameError::Empty));
        assert_eq!(
            LogName::new(&"x".repeat(NAME_BYTES_MAX + 1)),
            Err(NameError::TooLong(NAME_BYTES_MAX + 1))
        );
        assert_eq!(LogName::new("a/b"), Err(NameError::BadChar('/')));
        assert_eq!(LogName::new("é"), Err(NameError::BadChar('é')));
        assert_eq!(LogName::new("a b"), Err(NameError::BadChar(' ')));
        assert_eq!(
            NameError::TooLong(65).to_string(),
            "a log name has at most 64 bytes, this one has 65"
        );
    }
}
