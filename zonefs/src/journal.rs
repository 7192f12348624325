//! The metadata journal in the reserved zones `0..journal_zones`: each journal zone holds a
//! superblock record, a snapshot record, then delta records, all in the zone log's record
//! frame (`ziob::zonelog::encode_record` / `decode_at`). One zone is current; when a delta
//! does not fit it, the next zone (round robin) is reset and gets a fresh superblock
//! (generation + 1) and snapshot. Mount reads every journal zone and takes the newest one
//! whose superblock and snapshot are valid, replaying its deltas up to the first torn or
//! corrupt record.

use bytes::{Bytes, BytesMut};
use ziob::zonelog::{decode_at, encode_record, Decoded};
use ziob::{Client, ZoneInfo, ZoneState};

use crate::error::{FsError, Result};
use crate::layout::Layout;
use crate::records::{Delta, Extent, Snapshot};
use crate::superblock::{Superblock, SuperblockError};
use crate::tree::Tree;

/// The smallest and largest number of reserved journal zones.
pub const JOURNAL_ZONES_RANGE: std::ops::RangeInclusive<u32> = 2..=16;

/// The journal as mounted: which zone is current and how far it is written.
#[derive(Debug, Clone)]
pub struct Journal {
    /// Reserved zones `0..zones`.
    pub zones: u32,
    /// The zone deltas go to.
    pub current: u32,
    /// Bytes written to it (its write pointer as far as the journal knows).
    pub written: u64,
    /// The current zone's superblock generation.
    pub generation: u64,
    /// Bytes this journal wrote since the mount (records and padding, over every zone).
    pub appended: u64,
}

/// What one journal zone holds, read back.
#[derive(Debug)]
pub struct ZoneContents {
    /// Its superblock.
    pub superblock: Superblock,
    /// The tree after its snapshot and deltas.
    pub tree: Tree,
    /// Deltas replayed.
    pub deltas: usize,
    /// Why replay stopped before the zone's write pointer, if it did.
    pub cut: Option<String>,
    /// The extents (with their file ids) that `Sync` deltas after the last
    /// [`Delta::BatchStart`] mark added: the last batch, whose device flush a crash may have
    /// cut off, so their data may be lost (the batches before it, and the snapshot, name
    /// durable data only).
    pub unconfirmed: Vec<(u64, Extent)>,
}

/// What reading one journal zone found.
#[derive(Debug)]
pub enum ZoneRead {
    /// The zone is empty.
    Empty,
    /// The zone starts with something else.
    Foreign(String),
    /// A zonefs superblock that is not usable (version, fields).
    Invalid(String),
    /// A superblock whose snapshot is missing or runs past the zone's data: a roll that did
    /// not complete (the zone is ignored).
    NoSnapshot(Superblock, String),
    /// A superblock whose snapshot is there but corrupt (checksum, contents): damage, not an
    /// interrupted roll.
    Damaged(Superblock, String),
    /// A usable journal zone.
    Valid(Box<ZoneContents>),
}

/// What [`read_zone`] reads first of a Full journal zone; it reads four times as much while
/// the zone's records go on past what it read.
const FULL_ZONE_FIRST_READ_BYTES: u64 = 1 << 20;

/// Reads and decodes journal zone `zone` as the device reports it. An open zone is read up
/// to its write pointer. A Full zone's write pointer is its capacity however little was
/// written before it was finished (a journal zone is finished when the journal rolls on),
/// so only the part holding records is read: reading it whole read — and allocated — a
/// zone of zeros (64 MiB on `emu`'s default geometry) at every mount.
pub async fn read_zone(client: &Client, layout: &Layout, zone: &ZoneInfo) -> Result<ZoneRead> {
    let wp = zone.write_pointer_bytes;
    if wp == 0 {
        return Ok(ZoneRead::Empty);
    }
    let block = layout.block();
    let mut n = if zone.state == ZoneState::Full {
        wp.min(FULL_ZONE_FIRST_READ_BYTES)
    } else {
        wp
    };
    let first = client.read(zone.index, 0, n as usize).await?;
    // Where the walk over what was read stopped: the next read's walk goes on from there.
    let mut walked = 0;
    if n == wp || records_end_within(&first, &mut walked, wp, block) {
        return Ok(decode_zone(&first, wp, block));
    }
    // Each byte is read once: the next pieces go after the first.
    let mut data = BytesMut::with_capacity(n.saturating_mul(4).min(wp) as usize);
    data.extend_from_slice(&first);
    loop {
        let next = n.saturating_mul(4).min(wp);
        data.extend_from_slice(&client.read(zone.index, n, (next - n) as usize).await?);
        n = next;
        if n == wp || records_end_within(&data, &mut walked, wp, block) {
            return Ok(decode_zone(&data, wp, block));
        }
    }
}

