//! Payloads that identify their writer: every byte of operation `op_id`'s data is derived
//! from `op_id` and the byte's position and is never zero, so zeros on the device can only be
//! flush padding or unwritten space, and any non-zero run can be traced to the operation
//! that wrote it.

use super::rng::mix;

/// The `len` bytes operation `op_id` writes.
pub fn op_bytes(op_id: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut word = 0u64;
    for i in 0..len {
        if i % 8 == 0 {
            word = mix(op_id.wrapping_mul(0x1000_0000_01B3) ^ (i as u64 / 8));
        }
        out.push(((word >> (8 * (i % 8))) as u8) | 1);
    }
    out
}

/// Byte `i` of operation `op_id`'s data (what `op_bytes(op_id, _)[i]` is).
pub fn op_byte(op_id: u64, i: usize) -> u8 {
    let word = mix(op_id.wrapping_mul(0x1000_0000_01B3) ^ (i as u64 / 8));
    ((word >> (8 * (i % 8))) as u8) | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_nonzero_and_agree() {
        let d = op_bytes(42, 1000);
        assert!(d.iter().all(|&b| b != 0));
        assert!((0..1000).all(|i| op_byte(42, i) == d[i]));
        assert_ne!(op_bytes(43, 64), d[..64]);
    }
}
