//! The per-table bloom filter: `bits_per_key` bits for each key, `k = round(bits_per_key ·
//! ln 2)` probes (1..=30), probe positions by double hashing of the key's 64-bit XXH3 hash
//! (seed 0) split in halves (`h1 + i·h2` modulo the bit count, `h2` made odd). False-positive rate ≈ `(1 − e^(−k/bits_per_key))^k`,
//! about 0.8 % at 10 bits per key. Byte layout: `docs/format.md`, "kv-demo SSTable blocks".

use crate::error::{CorruptionError, Result};

/// Most probes a filter may ask for.
pub const MAX_PROBES: u8 = 30;

/// The two hashes of a key: the low and high halves of its XXH3-64 (CRC-32C will not do:
/// it is linear, so two CRCs of one key with different seeds differ by a constant).
fn hashes(key: &[u8]) -> (u32, u32) {
    let h = xxhash_rust::xxh3::xxh3_64(key);
    (h as u32, (h >> 32) as u32 | 1) // h2 odd
}

/// Builds the filter of a set of keys.
#[derive(Debug)]
pub struct BloomBuilder {
    bits_per_key: u32,
    hashes: Vec<(u32, u32)>,
}

impl BloomBuilder {
    /// A builder spending `bits_per_key` bits per key (at least 1).
    pub fn new(bits_per_key: u32) -> BloomBuilder {
        BloomBuilder {
            bits_per_key: bits_per_key.max(1),
            hashes: Vec::new(),
        }
    }

    /// Adds a key.
    pub fn add(&mut self, key: &[u8]) {
        self.hashes.push(hashes(key));
    }

    /// The encoded filter: the bit array (at least 64 bits, whole bytes), then one byte with
    /// the probe count.
    pub fn finish(self) -> Vec<u8> {
        let probes = ((f64::from(self.bits_per_key) * std::f64::consts::LN_2).round() as u8)
            .clamp(1, MAX_PROBES);
        let bits = (self.hashes.len() * self.bits_per_key as usize).max(64);
        let bytes = bits.div_ceil(8);
        let bits = (bytes * 8) as u64;
        let mut out = vec![0u8; bytes + 1];
        for (h1, h2) in self.hashes {
            for i in 0..u64::from(probes) {
                let bit = (u64::from(h1) + i * u64::from(h2)) % bits;
                out[(bit / 8) as usize] |= 1 << (bit % 8);
            }
        }
        out[bytes] = probes;
        out
    }
}

/// A decoded filter.
#[derive(Debug, Clone)]
pub struct Bloom<'a> {
    bits: &'a [u8],
    probes: u8,
}

impl<'a> Bloom<'a> {
    /// Checks and wraps an encoded filter.
    pub fn decode(data: &'a [u8]) -> Result<Bloom<'a>> {
        match data.split_last() {
            Some((&probes, bits)) if (1..=MAX_PROBES).contains(&probes) && bits.len() >= 8 => {
                Ok(Bloom { bits, probes })
            }
            _ => Err(CorruptionError::new(format!(
                "bloom filter: {} bytes, probe count {:?}",
                data.len(),
                data.last()
            ))),
        }
    }

    /// `false` if `key` is certainly not in the set; `true` if it may be.
    pub fn may_contain(&self, key: &[u8]) -> bool {
        let (h1, h2) = hashes(key);
        let bits = (self.bits.len() * 8) as u64;
        // Probe i is `(h1 + i·h2) mod bits`, stepped as `(h1 mod bits) + i·(h2 mod bits)`
        // reduced once per step: two divisions per key instead of one per probe.
        let step = u64::from(h2) % bits;
        let mut bit = u64::from(h1) % bits;
        for _ in 0..self.probes {
            if self.bits[(bit / 8) as usize] & (1 << (bit % 8)) == 0 {
                return false;
            }
            bit += step;
            if bit >= bits {
                bit -= bits;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn key(i: u64) -> [u8; 16] {
        let mut k = [b'0'; 16];
        k[..8].copy_from_slice(&i.to_be_bytes());
        k
    }

    /// The measured false-positive rate stays within 1.5× the formula's (plus a small
    /// absolute slack for few probes), for several sizes; the keys probed are db_bench-like.
    #[test]
    fn false_positive_rate_within_bound() {
        for bits_per_key in [4u32, 6, 10, 16] {
            let n = 20_000u64;
            let mut b = BloomBuilder::new(bits_per_key);
            for i in 0..n {
                b.add(&key(i));
            }
            let enc = b.finish();
            let f = Bloom::decode(&enc).unwrap();
            assert!((0..n).all(|i| f.may_contain(&key(i))), "a false negative");
            let trials = 200_000u64;
            let fp = (n..n + trials).filter(|&i| f.may_contain(&key(i))).count() as f64;
            let rate = fp / trials as f64;
            let k = f64::from(f.probes);
            let b = f64::from(bits_per_key);
            let bound = (1.0 - (-k / b).exp()).powf(k);
            assert!(
                rate <= bound * 1.5 + 0.001,
                "bits/key {bits_per_key}: false-positive rate {rate:.5} over the bound {bound:.5}"
            );
        }
    }

    #[test]
    fn bad_encodings_are_corruption() {
        assert!(Bloom::decode(&[]).is_err());
        assert!(Bloom::decode(&[0; 8]).is_err()); // 7 bytes of bits
        assert!(Bloom::decode(&[0, 0, 0, 0, 0, 0, 0, 0, 0]).is_err()); // 0 probes
        assert!(Bloom::decode(&[0, 0, 0, 0, 0, 0, 0, 0, 31]).is_err());
        assert!(Bloom::decode(&[0, 0, 0, 0, 0, 0, 0, 0, 6]).is_ok());
    }

    #[test]
    fn empty_filter_has_64_bits_and_contains_nothing() {
        let enc = BloomBuilder::new(10).finish();
        assert_eq!(enc.len(), 9);
        assert_eq!(enc[8], 7);
        assert!(!Bloom::decode(&enc).unwrap().may_contain(b"x"));
    }

    proptest! {
        /// The stepped probes are the format's `(h1 + i·h2) mod bits`, bit for bit.
        #[test]
        fn probes_follow_the_formula(
            key in proptest::collection::vec(any::<u8>(), 0..24),
            // Mostly set bits, so that many keys pass every probe.
            bits in proptest::collection::vec(prop_oneof![3 => Just(0xffu8), 1 => any::<u8>()], 8..64),
            probes in 1u8..=MAX_PROBES,
        ) {
            let f = Bloom { bits: &bits, probes };
            let (h1, h2) = hashes(&key);
            let n = (bits.len() * 8) as u64;
            let want = (0..u64::from(probes)).all(|i| {
                let bit = (u64::from(h1) + i * u64::from(h2)) % n;
                bits[(bit / 8) as usize] & (1 << (bit % 8)) != 0
            });
            prop_assert_eq!(f.may_contain(&key), want);
        }

        /// No false negatives, whatever the keys and size.
        #[test]
        fn every_added_key_may_be_contained(
            keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..24), 0..200),
            bits_per_key in 1u32..24,
        ) {
            let mut b = BloomBuilder::new(bits_per_key);
            for k in &keys {
                b.add(k);
            }
            let enc = b.finish();
            let f = Bloom::decode(&enc).unwrap();
            for k in &keys {
                prop_assert!(f.may_contain(k));
            }
        }
    }
}
