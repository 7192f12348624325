//! The zone header record every zone of a log starts with (see docs/format.md, "Zone log"):
//!
//! ```text
//! 0   8  magic      "ZIOBLOG\0"
//! 8   2  version    1
//! 10  1  name_len   1..=64
//! 11  1  reserved   0
//! 12  8  seq        the zone's sequence number within the log
//! 20  4  prev_seq   sequence number of the log's zone before this one
//! 24  4  prev_end   where that zone's records end (byte offset); 0 = no such zone
//! 28  n  name       the log name
//! 28+n 4 crc32c     of bytes 0..28+n
//! ```
//!
//! `prev_*` make a zone's end durable once the log has moved past it: recovery reads a
//! finished zone only up to there (a zone cut by recovery holds garbage after its end).

use super::name::{validate_log_name, LOG_NAME_BYTES_MAX};

/// Magic bytes of a zone header.
pub const ZONE_HEADER_MAGIC: [u8; 8] = *b"ZIOBLOG\0";
/// The zone header format version.
pub const ZONE_HEADER_VERSION: u16 = 1;
/// Bytes of a zone header before the name.
const FIXED_BYTES: usize = 28;
/// The largest zone header: what recovery reads from a zone's start.
pub const ZONE_HEADER_BYTES_MAX: usize = FIXED_BYTES + LOG_NAME_BYTES_MAX + 4;

/// A decoded zone header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneHeader {
    /// The log's name.
    pub name: String,
    /// The zone's sequence number within the log.
    pub seq: u32,
    /// The log's zone before this one: its sequence number and where its records end.
    pub prev: Option<(u32, u32)>,
}

/// Bytes of the header of a log named `name` (where its records start).
pub fn zone_header_len(name: &str) -> u64 {
    (FIXED_BYTES + name.len() + 4) as u64
}

/// Encodes the header of zone `seq` of log `name` (a valid name); `prev`: the log's zone
/// before it (sequence number, end of its records: above 0).
pub fn encode_zone_header(name: &str, seq: u32, prev: Option<(u32, u32)>) -> Vec<u8> {
    assert!(validate_log_name(name).is_ok(), "invalid log name {name:?}");
    let mut out = Vec::with_capacity(zone_header_len(name) as usize);
    out.extend_from_slice(&ZONE_HEADER_MAGIC);
    out.extend_from_slice(&ZONE_HEADER_VERSION.to_le_bytes());
    out.push(name.len() as u8);
    out.push(0);
    out.extend_from_slice(&(seq as u64).to_le_bytes());
    let (prev_seq, prev_end) = prev.unwrap_or((0, 0));
    assert!(
        prev.is_none() || prev_end > 0,
        "a zone's records end past its header"
    );
    out.extend_from_slice(&prev_seq.to_le_bytes());
    out.extend_from_slice(&prev_end.to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    debug_assert_eq!(out.len() as u64, zone_header_len(name));
    out
}

/// Decodes the header at the start of `bytes` (a zone's first bytes); `Err` says why they
/// are not one.
pub fn decode_zone_header(bytes: &[u8]) -> Result<ZoneHeader, String> {
    if bytes.len() < FIXED_BYTES {
        return Err(format!("only {} bytes", bytes.len()));
    }
    if bytes[0..8] != ZONE_HEADER_MAGIC {
        return Err("no zone log magic".into());
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if version != ZONE_HEADER_VERSION {
        return Err(format!("unknown zone log version {version}"));
    }
    let n = bytes[10] as usize;
    if n == 0 || n > LOG_NAME_BYTES_MAX || bytes[11] != 0 {
        return Err(format!(
            "bad name length {n} or reserved byte {}",
            bytes[11]
        ));
    }
    let crc_at = FIXED_BYTES + n;
    if bytes.len() < crc_at + 4 {
        return Err(format!("only {} bytes", bytes.len()));
    }
    let crc = u32::from_le_bytes(bytes[crc_at..crc_at + 4].try_into().unwrap());
    if crc32c::crc32c(&bytes[..crc_at]) != crc {
        return Err("zone header checksum mismatch".into());
    }
    let seq = u64::from_le_bytes(bytes[12..20].try_into().unwrap());
    let seq = u32::try_from(seq).map_err(|_| format!("sequence number {seq} too large"))?;
    let name = std::str::from_utf8(&bytes[FIXED_BYTES..crc_at])
        .map_err(|_| "log name is not UTF-8".to_string())?;
    validate_log_name(name).map_err(|e| e.to_string())?;
    let prev_seq = u32::from_le_bytes(bytes[20..24].try_into().unwrap());
    let prev_end = u32::from_le_bytes(bytes[24..28].try_into().unwrap());
    Ok(ZoneHeader {
        name: name.to_string(),
        seq,
        prev: (prev_end > 0).then_some((prev_seq, prev_end)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_as_documented() {
        let h = encode_zone_header("wal", 7, Some((5, 0x1234)));
        let mut want = b"ZIOBLOG\0".to_vec();
        want.extend_from_slice(&[1, 0, 3, 0]);
        want.extend_from_slice(&[7, 0, 0, 0, 0, 0, 0, 0]);
        want.extend_from_slice(&[5, 0, 0, 0, 0x34, 0x12, 0, 0]);
        want.extend_from_slice(b"wal");
        let crc = crc32c::crc32c(&want);
        want.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(h, want);
        assert_eq!(zone_header_len("wal"), 35);
        let mut padded = h.clone();
        padded.resize(4096, 0);
        assert_eq!(
            decode_zone_header(&padded).unwrap(),
            ZoneHeader {
                name: "wal".into(),
                seq: 7,
                prev: Some((5, 0x1234)),
            }
        );
        let first = decode_zone_header(&encode_zone_header("wal", 0, None)).unwrap();
        assert_eq!(first.prev, None);
    }

    #[test]
    fn refuses_every_single_byte_flip_and_short_input() {
        let h = encode_zone_header("a.b-c_d", 123456, Some((123455, 99)));
        for i in 0..h.len() {
            for bit in 0..8 {
                let mut b = h.clone();
                b[i] ^= 1 << bit;
                assert!(decode_zone_header(&b).is_err(), "flip byte {i} bit {bit}");
            }
        }
        for n in 0..h.len() {
            assert!(decode_zone_header(&h[..n]).is_err());
        }
        assert!(decode_zone_header(&[0u8; 4096]).is_err());
    }
}
