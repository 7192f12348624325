//! The CRC-32C of each zone's completed writes since the last zone-table write, so that a
//! flush can write the table with one `fdatasync` (data and table made durable together):
//! the table then carries, per zone whose data grew, the check of the grown range, and an
//! open that finds the range's data not matching knows the flush never completed (see
//! `docs/format.md`, "Write ordering and crash semantics").

use std::collections::BTreeMap;

use crate::emu::format::{DataCheck, CHECK_BLOCKS_MAX};

/// Writes longer than this get no checksum (computing it would cost more than the second
/// `fdatasync` it saves); a flush whose table would have to cover one uses two.
pub(crate) const CHECKED_WRITE_BYTES_MAX: u64 = 64 << 10;

/// Most records kept per zone: a zone written in more short writes than this between two
/// tables gets no check (its records are dropped until the next table covers the zone).
const RECORDS_PER_ZONE_MAX: usize = 256;

/// Zeros to extend a CRC over (see [`combine`]).
static ZEROS: [u8; CHECKED_WRITE_BYTES_MAX as usize] = [0; CHECKED_WRITE_BYTES_MAX as usize];

/// The CRC-32C of `a ++ b` from `crc(a)`, `crc(b)` and `b`'s length, with the hardware CRC:
/// CRC-32C is affine, so `crc(a ++ b) = crc(b) ^ r`, where `r` is the raw register `crc(a)`
/// becomes over `len_b` zero bytes, which is `!append(!crc(a), zeros)`. (The crate's
/// `crc32c_combine` does the same with GF(2) matrices: about 14 µs a call, against 0.25 µs
/// for 4 KiB here.)
fn combine(crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
    let mut register = !crc_a;
    let mut left = len_b;
    while left > 0 {
        let n = left.min(ZEROS.len() as u64) as usize;
        register = crc32c::crc32c_append(register, &ZEROS[..n]);
        left -= n as u64;
    }
    crc_b ^ !register
}

/// A completed write: its length and the CRC-32C of its data (`None`: too long to check).
#[derive(Debug, Clone, Copy)]
struct Written {
    len_bytes: u64,
    crc32c: Option<u32>,
}

/// The records of one zone.
#[derive(Debug, Clone, Default)]
struct ZoneRecords {
    /// Completed writes by offset. A write that failed and was written again at the same
    /// offset replaces the old record; records a walk never reaches are dropped when a table
    /// covers them.
    by_offset: BTreeMap<u64, Written>,
    /// More than [`RECORDS_PER_ZONE_MAX`] writes since the last table: nothing is recorded
    /// until the next table covers the zone.
    overflowed: bool,
}

/// Per zone, the completed writes not yet below the write pointer of the last table written.
pub(crate) struct DataChecks {
    zones: Vec<ZoneRecords>,
}

/// The writes that tile a zone's range, in order: lengths and checksums, folded into a
/// [`DataCheck`] by [`Tiling::fold`] (outside the device's lock: it costs a CRC pass over
/// zeros as long as the range).
#[derive(Debug)]
pub(crate) struct Tiling {
    blocks: u32,
    writes: Vec<(u64, u32)>,
}

impl Tiling {
    /// The check of the range.
    pub(crate) fn fold(&self) -> DataCheck {
        let mut writes = self.writes.iter();
        let first = writes.next().map_or(0, |&(_, crc)| crc);
        let crc32c = writes.fold(first, |crc, &(len, next)| combine(crc, next, len));
        DataCheck {
            blocks: self.blocks,
            crc32c,
        }
    }
}

impl DataChecks {
    /// No records, for `zone_count` zones.
    pub(crate) fn new(zone_count: u32) -> DataChecks {
        DataChecks {
            zones: vec![ZoneRecords::default(); zone_count as usize],
        }
    }

    /// The checksum a write of `data` gets, if it is short enough to have one.
    pub(crate) fn checksum(data: &[u8]) -> Option<u32> {
        (data.len() as u64 <= CHECKED_WRITE_BYTES_MAX).then(|| crc32c::crc32c(data))
    }

    /// Records a write of `zone` whose transfer succeeded (call before the zone table counts
    /// it as complete, so a table that covers it finds its record).
    pub(crate) fn record(
        &mut self,
        zone: u32,
        offset_bytes: u64,
        len_bytes: u64,
        crc32c: Option<u32>,
    ) {
        let Some(z) = self.zones.get_mut(zone as usize) else {
            return;
        };
        if z.overflowed {
            return;
        }
        z.by_offset
            .insert(offset_bytes, Written { len_bytes, crc32c });
        if z.by_offset.len() > RECORDS_PER_ZONE_MAX {
            z.by_offset.clear();
            z.overflowed = true;
        }
    }

