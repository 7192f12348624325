//! The memtable: the newest writes of one shard, in internal-key order, until it is flushed
//! to a table. Shared behind its shard's `RwLock` (writers insert from their threads); its size counts key, value and a fixed
//! per-entry overhead, so the store can bound memory by it.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::ikey::{self, Kind};
use crate::sst::block::key_head;

/// Bytes counted per entry besides its key and value (map node, `Bytes` header, the key
/// filter's hash and bits).
pub const ENTRY_OVERHEAD_BYTES: usize = 64;

/// An internal key ordered by [`ikey::order`], with the first 8 bytes of its user key
/// kept inline (`head`): most comparisons in the map are decided by the heads and read no
/// key bytes from the heap (a point lookup in a full memtable compares ~30 keys).
#[derive(Debug, Clone, PartialEq, Eq)]
struct InternalKey {
    /// [`head_of`] the key.
    head: u64,
    key: Vec<u8>,
}

/// The [`key_head`] of `k`'s user key ([`ikey::user_key`]): if two heads differ, the
/// internal keys compare as the heads do (user keys come first in the order).
fn head_of(k: &[u8]) -> u64 {
    key_head(ikey::user_key(k))
}

impl InternalKey {
    fn new(key: Vec<u8>) -> InternalKey {
        InternalKey {
            head: head_of(&key),
            key,
        }
    }
}

impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.head
            .cmp(&other.head)
            .then_with(|| ikey::order(&self.key, &other.key))
    }
}

impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Where a lookup of one user key at one snapshot starts: its seek key
/// ([`ikey::seek_key`]), made once per read.
#[derive(Debug, Clone)]
pub struct Seek(InternalKey);

impl Seek {
    /// The seek position of `user_key` at `snapshot`.
    pub fn new(user_key: &[u8], snapshot: u64) -> Seek {
        Seek(InternalKey::new(ikey::seek_key(user_key, snapshot)))
    }

    /// The position of the internal key `ikey` (where a scan goes on from).
    pub fn at(ikey: &[u8]) -> Seek {
        Seek(InternalKey::new(ikey.to_vec()))
    }

    /// Moves to the internal key `ikey`, reusing the buffer.
    pub fn set(&mut self, ikey: &[u8]) {
        self.0.key.clear();
        self.0.key.extend_from_slice(ikey);
        self.0.head = head_of(ikey);
    }

    /// The internal key (for table lookups).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0.key
    }
}

/// What a lookup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The newest visible version is this value.
    Found(Bytes),
    /// The newest visible version is a deletion.
    Deleted,
    /// No visible version here (look in older data).
    Absent,
}

/// Sorted writes in memory.
#[derive(Debug, Default)]
pub struct Memtable {
    map: BTreeMap<InternalKey, Bytes>,
    /// The user keys in `map`: a point lookup of a key it rules out skips the map.
    keys: KeyFilter,
    bytes: usize,
}

/// A filter over a growing set of keys (a memtable's user keys): `false` means certainly
/// absent. Most point reads of a store look for keys only its tables hold; the filter's one
/// word costs one cache miss where a search of the map costs one per level.
///
/// A blocked bloom filter: a key sets 4 bits in one 64-bit word, with at least 16 bits per
/// key (false positives about 1 %). When it would pass that it doubles and is rebuilt from
/// the keys' hashes, which it keeps (8 bytes a key, rebuilt in one sequential pass).
#[derive(Debug, Default)]
struct KeyFilter {
    /// A power of two of words (or none before the first key).
    words: Vec<u64>,
    /// The hash of every key added.
    hashes: Vec<u64>,
}

/// Fewest bits a [`KeyFilter`] keeps per key.
const FILTER_BITS_PER_KEY: usize = 16;

impl KeyFilter {
    fn hash(key: &[u8]) -> u64 {
        xxhash_rust::xxh3::xxh3_64(key)
    }

    /// The word of `hash` (its low bits) and the 4 bits it sets there (its high bits).
    fn slot(&self, hash: u64) -> (usize, u64) {
        let word = hash as usize & (self.words.len() - 1);
        let mask = (0..4).fold(0u64, |m, i| m | 1 << ((hash >> (40 + 6 * i)) & 63));
        (word, mask)
    }

    fn add(&mut self, key: &[u8]) {
        let hash = Self::hash(key);
        self.hashes.push(hash);
        if self.hashes.len() * FILTER_BITS_PER_KEY > self.words.len() * 64 {
            let words = (self.hashes.len() * FILTER_BITS_PER_KEY)
                .div_ceil(64)
                .next_power_of_two()
                .max(64)
                * 2;
            self.words = vec![0; words];
            for i in 0..self.hashes.len() {
                self.set(self.hashes[i]);
            }
        } else {
            self.set(hash);
        }
    }

