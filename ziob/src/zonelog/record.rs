//! The record frame (see docs/format.md, "Zone log"):
//!
//! ```text
//! 0   1  tag       0x5A ('Z')
//! 1   3  reserved  0
//! 4   4  len       payload length in bytes, u32 LE
//! 8   4  crc       CRC-32C of bytes 0..8 followed by the payload, u32 LE
//! 12  len payload
//! ```
//!
//! A record never starts with a zero byte, so a zero byte where a record could start is
//! padding (a flush filled the rest of a block with zeros: the data goes on at the next block
//! boundary) or, at a block boundary, the end of the zone's data.

use std::ops::Range;

/// Bytes of a record's frame before its payload.
pub const RECORD_HEADER_BYTES: usize = 12;
/// The first byte of every record.
pub const RECORD_TAG: u8 = 0x5A;

/// Bytes a record of `payload_len` bytes takes in a zone.
pub const fn frame_len(payload_len: usize) -> usize {
    RECORD_HEADER_BYTES + payload_len
}

/// The first 8 bytes of the frame of a payload of `len` bytes.
fn head(len: u32) -> [u8; 8] {
    let mut h = [0u8; 8];
    h[0] = RECORD_TAG;
    h[4..8].copy_from_slice(&len.to_le_bytes());
    h
}

/// The checksum of a record: CRC-32C over the frame's first 8 bytes, then the payload.
pub fn record_crc(payload: &[u8]) -> u32 {
    let h = head(payload.len() as u32);
    crc32c::crc32c_append(crc32c::crc32c(&h), payload)
}

