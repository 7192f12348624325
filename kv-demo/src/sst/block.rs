//! Data and index blocks: sorted `(key, value)` entries, each key stored as the length of the
//! prefix it shares with the previous key plus the rest, with a restart point (a key stored
//! whole) every `restart_interval` entries so a reader can binary-search the restarts and
//! then scan at most one interval. Byte layout: `docs/format.md`, "kv-demo SSTable blocks".

use std::cmp::Ordering;

use bytes::Bytes;

use crate::error::{CorruptionError, Result};
use crate::varint;

/// How keys are ordered (bytewise for user keys; a store's internal keys order by user key,
/// then by sequence number).
pub type KeyOrder = fn(&[u8], &[u8]) -> Ordering;

/// Bytewise key order.
pub fn bytewise(a: &[u8], b: &[u8]) -> Ordering {
    a.cmp(b)
}

/// The first 8 bytes of `key` as a big-endian number, zero padded: if the heads of two keys
/// differ, the keys compare bytewise as their heads do (a first differing byte within 8
/// bytes is the keys' first differing byte; a padding zero against a real byte, nonzero
/// there, means the shorter key is a prefix of the longer). Equal heads decide nothing.
pub fn key_head(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

/// The default restart interval (LevelDB's and RocksDB's: 16 entries).
pub const DEFAULT_RESTART_INTERVAL: usize = 16;

/// Builds one block from entries added in strictly increasing key order.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    since_restart: usize,
    last_key: Vec<u8>,
    entries: usize,
    order: KeyOrder,
}

impl BlockBuilder {
    /// A builder with a restart point every `restart_interval` entries (at least 1), for
    /// keys in `order`.
    pub fn new(restart_interval: usize, order: KeyOrder) -> BlockBuilder {
        BlockBuilder {
            buf: Vec::new(),
            restarts: Vec::new(),
            restart_interval: restart_interval.max(1),
            since_restart: 0,
            last_key: Vec::new(),
            entries: 0,
            order,
        }
    }

    /// Appends an entry.
    ///
    /// # Panics
    /// If `key` is not greater than the previous key in the builder's order, or the block
    /// would pass 4 GiB (restart offsets are 32-bit): both are bugs of the table writer.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        assert!(
            self.entries == 0 || (self.order)(&self.last_key, key) == Ordering::Less,
            "block keys must be added in strictly increasing order"
        );
        let shared = if self.since_restart == self.restart_interval || self.entries == 0 {
            self.restarts
                .push(u32::try_from(self.buf.len()).expect("block over 4 GiB"));
            self.since_restart = 0;
            0
        } else {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        };
        varint::put(&mut self.buf, shared as u64);
        varint::put(&mut self.buf, (key.len() - shared) as u64);
        varint::put(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.since_restart += 1;
        self.entries += 1;
    }

    /// Entries added.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Whether no entry was added.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The size [`finish`](Self::finish) would return now, in bytes.
    pub fn encoded_len(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len().max(1) + 4
    }

    /// The last key added.
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// The encoded block. An empty block has one restart point at offset 0.
    pub fn finish(mut self) -> Vec<u8> {
        if self.restarts.is_empty() {
            self.restarts.push(0);
        }
        for r in &self.restarts {
            self.buf.extend_from_slice(&r.to_le_bytes());
        }
        self.buf
            .extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        self.buf
    }
}

/// A decoded block: its bytes and the position of its restart array, checked.
#[derive(Debug, Clone)]
pub struct Block {
    data: Bytes,
    /// Where the restart array starts (= the length of the entries area).
    restarts_at: usize,
    restarts: usize,
}