/// Whether the records of a zone written up to `wp` end (or turn out torn or corrupt)
/// within `prefix`, its first bytes: then decoding `prefix` alone gives what decoding the
/// zone up to `wp` would (the walk stops at the same byte). The walk starts at `*from` (a
/// record boundary an earlier walk over a shorter prefix reached) and leaves there the
/// boundary it reached, so a longer prefix is not walked again from the start.
fn records_end_within(prefix: &[u8], from: &mut u64, wp: u64, block: u64) -> bool {
    loop {
        match decode_at(prefix, 0, *from, wp, block) {
            Decoded::Record { next, .. } | Decoded::Padding { next } => *from = next,
            Decoded::NeedMore { .. } => return false,
            Decoded::End | Decoded::Torn { .. } | Decoded::Corrupt { .. } => return true,
        }
    }
}

/// Decodes the bytes of a journal zone written up to `end` (its write pointer): `data` = its
/// bytes from the start, all of them up to `end` or a prefix in which its records end
/// ([`records_end_within`]).
pub fn decode_zone(data: &[u8], end: u64, block: u64) -> ZoneRead {
    let mut at = 0u64;
    // The next record, skipping padding.
    let next = |at: &mut u64| -> std::result::Result<Option<std::ops::Range<usize>>, String> {
        loop {
            match decode_at(data, 0, *at, end, block) {
                Decoded::Record { payload, next } => {
                    *at = next;
                    return Ok(Some(payload));
                }
                Decoded::Padding { next } => *at = next,
                Decoded::End => return Ok(None),
                Decoded::NeedMore { .. } => {
                    unreachable!("the window holds every record (read_zone)")
                }
                Decoded::Torn { reason } | Decoded::Corrupt { reason } => return Err(reason),
            }
        }
    };
    let sb = match next(&mut at) {
        Ok(Some(p)) => match Superblock::decode(&data[p]) {
            Ok(sb) => sb,
            Err(SuperblockError::Foreign) => {
                return ZoneRead::Foreign("the first record is not a zonefs superblock".into())
            }
            Err(SuperblockError::Invalid(why)) => return ZoneRead::Invalid(why),
        },
        Ok(None) => return ZoneRead::Foreign("zeros at the start of a written zone".into()),
        Err(why) => return ZoneRead::Foreign(format!("no record at the start: {why}")),
    };
    let snapshot = match decode_at(data, 0, at, end, block) {
        Decoded::Torn { reason } => return ZoneRead::NoSnapshot(sb, reason),
        _ => match next(&mut at) {
            Ok(Some(p)) => Snapshot::decode(&data[p]).map_err(|e| e.0),
            Ok(None) => return ZoneRead::NoSnapshot(sb, "no snapshot record".into()),
            Err(why) => Err(why),
        },
    };
    let mut tree = match snapshot.and_then(|s| Tree::from_snapshot(&s).map_err(|e| e.0)) {
        Ok(t) => t,
        Err(why) => return ZoneRead::Damaged(sb, why),
    };
    let mut deltas = 0;
    let mut unconfirmed = Vec::new();
    let cut = loop {
        match next(&mut at) {
            Ok(None) => break None,
            Ok(Some(p)) => {
                let applied = Delta::decode(&data[p])
                    .map_err(|e| e.0)
                    .and_then(|d| tree.apply(&d).map(|_| d).map_err(|e| e.0));
                match applied {
                    Ok(Delta::BatchStart) => unconfirmed.clear(),
                    Ok(d) => {
                        // Version 1 journals have no marks: their records name flushed data.
                        if let (Delta::Sync { id, extents }, true) = (d, sb.version >= 2) {
                            unconfirmed.extend(extents.into_iter().map(|e| (id, e)));
                        }
                        deltas += 1;
                    }
                    Err(why) => break Some(format!("delta at byte {at}: {why}")),
                }
            }
            Err(why) => break Some(why),
        }
    };
    ZoneRead::Valid(Box::new(ZoneContents {
        superblock: sb,
        tree,
        deltas,
        cut,
        unconfirmed,
    }))
}

