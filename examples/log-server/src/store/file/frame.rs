//! The file store's record framing: `len: u32 LE | crc: u32 LE | data[len]`, where `crc` is
//! CRC-32C over the four length bytes followed by the data. A torn or zeroed frame never
//! checks (the CRC-32C of four zero bytes is not zero).

/// Bytes of a frame's header (length and checksum).
pub const HEADER_BYTES: u64 = 8;

/// A frame's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Length of the record's data in bytes.
    pub len: u32,
    /// CRC-32C over the length bytes and the data.
    pub crc: u32,
}

impl Header {
    /// Decodes the header bytes.
    pub fn decode(bytes: &[u8; HEADER_BYTES as usize]) -> Self {
        let len = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes"));
        let crc = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
        Header { len, crc }
    }

    /// The frame's total length in bytes.
    pub fn frame_bytes(&self) -> u64 {
        HEADER_BYTES + u64::from(self.len)
    }

    /// Whether `data` is the record this header announces.
    pub fn checks(&self, data: &[u8]) -> bool {
        data.len() == self.len as usize && checksum(self.len, data) == self.crc
    }
}

fn checksum(len: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&len.to_le_bytes()), data)
}

/// Appends the frame of `data` to `out`. `data` must be shorter than 4 GiB (the store's
/// record limit is far below).
pub fn encode_into(out: &mut Vec<u8>, data: &[u8]) {
    let len = u32::try_from(data.len()).expect("record shorter than 4 GiB");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&checksum(len, data).to_le_bytes());
    out.extend_from_slice(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_bytes_are_as_documented() {
        let mut out = Vec::new();
        encode_into(&mut out, b"abc");
        assert_eq!(&out[0..4], &[3, 0, 0, 0]);
        let crc = crc32c::crc32c(&[3, 0, 0, 0, b'a', b'b', b'c']);
        assert_eq!(&out[4..8], &crc.to_le_bytes());
        assert_eq!(&out[8..], b"abc");
        let h = Header::decode(out[0..8].try_into().unwrap());
        assert_eq!(h.frame_bytes(), 11);
        assert!(h.checks(b"abc"));
        assert!(!h.checks(b"abd"));
    }

    #[test]
    fn zeros_and_flipped_bits_never_check() {
        assert!(!Header::decode(&[0; 8]).checks(&[]));
        let mut out = Vec::new();
        encode_into(&mut out, b"record");
        for bit in 0..out.len() * 8 {
            let mut bad = out.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            let h = Header::decode(bad[0..8].try_into().unwrap());
            let data = &bad[8..];
            assert!(!h.checks(data), "bit {bit}");
        }
    }
}
