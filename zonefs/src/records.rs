//! The journal's snapshot and delta records (payloads inside the zone log's record frame;
//! docs/format.md, "Zone file layer").

use crate::lifetime::WriteLifetime;
use crate::wire::{Reader, Writer};

/// Payload kind byte of a snapshot record.
pub const KIND_SNAPSHOT: u8 = 0x02;
/// Payload kind byte of a `Create` delta.
pub const KIND_CREATE: u8 = 0x10;
/// Payload kind byte of a `Sync` delta.
pub const KIND_SYNC: u8 = 0x11;
/// Payload kind byte of a `Delete` delta.
pub const KIND_DELETE: u8 = 0x12;
/// Payload kind byte of a `Rename` delta.
pub const KIND_RENAME: u8 = 0x13;
/// Payload kind byte of a `Relocate` delta (zone garbage collection).
pub const KIND_RELOCATE: u8 = 0x14;
/// Payload kind byte of a `BatchStart` mark (first record of every journal batch).
pub const KIND_BATCH_START: u8 = 0x15;

/// A run of a file's bytes in one data zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Extent {
    /// The zone index.
    pub zone: u32,
    /// Byte offset in the zone.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
}

/// A file as the journal knows it: its durable (synced) extents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// The file's id (never reused within a file system).
    pub id: u64,
    /// Its path (normalized).
    pub path: String,
    /// Its lifetime class.
    pub lifetime: WriteLifetime,
    /// Its synced extents, in file order.
    pub extents: Vec<Extent>,
}

/// The whole metadata at one point: the first record after a zone's superblock.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// The next file id to hand out.
    pub next_id: u64,
    /// Every file.
    pub files: Vec<FileEntry>,
}

/// One extent of a file moved by garbage collection: `from` (one of the file's extents) is
/// replaced, in place in the file's extent list, by `to` (same bytes, same total length).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    /// The file.
    pub id: u64,
    /// The extent moved out of the victim zone.
    pub from: Extent,
    /// Where its bytes are now, in order.
    pub to: Vec<Extent>,
}

/// One metadata change, journaled after the snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    /// A new, empty file.
    Create {
        /// Its id (the snapshot's `next_id` moves past it).
        id: u64,
        /// Its lifetime class.
        lifetime: WriteLifetime,
        /// Its path.
        path: String,
    },
    /// A file's size grew durably: these extents follow its synced ones.
    Sync {
        /// The file.
        id: u64,
        /// The extents appended.
        extents: Vec<Extent>,
    },
    /// A file is gone.
    Delete {
        /// The file.
        id: u64,
    },
    /// A file moves to `path`; a file already there is deleted.
    Rename {
        /// The file.
        id: u64,
        /// Its new path.
        path: String,
    },
    /// Garbage collection moved these synced extents (their old bytes are dead).
    Relocate {
        /// The moves, applied in order.
        moves: Vec<Move>,
    },
    /// Not a change: the first record of every journal batch. Every record before it in its
    /// zone was durable, with the file data its deltas name, when it was written (the batch
    /// before ended with the device cache flush), so only the extents of `Sync` deltas after
    /// the last mark may name data a crash lost ([`crate::MountReport::files_cut`]).
    BatchStart,
}

/// Why a payload is not a valid record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

fn put_extents(w: &mut Writer, extents: &[Extent]) {
    w.u32(u32::try_from(extents.len()).expect("extent count below 2^32"));
    for e in extents {
        w.u32(e.zone).u64(e.offset).u64(e.len);
    }
}

fn get_extents(r: &mut Reader<'_>) -> Option<Vec<Extent>> {
    let n = r.u32()? as usize;
    // Each extent is 20 bytes: a count the payload cannot hold is garbage.
    let mut out = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        out.push(Extent {
            zone: r.u32()?,
            offset: r.u64()?,
            len: r.u64()?,
        });
    }
    Some(out)
}

fn done<T>(r: &Reader<'_>, v: Option<T>, what: &str) -> Result<T, DecodeError> {
    match v {
        Some(v) if r.is_empty() => Ok(v),
        Some(_) => Err(DecodeError(format!("{what}: trailing bytes"))),
        None => Err(DecodeError(format!("{what}: truncated or invalid"))),
    }
}

