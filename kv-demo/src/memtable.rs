//! The memtable: the newest writes of one shard, in internal-key order, until it is flushed
//! to a table. Owned by the shard's core (no locks); its size counts key, value and a fixed
//! per-entry overhead, so the store can bound memory by it.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::ikey::{self, Kind};

/// Bytes counted per entry besides its key and value (map node, `Bytes` header).
pub const ENTRY_OVERHEAD_BYTES: usize = 64;

/// An internal key ordered by [`ikey::order`].
#[derive(Debug, Clone, PartialEq, Eq)]
struct InternalKey(Vec<u8>);

impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        ikey::order(&self.0, &other.0)
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
        Seek(InternalKey(ikey::seek_key(user_key, snapshot)))
    }

    /// The position of the internal key `ikey` (where a scan goes on from).
    pub fn at(ikey: &[u8]) -> Seek {
        Seek(InternalKey(ikey.to_vec()))
    }

    /// Moves to the internal key `ikey`, reusing the buffer.
    pub fn set(&mut self, ikey: &[u8]) {
        self.0 .0.clear();
        self.0 .0.extend_from_slice(ikey);
    }

    /// The internal key (for table lookups).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0 .0
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
    bytes: usize,
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
        let old = self
            .map
            .insert(InternalKey(ikey::encode(user_key, seq, kind)), value);
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
        match self
            .map
            .range((Bound::Included(&seek.0), Bound::Unbounded))
            .next()
        {
            Some((k, v)) => match ikey::decode(&k.0) {
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
            .range(InternalKey(from.to_vec())..)
            .map(|(k, v)| (&k.0[..], v))
    }

    /// Every entry at or after the position `from`, in order (no key copied to start).
    pub fn iter_at<'a>(&'a self, from: &Seek) -> impl Iterator<Item = (&'a [u8], &'a Bytes)> {
        use std::ops::Bound;
        self.map
            .range((Bound::Included(&from.0), Bound::Unbounded))
            .map(|(k, v)| (&k.0[..], v))
    }

    /// Every entry in order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Bytes)> {
        self.map.iter().map(|(k, v)| (&k.0[..], v))
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
