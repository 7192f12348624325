//! Keys exactly as db_bench 7.8.3 makes them (`Benchmark::GenerateKeyFromInt` without
//! prefixes): the key number's low `min(key_size, 8)` bytes big-endian, then ASCII `'0'`
//! padding up to `key_size`.

/// Writes key number `v` into `key` (its length is the key size).
pub fn fill_key(v: u64, key: &mut [u8]) {
    let n = key.len().min(8);
    let be = v.to_be_bytes();
    key[..n].copy_from_slice(&be[8 - n..]);
    key[n..].fill(b'0');
}

/// Key number `v` as a new `key_size`-byte key.
pub fn key_from_int(v: u64, key_size: usize) -> Vec<u8> {
    let mut k = vec![0; key_size];
    fill_key(v, &mut k);
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_endian_number_then_ascii_zero_padding() {
        assert_eq!(
            key_from_int(0x0102_0304_0506_0708, 16),
            b"\x01\x02\x03\x04\x05\x06\x07\x0800000000"
        );
        assert_eq!(key_from_int(0x0102_0304_0506_0708, 4), [5, 6, 7, 8]);
        assert_eq!(key_from_int(3, 8), [0, 0, 0, 0, 0, 0, 0, 3]);
        assert!(key_from_int(0, 0).is_empty());
    }
}