impl Snapshot {
    /// The record payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(KIND_SNAPSHOT)
            .u64(self.next_id)
            .u32(u32::try_from(self.files.len()).expect("file count below 2^32"));
        for f in &self.files {
            w.u64(f.id).u8(f.lifetime.code()).str(&f.path);
            put_extents(&mut w, &f.extents);
        }
        w.0
    }

    /// Decodes a snapshot record payload.
    pub fn decode(payload: &[u8]) -> Result<Snapshot, DecodeError> {
        let mut r = Reader::new(payload);
        if r.u8() != Some(KIND_SNAPSHOT) {
            return Err(DecodeError("not a snapshot record".into()));
        }
        let snap = (|| {
            let next_id = r.u64()?;
            let n = r.u32()? as usize;
            let mut files = Vec::with_capacity(n.min(1 << 16));
            for _ in 0..n {
                let id = r.u64()?;
                let lifetime = WriteLifetime::from_code(r.u8()?)?;
                let path = r.str()?;
                let extents = get_extents(&mut r)?;
                files.push(FileEntry {
                    id,
                    path,
                    lifetime,
                    extents,
                });
            }
            Some(Snapshot { next_id, files })
        })();
        done(&r, snap, "snapshot")
    }
}

impl Delta {
    /// The record payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        match self {
            Delta::Create { id, lifetime, path } => {
                w.u8(KIND_CREATE).u64(*id).u8(lifetime.code()).str(path);
            }
            Delta::Sync { id, extents } => {
                w.u8(KIND_SYNC).u64(*id);
                put_extents(&mut w, extents);
            }
            Delta::Delete { id } => {
                w.u8(KIND_DELETE).u64(*id);
            }
            Delta::Rename { id, path } => {
                w.u8(KIND_RENAME).u64(*id).str(path);
            }
            Delta::BatchStart => {
                w.u8(KIND_BATCH_START);
            }
            Delta::Relocate { moves } => {
                w.u8(KIND_RELOCATE)
                    .u32(u32::try_from(moves.len()).expect("move count below 2^32"));
                for m in moves {
                    w.u64(m.id)
                        .u32(m.from.zone)
                        .u64(m.from.offset)
                        .u64(m.from.len);
                    put_extents(&mut w, &m.to);
                }
            }
        }
        w.0
    }

    /// Decodes a delta record payload.
    pub fn decode(payload: &[u8]) -> Result<Delta, DecodeError> {
        let mut r = Reader::new(payload);
        let kind = r.u8();
        let delta = (|| match kind? {
            KIND_CREATE => Some(Delta::Create {
                id: r.u64()?,
                lifetime: WriteLifetime::from_code(r.u8()?)?,
                path: r.str()?,
            }),
            KIND_SYNC => Some(Delta::Sync {
                id: r.u64()?,
                extents: get_extents(&mut r)?,
            }),
            KIND_DELETE => Some(Delta::Delete { id: r.u64()? }),
            KIND_BATCH_START => Some(Delta::BatchStart),
            KIND_RENAME => Some(Delta::Rename {
                id: r.u64()?,
                path: r.str()?,
            }),
            KIND_RELOCATE => {
                let n = r.u32()? as usize;
                let mut moves = Vec::with_capacity(n.min(1 << 16));
                for _ in 0..n {
                    moves.push(Move {
                        id: r.u64()?,
                        from: Extent {
                            zone: r.u32()?,
                            offset: r.u64()?,
                            len: r.u64()?,
                        },
                        to: get_extents(&mut r)?,
                    });
                }
                Some(Delta::Relocate { moves })
            }
            _ => None,
        })();
        done(&r, delta, "delta")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn extent() -> impl Strategy<Value = Extent> {
        (any::<u32>(), any::<u64>(), any::<u64>()).prop_map(|(zone, offset, len)| Extent {
            zone,
            offset,
            len,
        })
    }

    fn lifetime() -> impl Strategy<Value = WriteLifetime> {
        (0u8..7).prop_map(|c| WriteLifetime::from_code(c).unwrap())
    }

    fn delta() -> impl Strategy<Value = Delta> {
        prop_oneof![
            (any::<u64>(), lifetime(), "[a-z/]{0,40}")
                .prop_map(|(id, lifetime, path)| Delta::Create { id, lifetime, path }),
            (any::<u64>(), proptest::collection::vec(extent(), 0..5))
                .prop_map(|(id, extents)| Delta::Sync { id, extents }),
            any::<u64>().prop_map(|id| Delta::Delete { id }),
            Just(Delta::BatchStart),
            (any::<u64>(), "[a-z/]{0,40}").prop_map(|(id, path)| Delta::Rename { id, path }),
            proptest::collection::vec(
                (
                    any::<u64>(),
                    extent(),
                    proptest::collection::vec(extent(), 0..3)
                ),
                0..4
            )
            .prop_map(|m| Delta::Relocate {
                moves: m
                    .into_iter()
                    .map(|(id, from, to)| Move { id, from, to })
                    .collect()
            }),
        ]
    }

    proptest! {
        #[test]
        fn deltas_round_trip(d in delta()) {
            let bytes = d.encode();
            prop_assert_eq!(Delta::decode(&bytes), Ok(d));
            // Any cut is an error, never a different delta.
            for cut in 0..bytes.len() {
                prop_assert!(Delta::decode(&bytes[..cut]).is_err());
            }
        }

        #[test]
        fn snapshots_round_trip(
            next_id in any::<u64>(),
            files in proptest::collection::vec(
                (any::<u64>(), "[a-z/]{1,30}", lifetime(), proptest::collection::vec(extent(), 0..4)),
                0..6,
            ),
        ) {
            let snap = Snapshot {
                next_id,
                files: files
                    .into_iter()
                    .map(|(id, path, lifetime, extents)| FileEntry { id, path, lifetime, extents })
                    .collect(),
            };
            let bytes = snap.encode();
            prop_assert_eq!(Snapshot::decode(&bytes), Ok(snap));
            for cut in 0..bytes.len() {
                prop_assert!(Snapshot::decode(&bytes[..cut]).is_err());
            }
        }
    }

    #[test]
    fn delta_bytes_are_as_documented() {
        let d = Delta::Sync {
            id: 3,
            extents: vec![Extent {
                zone: 5,
                offset: 4096,
                len: 10,
            }],
        };
        let mut want = vec![0x11];
        want.extend_from_slice(&3u64.to_le_bytes());
        want.extend_from_slice(&1u32.to_le_bytes());
        want.extend_from_slice(&5u32.to_le_bytes());
        want.extend_from_slice(&4096u64.to_le_bytes());
        want.extend_from_slice(&10u64.to_le_bytes());
        assert_eq!(d.encode(), want);
        let c = Delta::Create {
            id: 1,
            lifetime: WriteLifetime::Wal,
            path: "a".into(),
        };
        assert_eq!(c.encode(), [0x10, 1, 0, 0, 0, 0, 0, 0, 0, 6, 1, 0, b'a']);
        let m = Delta::Relocate {
            moves: vec![Move {
                id: 2,
                from: Extent {
                    zone: 4,
                    offset: 0,
                    len: 6,
                },
                to: vec![Extent {
                    zone: 9,
                    offset: 8192,
                    len: 6,
                }],
            }],
        };
        let mut want = vec![0x14];
        want.extend_from_slice(&1u32.to_le_bytes());
        want.extend_from_slice(&2u64.to_le_bytes());
        want.extend_from_slice(&4u32.to_le_bytes());
        want.extend_from_slice(&0u64.to_le_bytes());
        want.extend_from_slice(&6u64.to_le_bytes());
        want.extend_from_slice(&1u32.to_le_bytes());
        want.extend_from_slice(&9u32.to_le_bytes());
        want.extend_from_slice(&8192u64.to_le_bytes());
        want.extend_from_slice(&6u64.to_le_bytes());
        assert_eq!(m.encode(), want);
        assert!(Delta::decode(&[0x7f]).is_err());
        assert!(Snapshot::decode(&[0x10]).is_err());
    }
}