impl Block {
    /// Checks the block's trailer (restart count and offsets) and wraps it. Entries are
    /// checked as they are read: a damaged entry gives an error from the iterator.
    pub fn decode(data: Bytes) -> Result<Block> {
        let n = data.len();
        if n < 8 {
            return Err(CorruptionError::new(format!(
                "block: {n} bytes, shorter than a restart array"
            )));
        }
        let restarts = u32::from_le_bytes(data[n - 4..].try_into().unwrap()) as usize;
        let array = restarts
            .checked_mul(4)
            .filter(|&a| restarts >= 1 && a + 4 <= n)
            .ok_or_else(|| {
                CorruptionError::new(format!("block: {restarts} restart points in {n} bytes"))
            })?;
        let restarts_at = n - 4 - array;
        let block = Block {
            data,
            restarts_at,
            restarts,
        };
        let mut prev = None;
        for i in 0..restarts {
            let r = block.restart(i);
            if r > restarts_at || prev.is_some_and(|p| r <= p) || (i == 0 && r != 0) {
                return Err(CorruptionError::new(format!(
                    "block: restart point {i} at {r} (entries end at {restarts_at})"
                )));
            }
            prev = Some(r);
        }
        Ok(block)
    }

    fn restart(&self, i: usize) -> usize {
        let at = self.restarts_at + 4 * i;
        u32::from_le_bytes(self.data[at..at + 4].try_into().unwrap()) as usize
    }

    /// The block's encoded size in bytes.
    pub fn size(&self) -> usize {
        self.data.len()
    }

    /// An iterator over every entry, in order.
    pub fn iter(&self) -> BlockIter {
        BlockIter {
            block: self.clone(),
            offset: 0,
            key: Vec::new(),
            value: 0..0,
            ready: false,
            failed: false,
        }
    }

    /// An iterator at the first entry whose key is at or after `target` in `order` (binary
    /// search over the restart points, then a scan of one interval; no allocation but the
    /// iterator's key buffer). The entry found is decoded once: the iterator's first
    /// [`step`](BlockIter::step) hands it over without decoding it again.
    pub fn seek(&self, target: &[u8], order: KeyOrder) -> Result<BlockIter> {
        self.seek_within(target, order, 0, self.restarts)
    }

    /// Restart points of the block (at least 1).
    pub fn restart_count(&self) -> usize {
        self.restarts
    }

    /// The key of restart point `i` (`i <` [`restart_count`](Self::restart_count)), stored
    /// whole there.
    pub fn restart_key(&self, i: usize) -> Result<&[u8]> {
        let e = self.parts(self.restart(i), 0)?;
        Ok(&self.data[e.key])
    }

