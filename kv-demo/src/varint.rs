//! LEB128 unsigned varints (7 bits per byte, low bits first, high bit = more bytes follow),
//! as in LevelDB and protobuf.

/// Appends `v` as a varint to `out`.
pub(crate) fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Decodes a varint at the start of `buf`: the value and the bytes it took, or `None` if
/// `buf` ends inside it or it does not fit 64 bits.
#[inline]
pub(crate) fn get(buf: &[u8]) -> Option<(u64, usize)> {
    // One byte (lengths in blocks, mostly): no loop.
    if let Some(&b) = buf.first() {
        if b < 0x80 {
            return Some((u64::from(b), 1));
        }
    }
    let mut v = 0u64;
    for (i, &b) in buf.iter().enumerate().take(10) {
        let bits = u64::from(b & 0x7f);
        if i == 9 && b > 1 {
            return None;
        }
        v |= bits << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    #[test]
    fn known_encodings() {
        for (v, bytes) in [
            (0u64, vec![0u8]),
            (127, vec![0x7f]),
            (128, vec![0x80, 0x01]),
            (300, vec![0xac, 0x02]),
            (
                u64::MAX,
                vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ] {
            let mut out = Vec::new();
            super::put(&mut out, v);
            assert_eq!(out, bytes, "{v}");
            assert_eq!(super::get(&bytes), Some((v, bytes.len())));
        }
    }

    #[test]
    fn truncated_and_overlong_are_refused() {
        assert_eq!(super::get(&[]), None);
        assert_eq!(super::get(&[0x80]), None);
        assert_eq!(super::get(&[0xff; 10]), None);
        assert_eq!(
            super::get(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]),
            None
        );
    }

    proptest! {
        #[test]
        fn round_trip(v: u64, tail in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut out = Vec::new();
            super::put(&mut out, v);
            let n = out.len();
            out.extend_from_slice(&tail);
            prop_assert_eq!(super::get(&out), Some((v, n)));
        }
    }
}
