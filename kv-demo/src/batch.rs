//! Write batches: the unit of atomicity and the payload of one WAL record. A batch applied
//! at sequence number `s` gives its `n` operations the sequence numbers `s .. s + n`.

use bytes::Bytes;

use crate::error::{CorruptionError, Result};
use crate::ikey::{Kind, MAX_SEQ};
use crate::varint;

/// Longest key, in bytes (the empty key is allowed).
pub const KEY_BYTES_MAX: usize = 64 << 10;
/// Longest value, in bytes.
pub const VALUE_BYTES_MAX: usize = 16 << 20;

/// Why an operation cannot go into a batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// The key is longer than [`KEY_BYTES_MAX`].
    #[error("key of {0} bytes is over the {KEY_BYTES_MAX}-byte limit")]
    KeyTooLong(usize),
    /// The value is longer than [`VALUE_BYTES_MAX`].
    #[error("value of {0} bytes is over the {VALUE_BYTES_MAX}-byte limit")]
    ValueTooLong(usize),
}

/// One operation of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    /// Put or delete.
    pub kind: Kind,
    /// The user key.
    pub key: Bytes,
    /// The value (empty for a delete).
    pub value: Bytes,
}

/// Operations applied together: all of them or none, after a crash too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<Op>,
    bytes: usize,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Adds a put of `key` → `value`.
    pub fn put(
        &mut self,
        key: impl Into<Bytes>,
        value: impl Into<Bytes>,
    ) -> std::result::Result<(), BatchError> {
        let (key, value) = (key.into(), value.into());
        check(&key, &value)?;
        self.push(Op {
            kind: Kind::Put,
            key,
            value,
        });
        Ok(())
    }

    /// Adds a delete of `key`.
    pub fn delete(&mut self, key: impl Into<Bytes>) -> std::result::Result<(), BatchError> {
        let key = key.into();
        check(&key, &[])?;
        self.push(Op {
            kind: Kind::Delete,
            key,
            value: Bytes::new(),
        });
        Ok(())
    }

    fn push(&mut self, op: Op) {
        self.bytes += op.key.len() + op.value.len();
        self.ops.push(op);
    }

    /// The operations, in the order added (a later one on the same key wins).
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// Operations in the batch.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Bytes of keys and values.
    pub fn payload_bytes(&self) -> usize {
        self.bytes
    }

    /// Encodes the batch applied at sequence number `seq`: `seq` (u64), the operation count
    /// (u32), then per operation its kind (u8), key length (varint), key, and for a put the
    /// value length (varint) and value. Several batches of one group commit are encoded one
    /// after another into one WAL record.
    pub fn encode(&self, seq: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(&seq.to_le_bytes());
        out.extend_from_slice(&(self.ops.len() as u32).to_le_bytes());
        for op in &self.ops {
            out.push(op.kind as u8);
            varint::put(out, op.key.len() as u64);
            out.extend_from_slice(&op.key);
            if op.kind == Kind::Put {
                varint::put(out, op.value.len() as u64);
                out.extend_from_slice(&op.value);
            }
        }
    }

    /// Decodes the batches of one WAL record: `(seq, batch)` each, in order. The values share
    /// `record`'s memory.
    pub fn decode_all(record: &Bytes) -> Result<Vec<(u64, WriteBatch)>> {
        let mut at = 0;
        let mut out = Vec::new();
        while at < record.len() {
            let (seq, batch, next) = Self::decode_one(record, at)?;
            out.push((seq, batch));
            at = next;
        }
        Ok(out)
    }

    fn decode_one(record: &Bytes, start: usize) -> Result<(u64, WriteBatch, usize)> {
        let bad = |what: &str| CorruptionError::new(format!("write batch at byte {start}: {what}"));
        let fixed = |at: usize, n: usize| {
            record
                .get(at..at + n)
                .ok_or_else(|| bad("truncated header"))
        };
        let seq = u64::from_le_bytes(fixed(start, 8)?.try_into().unwrap());
        let count = u32::from_le_bytes(fixed(start + 8, 4)?.try_into().unwrap()) as u64;
        if seq.checked_add(count).is_none_or(|end| end > MAX_SEQ + 1) {
            return Err(bad(&format!(
                "{count} operations at sequence {seq} pass the limit"
            )));
        }
        let mut at = start + 12;
        let mut batch = WriteBatch::new();
        let bytes = |at: &mut usize, limit: usize, name: &str| -> Result<Bytes> {
            let (len, n) = varint::get(&record[(*at).min(record.len())..])
                .ok_or_else(|| bad(&format!("{name} length truncated")))?;
            let len = usize::try_from(len)
                .ok()
                .filter(|&l| l <= limit)
                .ok_or_else(|| bad(&format!("{name} length {len} over the limit")))?;
            let begin = *at + n;
            let end = begin
                .checked_add(len)
                .filter(|&e| e <= record.len())
                .ok_or_else(|| bad(&format!("{name} truncated")))?;
            *at = end;
            Ok(record.slice(begin..end))
        };
        for _ in 0..count {
            let kind = match record.get(at) {
                Some(0) => Kind::Delete,
                Some(1) => Kind::Put,
                Some(k) => return Err(bad(&format!("operation kind {k}"))),
                None => return Err(bad("truncated operation")),
            };
            at += 1;
            let key = bytes(&mut at, KEY_BYTES_MAX, "key")?;
            let value = if kind == Kind::Put {
                bytes(&mut at, VALUE_BYTES_MAX, "value")?
            } else {
                Bytes::new()
            };
            batch.push(Op { kind, key, value });
        }
        Ok((seq, batch, at))
    }
}

