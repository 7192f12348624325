//! Log names: what a URL may name.

use std::fmt;
use std::str::FromStr;

/// Longest log name, in bytes: the zone log's rule, which the name check below applies.
pub const NAME_BYTES_MAX: usize = ziob::zonelog::LOG_NAME_BYTES_MAX;

/// A validated log name: 1..=64 bytes of `[A-Za-z0-9._-]`, exactly what
/// [`ziob::zonelog::validate_log_name`] accepts. It is also a safe file name (no `/`, never
/// empty), which the file store relies on.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LogName(String);

/// Why a string is not a log name (the zone log's reason).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad log name: {reason}")]
pub struct NameError {
    /// Why, e.g. "it contains '/'; only A-Z, a-z, 0-9, '.', '_' and '-' are allowed".
    pub reason: String,
}

impl LogName {
    /// Validates `name` with the zone log's rule.
    pub fn new(name: &str) -> Result<Self, NameError> {
        match ziob::zonelog::validate_log_name(name) {
            Ok(()) => Ok(Self(name.to_string())),
            Err(ziob::ZiobError::InvalidLogName { reason, .. }) => Err(NameError { reason }),
            Err(other) => Err(NameError {
                reason: other.to_string(),
            }),
        }
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
        let reason = |name: &str| LogName::new(name).unwrap_err().reason;
        assert!(reason("").contains("empty"));
        assert!(reason(&"x".repeat(NAME_BYTES_MAX + 1)).contains("65 bytes long"));
        for bad in ["a/b", "é", "a b"] {
            assert!(reason(bad).contains("only A-Z"), "{bad:?}: {}", reason(bad));
        }
        assert_eq!(
            LogName::new("a/b").unwrap_err().to_string(),
            "bad log name: it contains '/'; only A-Z, a-z, 0-9, '.', '_' and '-' are allowed"
        );
    }
}
