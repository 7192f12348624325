//! Record positions as the HTTP API shows them.

use std::fmt;
use std::str::FromStr;

/// Where a record is in its log: an opaque, increasing `u64` (decimal in URLs and JSON).
/// Each store decides what it means (the file store: the byte offset of the record's frame;
/// the zone store: `ziob::Position`). Only positions the server handed out, and the `next` /
/// `end` positions it reports, are meaningful.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position(pub u64);

/// A string that is not a position.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("expected a position (a decimal number below 2^64), got {0:?}")]
pub struct PositionError(pub String);

impl FromStr for Position {
    type Err = PositionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // `u64::from_str` also takes a leading '+'; positions are plain digits only.
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(PositionError(s.to_string()));
        }
        s.parse()
            .map(Position)
            .map_err(|_| PositionError(s.to_string()))
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_decimal_only() {
        assert_eq!("0".parse::<Position>(), Ok(Position(0)));
        assert_eq!(
            "18446744073709551615".parse::<Position>(),
            Ok(Position(u64::MAX))
        );
        for bad in ["", "+1", "-1", "1.0", "0x10", "18446744073709551616", " 1"] {
            assert!(bad.parse::<Position>().is_err(), "{bad:?}");
        }
    }
}