    fn set(&mut self, hash: u64) {
        let (w, mask) = self.slot(hash);
        self.words[w] |= mask;
    }

    fn may_contain(&self, key: &[u8]) -> bool {
        if self.words.is_empty() {
            return false;
        }
        let (w, mask) = self.slot(Self::hash(key));
        self.words[w] & mask == mask
    }
}

impl Memtable {
    /// An empty memtable.
    pub fn new() -> Memtable {
        Memtable::default()
    }

    /// Adds version `seq` of `user_key` (a value, or a deletion with an empty value).
    /// Sequence numbers are unique per store, so an entry is never replaced.
    pub fn add(&mut self, user_key: &[u8], seq: u64, kind: Kind, value: Bytes) {
        self.bytes += user_key.len() + 8 + value.len() + ENTRY_OVERHEAD_BYTES;
        self.keys.add(user_key);
        let old = self
            .map
            .insert(InternalKey::new(ikey::encode(user_key, seq, kind)), value);
        debug_assert!(old.is_none(), "sequence number {seq} used twice");
    }

    /// The newest version of `user_key` with a sequence number at most `snapshot`.
    pub fn get(&self, user_key: &[u8], snapshot: u64) -> Lookup {
        self.get_at(user_key, &Seek::new(user_key, snapshot))
    }

    /// [`get`](Self::get) from a [`Seek`] made for `user_key` (one per read, for every
    /// memtable and table it looks in).
    pub fn get_at(&self, user_key: &[u8], seek: &Seek) -> Lookup {
        use std::ops::Bound;
        if !self.keys.may_contain(user_key) {
            return Lookup::Absent;
        }
        match self
            .map
            .range((Bound::Included(&seek.0), Bound::Unbounded))
            .next()
        {
            Some((k, v)) => match ikey::decode(&k.key) {
                Some((uk, _, kind)) if uk == user_key => match kind {
                    Kind::Put => Lookup::Found(v.clone()),
                    Kind::Delete => Lookup::Deleted,
                },
                _ => Lookup::Absent,
            },
            None => Lookup::Absent,
        }
    }