/// Frames `payloads` as records; padded to whole blocks when the layout says so.
pub fn frame(layout: &Layout, payloads: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in payloads {
        encode_record(&mut out, p);
    }
    if layout.whole_blocks {
        out.resize(layout.footprint(out.len() as u64) as usize, 0);
    }
    out
}

/// Appends `bytes` to `zone` (in pieces of at most the largest append when appends must be
/// whole blocks); returns the end offset.
async fn append_all(client: &Client, layout: &Layout, zone: u32, bytes: Vec<u8>) -> Result<u64> {
    let bytes = Bytes::from(bytes);
    if !layout.whole_blocks {
        let len = bytes.len() as u64;
        return Ok(client.append(zone, bytes).await? + len);
    }
    let step = (layout.max_append_bytes / layout.block() * layout.block()) as usize;
    let mut end = 0;
    for start in (0..bytes.len()).step_by(step) {
        let piece = bytes.slice(start..(start + step).min(bytes.len()));
        let len = piece.len() as u64;
        end = client.append(zone, piece).await? + len;
    }
    Ok(end)
}

/// Writes journal zone `zone` back and flushes the device's cache. The cache flush (never a
/// Force-Unit-Access write of the journal alone) also makes durable every data-zone
/// write-back that completed before it: a sync writes its data zones back without flushing
/// and counts on the commit of its delta for durability (one device flush per sync).
async fn make_durable(client: &Client, zone: u32) -> Result<()> {
    client.write_back(zone).await?;
    client.flush_device().await?;
    Ok(())
}

impl Journal {
    /// Writes a fresh journal zone `zone` (reset first): superblock of `generation` and the
    /// snapshot of `tree`, flushed. Returns the journal with that zone current.
    pub async fn write_fresh(
        client: &Client,
        layout: &Layout,
        zones: u32,
        zone: u32,
        generation: u64,
        tree: &Tree,
    ) -> Result<Journal> {
        let reserved = u16::try_from(layout.reserved_active).expect("checked by mkfs");
        let sb = Superblock::for_geometry(&layout.geometry, zones, reserved, generation).encode();
        let snap = tree.snapshot().encode();
        let bytes = frame(layout, &[&sb, &snap]);
        if bytes.len() as u64 > layout.capacity() {
            return Err(FsError::NoSpace(format!(
                "the metadata snapshot ({} bytes) does not fit one journal zone ({} bytes)",
                bytes.len(),
                layout.capacity()
            )));
        }
        client.reset(zone).await?;
        // The snapshot names the data of syncs whose batch was not written (a roll takes
        // it): their write-backs completed, and this flush makes them durable before a
        // record names them, so a snapshot never names data a crash can lose.
        client.flush_device().await?;
        let end = append_all(client, layout, zone, bytes).await?;
        make_durable(client, zone).await?;
        // A write-back pads the partial block: the next record starts at a block boundary.
        let written = end.div_ceil(layout.block()) * layout.block();
        Ok(Journal {
            zones,
            current: zone,
            written,
            generation,
            appended: written,
        })
    }

    /// Moves to the next journal zone with a fresh snapshot of `tree`. The current zone is
    /// finished first (its data stays valid until the new zone is complete, and only one
    /// journal zone is active at a time).
    pub async fn roll(&mut self, client: &Client, layout: &Layout, tree: &Tree) -> Result<()> {
        let info = client.report(self.current, 1).await?;
        if info.first().is_some_and(|z| z.state != ZoneState::Full) {
            client.finish(self.current).await?;
        }
        let next = (self.current + 1) % self.zones;
        let before = self.appended;
        *self = Journal::write_fresh(client, layout, self.zones, next, self.generation + 1, tree)
            .await?;
        self.appended += before;
        Ok(())
    }

    /// Whether `len` more bytes (a framed batch) fit the current zone.
    pub fn fits(&self, layout: &Layout, len: u64) -> bool {
        self.written + len <= layout.capacity()
    }