/// Appends the frame of `payload` to `out`. The payload must be below 4 GiB (callers check
/// the zone capacity, which is smaller).
pub fn encode_record(out: &mut Vec<u8>, payload: &[u8]) {
    let len = u32::try_from(payload.len()).expect("record payload below 4 GiB");
    out.extend_from_slice(&head(len));
    out.extend_from_slice(&record_crc(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Frames `records` back to back; returns the bytes and each record's offset in them.
pub fn encode_batch(records: &[&[u8]]) -> (Vec<u8>, Vec<usize>) {
    let total = records.iter().map(|r| frame_len(r.len())).sum();
    let mut out = Vec::with_capacity(total);
    let mut offsets = Vec::with_capacity(records.len());
    for r in records {
        offsets.push(out.len());
        encode_record(&mut out, r);
    }
    (out, offsets)
}

/// What lies at one offset of a zone's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    /// A valid record; `payload` indexes the window, `next` is the zone offset after it.
    Record {
        /// The payload's range within the window.
        payload: Range<usize>,
        /// The zone offset just past the record.
        next: u64,
    },
    /// Zero padding up to the next block boundary (`next`, clamped to the data end).
    Padding {
        /// Where the data goes on.
        next: u64,
    },
    /// Zeros at a block boundary, or the data end reached: no more records here.
    End,
    /// The window is too short to decide; read up to `upto` (a zone offset) and retry.
    NeedMore {
        /// The zone offset the window must reach.
        upto: u64,
    },
    /// A record that runs past the end of the data (a write that did not complete).
    Torn {
        /// What is wrong.
        reason: String,
    },
    /// Bytes that are not a valid record (bad tag, checksum mismatch, garbage in padding).
    Corrupt {
        /// What is wrong.
        reason: String,
    },
}

/// Decodes what lies at zone offset `at`, given `window` = the zone's bytes from offset
/// `window_start` (`window_start <= at`), data ending at zone offset `data_end` (bytes past
/// it are not data) and blocks of `block_bytes`.
pub fn decode_at(
    window: &[u8],
    window_start: u64,
    at: u64,
    data_end: u64,
    block_bytes: u64,
) -> Decoded {
    debug_assert!(at >= window_start);
    let window_end = window_start + window.len() as u64;
    if at >= data_end {
        return Decoded::End;
    }
    if at >= window_end {
        return Decoded::NeedMore { upto: at + 1 };
    }
    let idx = |off: u64| (off - window_start) as usize;
    if window[idx(at)] == 0 {
        if at.is_multiple_of(block_bytes) {
            return Decoded::End;
        }
        let pad_end = ((at / block_bytes + 1) * block_bytes).min(data_end);
        if pad_end > window_end {
            return Decoded::NeedMore { upto: pad_end };
        }
        if window[idx(at)..idx(pad_end)].iter().any(|&b| b != 0) {
            return Decoded::Corrupt {
                reason: format!(
                    "padding from byte {at} to the block boundary at {pad_end} is not all zeros"
                ),
            };
        }
        return Decoded::Padding { next: pad_end };
    }
    let header_end = at + RECORD_HEADER_BYTES as u64;
    if header_end > data_end {
        return Decoded::Torn {
            reason: format!(
                "the record header at byte {at} crosses the end of the data at byte {data_end}"
            ),
        };
    }
    if header_end > window_end {
        return Decoded::NeedMore { upto: header_end };
    }
    let header = &window[idx(at)..idx(header_end)];
    if header[0] != RECORD_TAG || header[1..4] != [0, 0, 0] {
        return Decoded::Corrupt {
            reason: format!(
                "no record at byte {at}: tag {:#04x} and reserved bytes {:?}",
                header[0],
                &header[1..4]
            ),
        };
    }
    let len = u32::from_le_bytes(header[4..8].try_into().unwrap()) as u64;
    let crc = u32::from_le_bytes(header[8..12].try_into().unwrap());
    let frame_end = header_end + len;
    if frame_end > data_end {
        return Decoded::Torn {
            reason: format!(
                "the record at byte {at} ({len} bytes) runs past the end of the data at byte {data_end}"
            ),
        };
    }
    if frame_end > window_end {
        return Decoded::NeedMore { upto: frame_end };
    }
    let payload = idx(header_end)..idx(frame_end);
    if record_crc(&window[payload.clone()]) != crc {
        return Decoded::Corrupt {
            reason: format!("the record at byte {at} ({len} bytes) fails its checksum"),
        };
    }
    Decoded::Record {
        payload,
        next: frame_end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_bytes_are_as_documented() {
        let mut out = Vec::new();
        encode_record(&mut out, b"abc");
        let crc = crc32c::crc32c(&[0x5A, 0, 0, 0, 3, 0, 0, 0, b'a', b'b', b'c']);
        let mut want = vec![0x5A, 0, 0, 0, 3, 0, 0, 0];
        want.extend_from_slice(&crc.to_le_bytes());
        want.extend_from_slice(b"abc");
        assert_eq!(out, want);
    }

    #[test]
    fn decodes_records_padding_and_end() {
        let (mut data, offs) = encode_batch(&[b"hello", b""]);
        assert_eq!(offs, vec![0, 17]);
        let end1 = data.len() as u64;
        assert_eq!(end1, 29);
        data.resize(4096, 0); // flush padding
        encode_record(&mut data, b"next block");
        let data_end = data.len() as u64;
        let d = |at| decode_at(&data, 0, at, data_end, 4096);
        assert_eq!(
            d(0),
            Decoded::Record {
                payload: 12..17,
                next: 17
            }
        );
        assert_eq!(
            d(17),
            Decoded::Record {
                payload: 29..29,
                next: 29
            }
        );
        assert_eq!(d(end1), Decoded::Padding { next: 4096 });
        assert!(matches!(d(4096), Decoded::Record { next, .. } if next == data_end));
        assert_eq!(d(data_end), Decoded::End);
        // A window that starts later, and ones too short.
        assert!(matches!(
            decode_at(&data[4096..], 4096, 4096, data_end, 4096),
            Decoded::Record { .. }
        ));
        assert_eq!(
            decode_at(&data[..14], 0, 0, data_end, 4096),
            Decoded::NeedMore { upto: 17 }
        );
        assert_eq!(
            decode_at(&data[..4], 0, 0, data_end, 4096),
            Decoded::NeedMore { upto: 12 }
        );
        assert_eq!(
            decode_at(&data[..100], 0, end1, data_end, 4096),
            Decoded::NeedMore { upto: 4096 }
        );
    }

    #[test]
    fn padding_of_one_byte_before_a_record_header() {
        // A record ends one byte before a block boundary, a flush pads that byte, and the
        // next record starts at the boundary.
        let mut data = Vec::new();
        encode_record(&mut data, &vec![7u8; 4096 - 12 - 1]);
        data.push(0);
        encode_record(&mut data, &[0xFF; 3]);
        let n = data.len() as u64;
        assert_eq!(
            decode_at(&data, 0, 4095, n, 4096),
            Decoded::Padding { next: 4096 }
        );
        assert!(matches!(
            decode_at(&data, 0, 4096, n, 4096),
            Decoded::Record { .. }
        ));
    }

    #[test]
    fn torn_and_corrupt() {
        let (mut data, _) = encode_batch(&[b"0123456789"]);
        let n = data.len() as u64;
        assert!(matches!(
            decode_at(&data, 0, 0, n - 1, 4096),
            Decoded::Torn { .. }
        ));
        assert!(matches!(
            decode_at(&data, 0, 0, 5, 4096),
            Decoded::Torn { .. }
        ));
        for i in 0..data.len() {
            let mut bad = data.clone();
            bad[i] ^= 0x10;
            let d = decode_at(&bad, 0, 0, n, 4096);
            assert!(
                matches!(d, Decoded::Corrupt { .. } | Decoded::Torn { .. }),
                "flip at {i}: {d:?}"
            );
        }
        data[13] ^= 1;
        assert!(matches!(
            decode_at(&data, 0, 0, n, 4096),
            Decoded::Corrupt { .. }
        ));
        // Zeros at a block boundary end the data; garbage in padding is corrupt.
        let zeros = vec![0u8; 4096 + 16];
        assert_eq!(decode_at(&zeros, 0, 4096, 4096 + 16, 4096), Decoded::End);
        let mut pad = vec![0u8; 4096];
        pad[100] = 7;
        assert!(matches!(
            decode_at(&pad, 0, 20, 4096, 4096),
            Decoded::Corrupt { .. }
        ));
    }
}
