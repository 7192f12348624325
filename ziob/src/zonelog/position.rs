//! [`Position`]: where a record of a [`ZoneLog`](super::ZoneLog) starts.

use std::fmt;
use std::str::FromStr;

/// Where a record of a log starts: the sequence number of the log's zone that holds it
/// (upper 32 bits) and the record's offset in bytes from that zone's start (lower 32 bits).
///
/// Positions only grow along a log: a record appended after another has a larger position,
/// so `Ord` is log order. Zone sequence numbers grow by at least one per zone the log moves
/// to, so they never repeat within a log, even after [`ZoneLog::truncate_before`](super::ZoneLog::truncate_before).
///
/// Besides record starts, the position just past a record ([`Position::after`]) is a valid
/// place to read from: reading there yields the next record, wherever it is.
///
/// Shown and parsed as `SEQ-OFFSET` in decimal (e.g. `3-4096`), so it fits a URL.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Position(u64);

impl Position {
    /// The smallest position (before every record of every log).
    pub const ZERO: Position = Position(0);

    /// The position at byte `offset_bytes` of the log's zone with sequence number `seq`.
    pub const fn new(seq: u32, offset_bytes: u32) -> Position {
        Position(((seq as u64) << 32) | offset_bytes as u64)
    }

    /// The position from its `u64` form ([`Position::into_raw`]).
    pub const fn from_raw(raw: u64) -> Position {
        Position(raw)
    }

    /// The `u64` form: `seq << 32 | offset_bytes`.
    pub const fn into_raw(self) -> u64 {
        self.0
    }

    /// The sequence number of the log zone.
    pub const fn seq(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The offset in bytes from the zone start.
    pub const fn offset_bytes(self) -> u32 {
        self.0 as u32
    }

    /// The position just past the record of `record_len` bytes that starts here (its frame
    /// included): where reading goes on after it.
    pub fn after(self, record_len: usize) -> Position {
        let end = self.offset_bytes() as u64 + super::record::frame_len(record_len) as u64;
        Position::new(self.seq(), u32::try_from(end).unwrap_or(u32::MAX))
    }
}

impl fmt::Debug for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Position({self})")
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.seq(), self.offset_bytes())
    }
}

/// A string that is not a [`Position`] (`SEQ-OFFSET`, both decimal `u32`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid log position {input:?}: expected SEQ-OFFSET, two decimal numbers below 2^32 (e.g. 3-4096)")]
pub struct ParsePositionError {
    /// The refused input (at most 80 characters of it).
    pub input: String,
}

impl FromStr for Position {
    type Err = ParsePositionError;

    fn from_str(s: &str) -> Result<Position, ParsePositionError> {
        let err = || ParsePositionError {
            input: s.chars().take(80).collect(),
        };
        let (seq, off) = s.split_once('-').ok_or_else(err)?;
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        if !digits(seq) || !digits(off) {
            return Err(err());
        }
        let seq: u32 = seq.parse().map_err(|_| err())?;
        let off: u32 = off.parse().map_err(|_| err())?;
        Ok(Position::new(seq, off))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_parse_round_trip_and_order() {
        let cases = [
            Position::new(0, 0),
            Position::new(3, 4096),
            Position::new(u32::MAX, u32::MAX),
        ];
        for p in cases {
            assert_eq!(p.to_string().parse::<Position>().unwrap(), p);
            assert_eq!(Position::from_raw(p.into_raw()), p);
        }
        assert_eq!(Position::new(3, 4096).to_string(), "3-4096");
        assert!(Position::new(1, 9999) < Position::new(2, 0));
        assert!(Position::new(2, 5) < Position::new(2, 6));
    }

    #[test]
    fn refuses_malformed() {
        for bad in [
            "",
            "-",
            "1-",
            "-1",
            "1",
            "a-1",
            "1-b",
            "+1-2",
            "1-+2",
            "1--2",
            "4294967296-0",
            "0-4294967296",
            " 1-2",
            "1-2 ",
        ] {
            assert!(bad.parse::<Position>().is_err(), "{bad:?} was accepted");
        }
    }
}