    /// Appends a framed batch of records to the current zone and flushes the device's cache
    /// (the batch durable when this returns, with every write-back completed before). The
    /// caller checked [`fits`](Journal::fits).
    pub async fn append_batch(
        &mut self,
        client: &Client,
        layout: &Layout,
        bytes: Vec<u8>,
    ) -> Result<()> {
        let end = append_all(client, layout, self.current, bytes).await?;
        make_durable(client, self.current).await?;
        // A write-back pads the partial block: the next record starts at a block boundary.
        let end = end.div_ceil(layout.block()) * layout.block();
        self.appended += end.saturating_sub(self.written);
        self.written = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use ziob::zonelog::{decode_at, encode_record, Decoded};

    use super::{decode_zone, records_end_within};

    const BLOCK: u64 = 512;

    /// What walking a zone's records from its start meets, up to where the walk stops.
    fn walk(window: &[u8], wp: u64) -> Vec<Decoded> {
        let mut at = 0;
        let mut seen = Vec::new();
        loop {
            let d = decode_at(window, 0, at, wp, BLOCK);
            seen.push(d.clone());
            match d {
                Decoded::Record { next, .. } | Decoded::Padding { next } => at = next,
                _ => return seen,
            }
        }
    }

    proptest! {
        /// Whenever `records_end_within` says a prefix of a zone holds all its records, the
        /// walk over the prefix meets what the walk over the zone up to its write pointer
        /// meets, and `decode_zone` decodes both alike: records of any length, zero padding
        /// to a block after some, zeros up to the write pointer (a finished zone), a damaged
        /// byte or a write pointer inside the last record (torn), and every prefix length
        /// around each record's edges.
        #[test]
        fn a_prefix_holding_every_record_decodes_as_the_whole_zone(
            lens in prop::collection::vec(0usize..1500, 0..10),
            pads in prop::collection::vec(any::<bool>(), 10),
            flip in prop::option::of(any::<prop::sample::Index>()),
            torn in prop::option::of(any::<prop::sample::Index>()),
            zero_blocks in 0u64..4,
        ) {
            let mut img = Vec::new();
            let mut edges = vec![0usize];
            for (i, len) in lens.iter().enumerate() {
                let payload: Vec<u8> = (0..*len).map(|j| (i * 31 + j) as u8 | 1).collect();
                encode_record(&mut img, &payload);
                edges.push(img.len());
                if pads[i] {
                    img.resize((img.len() as u64).div_ceil(BLOCK) as usize * BLOCK as usize, 0);
                    edges.push(img.len());
                }
            }
            if let (Some(f), false) = (flip, img.is_empty()) {
                let at = f.index(img.len());
                img[at] ^= 0x40;
            }
            let mut wp = img.len() as u64 + zero_blocks * BLOCK;
            if let (Some(t), false) = (torn, img.is_empty()) {
                wp = t.index(img.len()) as u64;
            }
            img.resize(img.len().max(wp as usize), 0);
            let whole = &img[..wp as usize];
            let mut prefixes: Vec<usize> = edges
                .iter()
                .flat_map(|&e| [e.saturating_sub(1), e, e + 1, e + 12, e + 13])
                .chain([wp as usize])
                .filter(|&n| n > 0 && n <= wp as usize)
                .collect();
            prefixes.sort_unstable();
            prefixes.dedup();
            // A walk resumed where the walk over a shorter prefix stopped (as `read_zone`
            // does) answers as one from the start.
            let mut walked = 0;
            for n in prefixes {
                let resumed = records_end_within(&img[..n], &mut walked, wp, BLOCK);
                prop_assert_eq!(
                    resumed,
                    records_end_within(&img[..n], &mut 0, wp, BLOCK),
                    "prefix {}", n
                );
                if resumed {
                    prop_assert_eq!(walk(&img[..n], wp), walk(whole, wp), "prefix {}", n);
                    prop_assert_eq!(
                        format!("{:?}", decode_zone(&img[..n], wp, BLOCK)),
                        format!("{:?}", decode_zone(whole, wp, BLOCK)),
                        "prefix {}", n
                    );
                } else {
                    // Not enough: the walk over the prefix needs bytes past it.
                    let last = walk(&img[..n], wp).pop();
                    let needs_more = matches!(last, Some(Decoded::NeedMore { .. }));
                    prop_assert!(needs_more, "prefix {}", n);
                }
            }
        }
    }
}