    /// [`seek`](Self::seek) when the caller knows where the answer lies among the restart
    /// points: restart `lo` is 0 or has a key before `target`, restart `hi` (at most
    /// [`restart_count`](Self::restart_count)) is the count or has a key at or after it.
    /// The binary search decodes only restarts between them.
    pub fn seek_within(
        &self,
        target: &[u8],
        order: KeyOrder,
        lo: usize,
        hi: usize,
    ) -> Result<BlockIter> {
        // The last restart whose key is before `target`: the entry sought is at or after it.
        let mut lo = lo.min(self.restarts - 1);
        let mut hi = hi.clamp(lo + 1, self.restarts);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            // A restart point's key is stored whole (`parts` refuses a shared prefix with
            // a previous key of length 0).
            let e = self.parts(self.restart(mid), 0)?;
            if order(&self.data[e.key], target) == Ordering::Less {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let mut at = self.restart(lo);
        let mut key: Vec<u8> = Vec::with_capacity(target.len() + 16);
        while at < self.restarts_at {
            let e = self.parts(at, key.len())?;
            key.truncate(e.shared);
            key.extend_from_slice(&self.data[e.key]);
            if order(&key, target) != Ordering::Less {
                return Ok(BlockIter {
                    block: self.clone(),
                    offset: e.next,
                    key,
                    value: e.value,
                    ready: true,
                    failed: false,
                });
            }
            at = e.next;
        }
        Ok(BlockIter {
            block: self.clone(),
            offset: at,
            key,
            value: 0..0,
            ready: false,
            failed: false,
        })
    }

    /// Decodes the entry at `offset` given the length of the previous key: where its
    /// unshared key bytes and its value are, and where the next entry starts.
    #[inline]
    fn parts(&self, offset: usize, prev_len: usize) -> Result<EntryParts> {
        let area = &self.data[..self.restarts_at];
        // Mostly every length fits one varint byte: three bytes, no loop.
        let (shared, unshared, value_len, at) = match area.get(offset..offset.wrapping_add(3)) {
            Some(&[s, u, v]) if (s | u | v) < 0x80 => {
                (s as usize, u as usize, v as usize, offset + 3)
            }
            _ => Self::long_lengths(area, offset)?,
        };
        if shared > prev_len {
            return Err(entry_error(
                offset,
                &format!("shares {shared} bytes with a {prev_len}-byte previous key"),
            ));
        }
        let key_end = at
            .checked_add(unshared)
            .filter(|&e| e <= area.len())
            .ok_or_else(|| entry_error(offset, "key runs past the entries"))?;
        let value_end = key_end
            .checked_add(value_len)
            .filter(|&e| e <= area.len())
            .ok_or_else(|| entry_error(offset, "value runs past the entries"))?;
        Ok(EntryParts {
            shared,
            key: at..key_end,
            value: key_end..value_end,
            next: value_end,
        })
    }

    /// The three length varints of the entry at `offset` of the entries area `area` when
    /// one takes more than a byte (or the area ends): `(shared, unshared, value length,
    /// where the key starts)`.
    #[cold]
    fn long_lengths(area: &[u8], offset: usize) -> Result<(usize, usize, usize, usize)> {
        let mut at = offset;
        let mut field = |name: &str| -> Result<usize> {
            let (v, n) = varint::get(&area[at.min(area.len())..])
                .ok_or_else(|| entry_error(offset, &format!("{name} truncated")))?;
            at += n;
            usize::try_from(v).map_err(|_| entry_error(offset, &format!("{name} {v} too large")))
        };
        let shared = field("shared length")?;
        let unshared = field("unshared length")?;
        let value_len = field("value length")?;
        Ok((shared, unshared, value_len, at))
    }
}

/// The error of a damaged entry at `offset`.
#[cold]
fn entry_error(offset: usize, what: &str) -> CorruptionError {
    CorruptionError::new(format!("block: entry at {offset}: {what}"))
}

/// Where the parts of one encoded entry are in its block.
struct EntryParts {
    /// Bytes shared with the previous key.
    shared: usize,
    /// The unshared key bytes.
    key: std::ops::Range<usize>,
    /// The value.
    value: std::ops::Range<usize>,
    /// Where the next entry starts.
    next: usize,
}

/// Entries of a [`Block`] in order: `(key, value)`; the value shares the block's memory.
/// As an [`Iterator`] it ends after an error; [`step`](Self::step) errs on every later call.
///
/// Besides [`Iterator`] (an owned key per entry) it steps in place: [`step`](Self::step)
/// moves to the next entry, [`key`](Self::key) and [`value`](Self::value) lend it (the key
/// is rebuilt in one buffer, no allocation per entry).
#[derive(Debug, Clone)]
pub struct BlockIter {
    block: Block,
    /// Where the next entry starts.
    offset: usize,
    /// The current entry's key (before the first step: the key before `offset`).
    key: Vec<u8>,
    /// The current entry's value in the block.
    value: std::ops::Range<usize>,
    /// `key` and `value` are an entry a seek decoded, which the next step hands over.
    ready: bool,
    failed: bool,
}

impl BlockIter {
    /// Moves to the next entry: `Ok(true)` if there is one (then [`key`](Self::key) and
    /// [`value`](Self::value) are it), `Ok(false)` at the end. After an error every further
    /// step errs too (a damaged block never reads as a shorter one).
    pub fn step(&mut self) -> Result<bool> {
        if self.failed {
            return Err(CorruptionError::new("block: read on after a damaged entry"));
        }
        if self.ready {
            self.ready = false;
            return Ok(true);
        }
        if self.offset >= self.block.restarts_at {
            return Ok(false);
        }
        match self.block.parts(self.offset, self.key.len()) {
            Ok(e) => {
                self.offset = e.next;
                self.key.truncate(e.shared);
                self.key.extend_from_slice(&self.block.data[e.key]);
                self.value = e.value;
                Ok(true)
            }
            Err(e) => {
                self.failed = true;
                Err(e)
            }
        }
    }

