//! Internal keys: a user key followed by an 8-byte trailer `seq << 8 | kind` (little-endian),
//! ordered by user key ascending, then by sequence number descending — so the newest version
//! of a key comes first, and a reader at snapshot `s` takes the first entry with `seq <= s`.

use std::cmp::Ordering;

/// Largest sequence number (56 bits).
pub const MAX_SEQ: u64 = (1 << 56) - 1;

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Kind {
    /// A deletion (tombstone): the value is empty.
    Delete = 0,
    /// A value.
    Put = 1,
}

impl Kind {
    fn from_byte(b: u8) -> Option<Kind> {
        match b {
            0 => Some(Kind::Delete),
            1 => Some(Kind::Put),
            _ => None,
        }
    }
}

/// Encodes `(user_key, seq, kind)` as an internal key.
///
/// # Panics
/// If `seq` exceeds [`MAX_SEQ`].
pub fn encode(user_key: &[u8], seq: u64, kind: Kind) -> Vec<u8> {
    assert!(seq <= MAX_SEQ, "sequence number {seq} over 56 bits");
    let mut k = Vec::with_capacity(user_key.len() + 8);
    k.extend_from_slice(user_key);
    k.extend_from_slice(&(seq << 8 | kind as u64).to_le_bytes());
    k
}

/// The key a reader at snapshot `seq` seeks to find the newest visible version of
/// `user_key` (the kind byte is the largest, so it sorts before every entry of that seq).
pub fn seek_key(user_key: &[u8], seq: u64) -> Vec<u8> {
    encode(user_key, seq, Kind::Put)
}

/// The user key of an internal key (all of `k` if it is too short to have a trailer).
pub fn user_key(k: &[u8]) -> &[u8] {
    &k[..k.len().saturating_sub(8)]
}

/// `(user_key, seq, kind)` of an internal key, or `None` if it is malformed.
pub fn decode(k: &[u8]) -> Option<(&[u8], u64, Kind)> {
    let split = k.len().checked_sub(8)?;
    let trailer = u64::from_le_bytes(k[split..].try_into().unwrap());
    Some((&k[..split], trailer >> 8, Kind::from_byte(trailer as u8)?))
}

fn trailer(k: &[u8]) -> u64 {
    k.len()
        .checked_sub(8)
        .map_or(0, |s| u64::from_le_bytes(k[s..].try_into().unwrap()))
}

/// The internal key order (a [`KeyOrder`](crate::sst::block::KeyOrder)).
pub fn order(a: &[u8], b: &[u8]) -> Ordering {
    user_key(a)
        .cmp(user_key(b))
        .then_with(|| trailer(b).cmp(&trailer(a)))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn known_bytes() {
        assert_eq!(
            encode(b"ab", 0x0102, Kind::Put),
            vec![b'a', b'b', 1, 2, 1, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn newer_versions_first_and_prefix_keys_before() {
        let mut keys = [
            encode(b"a", 1, Kind::Put),
            encode(b"ab", 9, Kind::Put),
            encode(b"a", 5, Kind::Delete),
            encode(b"a", 5, Kind::Put),
            encode(b"", 3, Kind::Put),
        ];
        keys.sort_by(|a, b| order(a, b));
        let got: Vec<_> = keys.iter().map(|k| decode(k).unwrap()).collect();
        assert_eq!(
            got,
            vec![
                (&b""[..], 3, Kind::Put),
                (&b"a"[..], 5, Kind::Put),
                (&b"a"[..], 5, Kind::Delete),
                (&b"a"[..], 1, Kind::Put),
                (&b"ab"[..], 9, Kind::Put),
            ]
        );
    }

    #[test]
    fn malformed() {
        assert_eq!(decode(b"short"), None);
        assert_eq!(decode(&[7, 0, 0, 0, 0, 0, 0, 0]), None); // kind 7, empty user key
        let mut k = encode(b"x", 1, Kind::Put);
        k[1] = 2; // kind 2
        assert_eq!(decode(&k), None);
    }

    proptest! {
        #[test]
        fn round_trip_and_order_matches_tuples(
            a in (proptest::collection::vec(any::<u8>(), 0..6), 0..=MAX_SEQ, any::<bool>()),
            b in (proptest::collection::vec(any::<u8>(), 0..6), 0..=MAX_SEQ, any::<bool>()),
        ) {
            let kind = |p: bool| if p { Kind::Put } else { Kind::Delete };
            let ka = encode(&a.0, a.1, kind(a.2));
            let kb = encode(&b.0, b.1, kind(b.2));
            prop_assert_eq!(decode(&ka), Some((&a.0[..], a.1, kind(a.2))));
            let want = a.0.cmp(&b.0)
                .then(b.1.cmp(&a.1))
                .then(kind(b.2).cmp(&kind(a.2)));
            prop_assert_eq!(order(&ka, &kb), want);
        }
    }
}
