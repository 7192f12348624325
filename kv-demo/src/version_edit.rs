//! The shared vocabulary of the manifest and the LSM engine: which tables a shard has and how
//! a flush or compaction changes that set. The manifest (`manifest`) encodes these; the
//! engine applies them to its in-memory version.
//!
//! Byte layout: `docs/format.md`, "kv-demo manifest and WAL" → "Version edit".

use bytes::Bytes;

use crate::batch::KEY_BYTES_MAX;
use crate::error::{CorruptionError, Result};
use crate::varint;

/// The version edit encoding this code writes and reads (its first byte).
pub const EDIT_FORMAT: u8 = 1;
/// Longest internal key a [`FileMeta`] may hold: a user key and its 8-byte trailer.
pub const INTERNAL_KEY_BYTES_MAX: usize = KEY_BYTES_MAX + 8;

/// Presence bits of the optional fields.
const HAS_WAL_START: u8 = 1;
const HAS_NEXT_FILE_NUMBER: u8 = 2;
const HAS_LAST_SEQ: u8 = 4;
const KNOWN_FLAGS: u8 = HAS_WAL_START | HAS_NEXT_FILE_NUMBER | HAS_LAST_SEQ;

/// One SSTable of a shard, as the manifest records it. The table's file is
/// `kv/<shard>/<number>.sst` in the store's zone file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    /// The table's file number (unique within its shard, never reused).
    pub number: u64,
    /// The LSM level the table is in (0 = freshly flushed, key ranges may overlap).
    pub level: u32,
    /// The table file's size in bytes.
    pub size: u64,
    /// Entries (internal keys) in the table.
    pub entries: u64,
    /// The smallest internal key in the table (`ikey` encoding).
    pub smallest: Bytes,
    /// The largest internal key in the table (`ikey` encoding).
    pub largest: Bytes,
}

/// A change to a shard's set of tables and its recovery point, written to the manifest as one
/// record: applied all at once or not at all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// Tables added (by a flush or a compaction).
    pub added: Vec<FileMeta>,
    /// Tables removed, as `(level, number)`.
    pub deleted: Vec<(u32, u64)>,
    /// WAL replay starts here after this edit: every WAL record before this position (a raw
    /// [`ziob::Position`] value) is in the shard's tables.
    pub wal_start: Option<u64>,
    /// The next unused file number of the shard.
    pub next_file_number: Option<u64>,
    /// The highest sequence number in the shard's tables.
    pub last_seq: Option<u64>,
}

impl FileMeta {
    /// Appends the encoding: `number`, `level`, `size`, `entries` (varints), then `smallest`
    /// and `largest` (varint length + bytes each).
    pub fn encode(&self, out: &mut Vec<u8>) {
        varint::put(out, self.number);
        varint::put(out, u64::from(self.level));
        varint::put(out, self.size);
        varint::put(out, self.entries);
        for key in [&self.smallest, &self.largest] {
            varint::put(out, key.len() as u64);
            out.extend_from_slice(key);
        }
    }

    /// Decodes one file from `r` (keys share `r`'s memory).
    fn decode_from(r: &mut Reader<'_>) -> Result<FileMeta> {
        let number = r.varint("file number")?;
        let level = u32::try_from(r.varint("level")?).map_err(|_| r.bad("level above u32::MAX"))?;
        let size = r.varint("size")?;
        let entries = r.varint("entries")?;
        let smallest = r.key("smallest key")?;
        let largest = r.key("largest key")?;
        Ok(FileMeta {
            number,
            level,
            size,
            entries,
            smallest,
            largest,
        })
    }
}