    /// The writes that tile `zone`'s bytes `from..to` exactly, or `None` if one of them has
    /// no checksum or was not recorded, or the range is empty or longer than a check covers.
    pub(crate) fn tiling(&self, zone: u32, from: u64, to: u64, block_bytes: u64) -> Option<Tiling> {
        let records = &self.zones.get(zone as usize)?.by_offset;
        if from >= to || (to - from) / block_bytes > u64::from(CHECK_BLOCKS_MAX) {
            return None;
        }
        let mut writes = Vec::new();
        let mut at = from;
        while at < to {
            let w = records.get(&at)?;
            writes.push((w.len_bytes, w.crc32c?));
            at += w.len_bytes;
        }
        (at == to).then_some(Tiling {
            blocks: ((to - from) / block_bytes) as u32,
            writes,
        })
    }

    /// After a table that stored `zone` with `written_bytes` was made durable: forgets the
    /// records below it (all of them if the zone was reset) and starts recording again.
    pub(crate) fn persisted(&mut self, zone: u32, written_bytes: u64, reset: bool) {
        let Some(z) = self.zones.get_mut(zone as usize) else {
            return;
        };
        z.overflowed = false;
        if reset {
            z.by_offset.clear();
        } else {
            z.by_offset = z.by_offset.split_off(&written_bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combine_agrees_with_the_crc_of_the_concatenation() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for (a, b) in [
            (0, 1),
            (1, 4096),
            (4096, 8192),
            (100, 150_000),
            (70_000, 200_000),
        ] {
            let (x, y) = (&data[..a], &data[a..b]);
            let want = crc32c::crc32c(&data[..b]);
            let got = combine(crc32c::crc32c(x), crc32c::crc32c(y), y.len() as u64);
            assert_eq!(got, want, "split at {a} of {b}");
            assert_eq!(
                got,
                crc32c::crc32c_combine(crc32c::crc32c(x), crc32c::crc32c(y), y.len())
            );
        }
    }

    #[test]
    fn a_check_combines_the_writes_that_tile_the_range() {
        let data: Vec<u8> = (0..12288u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut c = DataChecks::new(2);
        c.record(1, 4096, 4096, DataChecks::checksum(&data[..4096]));
        c.record(1, 8192, 8192, DataChecks::checksum(&data[4096..]));
        let check =
            |c: &DataChecks, zone, from, to| c.tiling(zone, from, to, 4096).map(|t| t.fold());
        let want = DataCheck {
            blocks: 3,
            crc32c: crc32c::crc32c(&data),
        };
        assert_eq!(check(&c, 1, 4096, 16384), Some(want));
        assert_eq!(check(&c, 1, 4096, 8192).unwrap().blocks, 1);
        // Not on a record's boundary, a gap, the other zone, an empty range: no check.
        assert_eq!(check(&c, 1, 4096, 12288), None);
        assert_eq!(check(&c, 1, 0, 16384), None);
        assert_eq!(check(&c, 0, 4096, 16384), None);
        assert_eq!(check(&c, 1, 4096, 4096), None);
        c.persisted(1, 8192, false);
        assert_eq!(check(&c, 1, 4096, 8192), None);
        assert!(check(&c, 1, 8192, 16384).is_some());
        c.persisted(1, 0, true);
        assert_eq!(check(&c, 1, 8192, 16384), None);
    }

    #[test]
    fn a_rewrite_replaces_the_record_and_long_writes_have_none() {
        let mut c = DataChecks::new(1);
        c.record(0, 0, 8192, Some(1));
        c.record(0, 0, 4096, DataChecks::checksum(&[0u8; 4096]));
        c.record(0, 4096, 4096, DataChecks::checksum(&[1u8; 4096]));
        let mut both = vec![0u8; 4096];
        both.extend_from_slice(&[1u8; 4096]);
        assert_eq!(
            c.tiling(0, 0, 8192, 4096).unwrap().fold().crc32c,
            crc32c::crc32c(&both)
        );
        let long = vec![0u8; CHECKED_WRITE_BYTES_MAX as usize + 4096];
        assert_eq!(DataChecks::checksum(&long), None);
        c.record(0, 8192, long.len() as u64, None);
        assert!(c.tiling(0, 0, 8192 + long.len() as u64, 4096).is_none());
    }

    #[test]
    fn a_zone_with_too_many_writes_has_no_check_until_a_table_covers_it() {
        let mut c = DataChecks::new(1);
        let block = DataChecks::checksum(&[3u8; 512]);
        for i in 0..=RECORDS_PER_ZONE_MAX as u64 {
            c.record(0, i * 512, 512, block);
        }
        assert!(c.zones[0].by_offset.is_empty(), "records dropped");
        c.record(0, 1 << 20, 512, block);
        assert!(
            c.zones[0].by_offset.is_empty(),
            "nothing recorded meanwhile"
        );
        assert!(c.tiling(0, 0, 512, 512).is_none());
        c.persisted(0, 1 << 20, false);
        c.record(0, 1 << 20, 512, block);
        assert!(c.tiling(0, 1 << 20, (1 << 20) + 512, 512).is_some());
    }
}