    /// The current entry's key (valid after a [`step`](Self::step) that gave `true`).
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current entry's value.
    pub fn value(&self) -> &[u8] {
        &self.block.data[self.value.clone()]
    }

    /// The current entry's value, sharing the block's memory.
    pub fn value_bytes(&self) -> Bytes {
        self.block.data.slice(self.value.clone())
    }
}

impl Iterator for BlockIter {
    type Item = Result<(Vec<u8>, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.step() {
            Ok(true) => Some(Ok((self.key.clone(), self.value_bytes()))),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn build(entries: &BTreeMap<Vec<u8>, Vec<u8>>, interval: usize) -> Block {
        let mut b = BlockBuilder::new(interval, bytewise);
        for (k, v) in entries {
            b.add(k, v);
        }
        let expected = b.encoded_len();
        let bytes = b.finish();
        assert_eq!(bytes.len(), expected);
        Block::decode(Bytes::from(bytes)).unwrap()
    }

    /// The bytes of a small block, field by field (docs/format.md's example).
    #[test]
    fn known_bytes() {
        let mut b = BlockBuilder::new(2, bytewise);
        b.add(b"apple", b"1");
        b.add(b"apply", b"22");
        b.add(b"banana", b"");
        let bytes = b.finish();
        #[rustfmt::skip]
        let expected: Vec<u8> = [
            &[0u8, 5, 1][..], b"apple", b"1",  // restart 0 at offset 0: key whole
            &[4, 1, 2], b"y", b"22",           // shares "appl"
            &[0, 6, 0], b"banana",             // restart 1 at offset 15: key whole
            &[0, 0, 0, 0], &[15, 0, 0, 0],     // restart offsets
            &[2, 0, 0, 0],                     // restart count
        ]
        .concat();
        assert_eq!(bytes, expected);
    }

    #[test]
    fn seek_within_bounds_past_the_restarts_is_a_whole_seek_not_a_panic() {
        let entries: BTreeMap<Vec<u8>, Vec<u8>> = (0..40u32)
            .map(|i| (format!("k{i:03}").into_bytes(), vec![i as u8]))
            .collect();
        let block = build(&entries, 4);
        let keys = |it: BlockIter| it.map(|e| e.unwrap().0).collect::<Vec<_>>();
        for target in [&b"k000"[..], b"k017", b"k039", b"zzz"] {
            let whole = keys(block.seek(target, bytewise).unwrap());
            for (lo, hi) in [
                (usize::MAX, 0),
                (block.restart_count() + 5, usize::MAX),
                (0, 0),
            ] {
                let within = keys(block.seek_within(target, bytewise, lo, hi).unwrap());
                // A `lo` past the target's restart can only start later, never panic.
                assert!(
                    whole.ends_with(&within),
                    "lo {lo} hi {hi} target {target:?}"
                );
            }
        }
    }

    #[test]
    fn empty_block_round_trips() {
        let block = build(&BTreeMap::new(), 16);
        assert_eq!(block.size(), 8);
        assert_eq!(block.iter().count(), 0);
        assert_eq!(block.seek(b"x", bytewise).unwrap().count(), 0);
    }

    #[test]
    #[should_panic(expected = "strictly increasing")]
    fn out_of_order_keys_panic() {
        let mut b = BlockBuilder::new(16, bytewise);
        b.add(b"b", b"");
        b.add(b"a", b"");
    }

    #[test]
    fn bad_trailers_are_corruption() {
        for bytes in [
            vec![],
            vec![0, 0, 0, 0, 0, 0, 0],
            vec![0, 0, 0, 0, 0, 0, 0, 0],          // zero restarts
            vec![0, 0, 0, 0, 9, 0, 0, 0],          // 9 restarts in 8 bytes
            vec![1, 2, 3, 7, 0, 0, 0, 1, 0, 0, 0], // restart 0 not at 0
        ] {
            assert!(
                Block::decode(Bytes::from(bytes.clone())).is_err(),
                "{bytes:?}"
            );
        }
    }

    /// A damaged entry ends the block with an error, also when stepped on: never a
    /// shorter block that reads as whole.
    #[test]
    fn a_damaged_entry_errs_on_every_later_step() {
        let mut b = BlockBuilder::new(16, bytewise);
        b.add(b"a", b"1");
        b.add(b"b", b"2");
        b.add(b"c", b"3");
        let mut bytes = b.finish();
        // The second entry's shared length (1 byte into it: shared=0 unshared=1 value=1
        // "a" "1" then this one): claims 9 shared bytes with a 1-byte key.
        bytes[5] = 9;
        let block = Block::decode(Bytes::from(bytes)).unwrap();
        let mut it = block.iter();
        assert!(it.step().unwrap());
        assert_eq!((it.key(), it.value()), (&b"a"[..], &b"1"[..]));
        assert!(it.step().is_err());
        assert!(it.step().is_err(), "stepped on past a damaged entry");
        assert!(it.step().is_err());
    }

    proptest! {
        #[test]
        fn round_trip_and_seek(
            entries in proptest::collection::btree_map(
                proptest::collection::vec(any::<u8>(), 0..12),
                proptest::collection::vec(any::<u8>(), 0..20),
                0..80,
            ),
            interval in 1usize..20,
            targets in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..12), 1..10),
        ) {
            let block = build(&entries, interval);
            let read: Vec<(Vec<u8>, Vec<u8>)> = block
                .iter()
                .map(|e| e.map(|(k, v)| (k, v.to_vec())))
                .collect::<Result<_>>()
                .unwrap();
            let want: Vec<(Vec<u8>, Vec<u8>)> = entries.clone().into_iter().collect();
            prop_assert_eq!(&read, &want);
            let mut it = block.iter();
            let mut stepped = Vec::new();
            while it.step().unwrap() {
                stepped.push((it.key().to_vec(), it.value().to_vec()));
            }
            prop_assert_eq!(&stepped, &want);
            for t in targets.iter().chain(entries.keys()) {
                let got: Vec<Vec<u8>> = block
                    .seek(t, bytewise)
                    .unwrap()
                    .map(|e| e.unwrap().0)
                    .collect();
                let want: Vec<Vec<u8>> = entries.range(t.clone()..).map(|(k, _)| k.clone()).collect();
                prop_assert_eq!(got, want);
            }
        }

        /// Any damage to a block's bytes gives errors or different entries, never a panic.
        #[test]
        fn damaged_blocks_never_panic(
            entries in proptest::collection::btree_map(
                proptest::collection::vec(any::<u8>(), 0..8),
                proptest::collection::vec(any::<u8>(), 0..8),
                1..30,
            ),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
            cut in any::<usize>(),
        ) {
            let mut b = BlockBuilder::new(4, bytewise);
            for (k, v) in &entries {
                b.add(k, v);
            }
            let mut bytes = b.finish();
            for (at, x) in flips {
                let n = bytes.len();
                bytes[at % n] ^= x;
            }
            bytes.truncate(cut % (bytes.len() + 1));
            if let Ok(block) = Block::decode(Bytes::from(bytes)) {
                let _ = block.iter().count();
                let _ = block.seek(b"m", bytewise).map(|it| it.count());
            }
        }
    }
}