impl VersionEdit {
    /// True when the edit changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == VersionEdit::default()
    }

    /// Appends the encoding (`docs/format.md`, "Version edit"): format byte, presence flags,
    /// the present optional fields as u64 (`wal_start`, `next_file_number`, `last_seq`), the
    /// added files (varint count, then each [`FileMeta::encode`]) and the deleted files
    /// (varint count, then varint level and varint number each).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(EDIT_FORMAT);
        let fields = [
            (HAS_WAL_START, self.wal_start),
            (HAS_NEXT_FILE_NUMBER, self.next_file_number),
            (HAS_LAST_SEQ, self.last_seq),
        ];
        out.push(
            fields
                .iter()
                .filter(|(_, v)| v.is_some())
                .fold(0, |f, (bit, _)| f | bit),
        );
        for v in fields.iter().filter_map(|(_, v)| *v) {
            out.extend_from_slice(&v.to_le_bytes());
        }
        varint::put(out, self.added.len() as u64);
        for f in &self.added {
            f.encode(out);
        }
        varint::put(out, self.deleted.len() as u64);
        for &(level, number) in &self.deleted {
            varint::put(out, u64::from(level));
            varint::put(out, number);
        }
    }

    /// The encoding as a new buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// Decodes a whole encoding (trailing bytes are corruption). Keys share `bytes`' memory.
    pub fn decode(bytes: &Bytes) -> Result<VersionEdit> {
        let mut r = Reader { buf: bytes, at: 0 };
        let format = r.u8("format")?;
        if format != EDIT_FORMAT {
            return Err(r.bad(&format!(
                "format {format}, this code reads format {EDIT_FORMAT}"
            )));
        }
        let flags = r.u8("flags")?;
        if flags & !KNOWN_FLAGS != 0 {
            return Err(r.bad(&format!("unknown flags {flags:#04x}")));
        }
        let mut opt = |bit: u8, name: &str| -> Result<Option<u64>> {
            if flags & bit == 0 {
                return Ok(None);
            }
            r.u64(name).map(Some)
        };
        let wal_start = opt(HAS_WAL_START, "wal_start")?;
        let next_file_number = opt(HAS_NEXT_FILE_NUMBER, "next_file_number")?;
        let last_seq = opt(HAS_LAST_SEQ, "last_seq")?;
        // Every file takes at least 6 bytes, every deletion 2: a count above what the rest
        // could hold is corruption (and no huge allocation is made for it).
        let added_count = r.count("added count", 6)?;
        let mut added = Vec::with_capacity(added_count);
        for _ in 0..added_count {
            added.push(FileMeta::decode_from(&mut r)?);
        }
        let deleted_count = r.count("deleted count", 2)?;
        let mut deleted = Vec::with_capacity(deleted_count);
        for _ in 0..deleted_count {
            let level = u32::try_from(r.varint("deleted level")?)
                .map_err(|_| r.bad("deleted level above u32::MAX"))?;
            deleted.push((level, r.varint("deleted number")?));
        }
        if r.at != bytes.len() {
            return Err(r.bad(&format!("{} trailing bytes", bytes.len() - r.at)));
        }
        Ok(VersionEdit {
            added,
            deleted,
            wal_start,
            next_file_number,
            last_seq,
        })
    }
}

/// A cursor over an encoded edit; errors name the field and the byte offset.
struct Reader<'a> {
    buf: &'a Bytes,
    at: usize,
}