    /// Every entry at or after the internal key `from`, in order: `(internal key, value)`.
    pub fn iter_from<'a>(&'a self, from: &[u8]) -> impl Iterator<Item = (&'a [u8], &'a Bytes)> {
        self.map
            .range(InternalKey::new(from.to_vec())..)
            .map(|(k, v)| (&k.key[..], v))
    }

    /// Every entry at or after the position `from`, in order (no key copied to start).
    pub fn iter_at<'a>(&'a self, from: &Seek) -> impl Iterator<Item = (&'a [u8], &'a Bytes)> {
        use std::ops::Bound;
        self.map
            .range((Bound::Included(&from.0), Bound::Unbounded))
            .map(|(k, v)| (&k.key[..], v))
    }

    /// Every entry in order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Bytes)> {
        self.map.iter().map(|(k, v)| (&k.key[..], v))
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Memory counted for its entries, in bytes.
    pub fn approximate_bytes(&self) -> usize {
        self.bytes
    }

    /// Frees the entries a few at a time, yielding the core after every `entries_per_yield`
    /// (dropping a full memtable at once takes milliseconds, and the core also serves reads).
    /// Returns the yields made.
    pub async fn free_gradually(self, entries_per_yield: u64) -> u64 {
        let entries_per_yield = entries_per_yield.max(1);
        let (mut n, mut yields) = (0u64, 0u64);
        for entry in self.map {
            drop(entry);
            n += 1;
            if n % entries_per_yield == 0 {
                ziob::runtime::yield_now().await;
                yields += 1;
            }
        }
        yields
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn free_gradually_frees_every_entry_and_yields_between_slices() {
        let value = Bytes::from(vec![7u8; 100]);
        let mut m = Memtable::new();
        for i in 0..1000u32 {
            m.add(&i.to_be_bytes(), u64::from(i) + 1, Kind::Put, value.clone());
        }
        // Each entry holds one reference to `value`'s buffer.
        let rt = ziob::Runtime::builder().cores(1).build().unwrap();
        let yields = rt
            .block_on(move || async move { m.free_gradually(256).await })
            .unwrap();
        assert_eq!(yields, 1000 / 256);
        assert!(value.is_unique(), "an entry was not freed");
    }

    /// The key filter never rules out a key added, across its growth, and rules out most
    /// others.
    #[test]
    fn key_filter_has_no_false_negatives_and_few_false_positives() {
        let key = |i: u64| {
            let mut k = [b'0'; 16];
            k[..8].copy_from_slice(&i.to_be_bytes());
            k
        };
        let mut f = KeyFilter::default();
        assert!(!f.may_contain(&key(0)), "empty");
        for n in [1u64, 100, 1000, 100_000] {
            let before = f.hashes.len() as u64;
            for i in before..n {
                f.add(&key(i));
            }
            assert!(
                (0..n).all(|i| f.may_contain(&key(i))),
                "a false negative at {n}"
            );
            let trials = 100_000;
            let fp = (n..n + trials).filter(|&i| f.may_contain(&key(i))).count();
            assert!(
                fp * 100 < trials as usize * 3,
                "{fp} false positives in {trials} at {n}"
            );
        }
    }

    #[test]
    fn versions_and_snapshots() {
        let mut m = Memtable::new();
        m.add(b"k", 1, Kind::Put, Bytes::from_static(b"v1"));
        m.add(b"k", 3, Kind::Delete, Bytes::new());
        m.add(b"k", 5, Kind::Put, Bytes::from_static(b"v5"));
        m.add(b"ka", 2, Kind::Put, Bytes::from_static(b"other"));
        assert_eq!(m.get(b"k", 0), Lookup::Absent);
        assert_eq!(m.get(b"k", 1), Lookup::Found(Bytes::from_static(b"v1")));
        assert_eq!(m.get(b"k", 2), Lookup::Found(Bytes::from_static(b"v1")));
        assert_eq!(m.get(b"k", 3), Lookup::Deleted);
        assert_eq!(m.get(b"k", 4), Lookup::Deleted);
        assert_eq!(m.get(b"k", 9), Lookup::Found(Bytes::from_static(b"v5")));
        assert_eq!(m.get(b"", 9), Lookup::Absent);
        assert_eq!(m.get(b"j", 9), Lookup::Absent);
        assert_eq!(m.len(), 4);
        assert!(m.approximate_bytes() >= 4 * ENTRY_OVERHEAD_BYTES);
    }

    proptest! {
        /// The inline head never changes the order: the map's order is [`ikey::order`] on
        /// any bytes (zero bytes, keys sharing their first 8 bytes, keys shorter than 8
        /// bytes and than a trailer included).
        #[test]
        fn head_order_is_ikey_order(
            a in proptest::collection::vec(0u8..3, 0..20),
            b in proptest::collection::vec(0u8..3, 0..20),
        ) {
            let got = InternalKey::new(a.clone()).cmp(&InternalKey::new(b.clone()));
            prop_assert_eq!(got, ikey::order(&a, &b));
        }

        /// Against a model of every version: any key at any snapshot gives the newest
        /// version at or below it; iteration is in internal-key order.
        #[test]
        fn matches_a_model(
            ops in proptest::collection::vec(
                (proptest::collection::vec(0u8..4, 0..3), any::<bool>(), any::<u8>()),
                0..100,
            ),
        ) {
            let mut m = Memtable::new();
            let mut model: BTreeMap<(Vec<u8>, u64), Option<u8>> = BTreeMap::new();
            for (i, (k, put, v)) in ops.iter().enumerate() {
                let seq = i as u64 + 1;
                if *put {
                    m.add(k, seq, Kind::Put, Bytes::from(vec![*v]));
                    model.insert((k.clone(), seq), Some(*v));
                } else {
                    m.add(k, seq, Kind::Delete, Bytes::new());
                    model.insert((k.clone(), seq), None);
                }
            }
            let n = ops.len() as u64;
            for (k, _, _) in &ops {
                for snap in 0..=n {
                    let want = model
                        .iter()
                        .filter(|((mk, s), _)| mk == k && *s <= snap)
                        .max_by_key(|((_, s), _)| *s)
                        .map(|(_, v)| *v);
                    let got = m.get(k, snap);
                    let want = match want {
                        None => Lookup::Absent,
                        Some(None) => Lookup::Deleted,
                        Some(Some(v)) => Lookup::Found(Bytes::from(vec![v])),
                    };
                    prop_assert_eq!(got, want);
                }
            }
            let keys: Vec<Vec<u8>> = m.iter().map(|(k, _)| k.to_vec()).collect();
            prop_assert!(keys.windows(2).all(|w| ikey::order(&w[0], &w[1]).is_lt()));
        }
    }
}