fn check(key: &[u8], value: &[u8]) -> std::result::Result<(), BatchError> {
    if key.len() > KEY_BYTES_MAX {
        return Err(BatchError::KeyTooLong(key.len()));
    }
    if value.len() > VALUE_BYTES_MAX {
        return Err(BatchError::ValueTooLong(value.len()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn known_bytes() {
        let mut b = WriteBatch::new();
        b.put(&b"k"[..], &b"vv"[..]).unwrap();
        b.delete(&b"d"[..]).unwrap();
        let mut out = Vec::new();
        b.encode(7, &mut out);
        #[rustfmt::skip]
        let want: Vec<u8> = [
            &[7u8, 0, 0, 0, 0, 0, 0, 0][..], &[2, 0, 0, 0],  // seq 7, 2 operations
            &[1, 1], b"k", &[2], b"vv",                       // put k -> vv
            &[0, 1], b"d",                                    // delete d
        ].concat();
        assert_eq!(out, want);
    }

    #[test]
    fn limits_are_clear_errors() {
        let mut b = WriteBatch::new();
        assert_eq!(
            b.put(vec![0u8; KEY_BYTES_MAX + 1], Bytes::new()),
            Err(BatchError::KeyTooLong(KEY_BYTES_MAX + 1))
        );
        assert_eq!(
            b.put(Bytes::new(), vec![0u8; VALUE_BYTES_MAX + 1])
                .unwrap_err()
                .to_string(),
            format!(
                "value of {} bytes is over the {VALUE_BYTES_MAX}-byte limit",
                VALUE_BYTES_MAX + 1
            )
        );
        assert!(b.is_empty());
    }

    fn arb_batch() -> impl Strategy<Value = WriteBatch> {
        proptest::collection::vec(
            (
                any::<bool>(),
                proptest::collection::vec(any::<u8>(), 0..10),
                proptest::collection::vec(any::<u8>(), 0..30),
            ),
            0..8,
        )
        .prop_map(|ops| {
            let mut b = WriteBatch::new();
            for (put, k, v) in ops {
                if put {
                    b.put(k, v).unwrap()
                } else {
                    b.delete(k).unwrap()
                }
            }
            b
        })
    }

    proptest! {
        #[test]
        fn round_trip_several_per_record(
            batches in proptest::collection::vec((0u64..1 << 40, arb_batch()), 0..5),
        ) {
            let mut rec = Vec::new();
            for (seq, b) in &batches {
                b.encode(*seq, &mut rec);
            }
            let got = WriteBatch::decode_all(&Bytes::from(rec)).unwrap();
            prop_assert_eq!(got, batches);
        }

        /// A cut or damaged record decodes to an error or to batches, never a panic (the WAL's
        /// CRC catches damage first; this is the decoder's own robustness).
        #[test]
        fn damaged_records_never_panic(
            b in arb_batch(),
            cut in any::<usize>(),
            flip in any::<(usize, u8)>(),
        ) {
            let mut rec = Vec::new();
            b.encode(1, &mut rec);
            let n = rec.len();
            rec[flip.0 % n] ^= flip.1;
            rec.truncate(cut % (n + 1));
            let _ = WriteBatch::decode_all(&Bytes::from(rec));
        }
    }
}