impl Reader<'_> {
    fn bad(&self, what: &str) -> CorruptionError {
        CorruptionError::new(format!("version edit at byte {}: {what}", self.at))
    }

    fn take(&mut self, n: usize, name: &str) -> Result<&[u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| self.bad(&format!("{name} truncated")))?;
        let s = &self.buf[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u8(&mut self, name: &str) -> Result<u8> {
        Ok(self.take(1, name)?[0])
    }

    fn u64(&mut self, name: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8, name)?.try_into().unwrap()))
    }

    fn varint(&mut self, name: &str) -> Result<u64> {
        let rest = &self.buf[self.at..];
        let (v, n) =
            varint::get(rest).ok_or_else(|| self.bad(&format!("{name} truncated or overlong")))?;
        // Only the shortest form is valid (one encoding per edit).
        if n > 1 && rest[n - 1] == 0 {
            return Err(self.bad(&format!("{name} not in its shortest form")));
        }
        self.at += n;
        Ok(v)
    }

    /// A count of items taking at least `min_bytes` each.
    fn count(&mut self, name: &str, min_bytes: usize) -> Result<usize> {
        let n = self.varint(name)?;
        let room = (self.buf.len() - self.at) / min_bytes;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= room)
            .ok_or_else(|| self.bad(&format!("{name} {n} is more than the rest can hold")))
    }

    fn key(&mut self, name: &str) -> Result<Bytes> {
        let len = self.varint(name)?;
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= INTERNAL_KEY_BYTES_MAX)
            .ok_or_else(|| self.bad(&format!("{name} of {len} bytes is over the limit")))?;
        let start = self.at;
        self.take(len, name)?;
        Ok(self.buf.slice(start..start + len))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn file(number: u64, level: u32) -> FileMeta {
        FileMeta {
            number,
            level,
            size: 300,
            entries: 2,
            smallest: Bytes::from_static(b"a"),
            largest: Bytes::from_static(b"bc"),
        }
    }

    /// The example of docs/format.md, byte by byte.
    #[test]
    fn documented_example() {
        let edit = VersionEdit {
            added: vec![file(7, 1)],
            deleted: vec![(0, 5)],
            wal_start: None,
            next_file_number: Some(8),
            last_seq: Some(0x102),
        };
        let bytes = edit.to_bytes();
        #[rustfmt::skip]
        let want: Vec<u8> = [
            &[0x01, 0x06][..],                            // format 1, flags: next_file_number, last_seq
            &[8, 0, 0, 0, 0, 0, 0, 0],                    // next_file_number 8
            &[0x02, 0x01, 0, 0, 0, 0, 0, 0],              // last_seq 0x102
            &[0x01],                                      // 1 added file
            &[0x07, 0x01, 0xac, 0x02, 0x02],              // number 7, level 1, size 300, entries 2
            &[0x01, b'a', 0x02, b'b', b'c'],              // smallest "a", largest "bc"
            &[0x01, 0x00, 0x05],                          // 1 deleted: level 0, number 5
        ]
        .concat();
        assert_eq!(bytes, want);
        assert_eq!(VersionEdit::decode(&Bytes::from(bytes)), Ok(edit));
        let empty = VersionEdit::default();
        assert!(empty.is_empty());
        assert_eq!(empty.to_bytes(), vec![1, 0, 0, 0]);
    }

    #[test]
    fn refuses_bad_headers_and_counts() {
        let ok = VersionEdit::default().to_bytes();
        for (bytes, what) in [
            (vec![2, 0, 0, 0], "format"),
            (vec![1, 8, 0, 0], "flags"),
            (vec![1, 1, 0, 0], "wal_start truncated"),
            (vec![1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0], "added count"),
            ([ok.clone(), vec![0]].concat(), "trailing"),
            (vec![1, 0, 0], "deleted count truncated"),
            (vec![1, 0, 0x80, 0x00, 0], "shortest form"),
            (vec![], "format truncated"),
        ] {
            let e = VersionEdit::decode(&Bytes::from(bytes.clone())).unwrap_err();
            assert!(e.what.contains(what), "{bytes:?}: {e}");
        }
        // A key over the limit.
        let mut big = vec![1, 0, 1, 1, 0, 0, 0];
        varint::put(&mut big, INTERNAL_KEY_BYTES_MAX as u64 + 1);
        let e = VersionEdit::decode(&Bytes::from(big)).unwrap_err();
        assert!(e.what.contains("over the limit"), "{e}");
    }

    fn file_meta() -> impl Strategy<Value = FileMeta> {
        let key = proptest::collection::vec(any::<u8>(), 0..40).prop_map(Bytes::from);
        (
            any::<u64>(),
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            key.clone(),
            key,
        )
            .prop_map(
                |(number, level, size, entries, smallest, largest)| FileMeta {
                    number,
                    level,
                    size,
                    entries,
                    smallest,
                    largest,
                },
            )
    }

    fn edit() -> impl Strategy<Value = VersionEdit> {
        (
            proptest::collection::vec(file_meta(), 0..6),
            proptest::collection::vec((any::<u32>(), any::<u64>()), 0..6),
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u64>()),
        )
            .prop_map(|(added, deleted, wal_start, next_file_number, last_seq)| {
                VersionEdit {
                    added,
                    deleted,
                    wal_start,
                    next_file_number,
                    last_seq,
                }
            })
    }

    proptest! {
        #[test]
        fn round_trip(e in edit()) {
            let bytes = Bytes::from(e.to_bytes());
            prop_assert_eq!(VersionEdit::decode(&bytes), Ok(e));
        }

        /// Any cut of an encoding is refused, never a panic or a shorter edit.
        #[test]
        fn cuts_are_refused(e in edit(), cut in any::<prop::sample::Index>()) {
            let bytes = e.to_bytes();
            let n = cut.index(bytes.len());
            prop_assert!(VersionEdit::decode(&Bytes::copy_from_slice(&bytes[..n])).is_err());
        }

        /// A damaged byte never panics; what decodes re-encodes to the same bytes (so no
        /// damage is silently taken for another edit with the same encoding).
        #[test]
        fn damage_never_panics(
            e in edit(),
            at in any::<prop::sample::Index>(),
            x in 1u8..=255,
        ) {
            let mut bytes = e.to_bytes();
            let i = at.index(bytes.len());
            bytes[i] ^= x;
            if let Ok(d) = VersionEdit::decode(&Bytes::from(bytes.clone())) {
                prop_assert_eq!(d.to_bytes(), bytes);
            }
        }

        /// Random bytes never panic.
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = VersionEdit::decode(&Bytes::from(bytes));
        }
    }
}
