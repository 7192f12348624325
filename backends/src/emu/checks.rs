//! The CRC-32C of each zone's completed writes since the last zone-table write, so that a
//! flush can write the table with one `fdatasync` (data and table made durable together):
//! the table then carries, per zone whose data grew, the check of the grown range, and an
//! open that finds the range's data not matching knows the flush never completed (see
//! `docs/format.md`, "Write ordering and crash semantics").

use std::collections::BTreeMap;

use crate::emu::format::{DataCheck, CHECK_BLOCKS_MAX};

/// Writes longer than this get no checksum (computing it would cost more than the second
/// `fdatasync` it saves); a flush whose tables would have to cover one uses two.
pub(crate) const CHECKED_WRITE_BYTES_MAX: u64 = 64 << 10;

/// Most bytes one table checks: bounds what an open reads to verify it.
pub(crate) const CHECKED_TABLE_BYTES_MAX: u64 = 1 << 20;

/// A completed write: its length and the CRC-32C of its data (`None`: too long to check).
#[derive(Debug, Clone, Copy)]
struct Written {
    len_bytes: u64,
    crc32c: Option<u32>,
}

/// Per zone, the completed writes not yet below the write pointer of the last table written,
/// by offset. A write that failed and was written again at the same offset replaces the old
/// record; records the walk from the table's write pointer never reaches are dropped when a
/// table covers them.
pub(crate) struct DataChecks {
    zones: Vec<BTreeMap<u64, Written>>,
}

impl DataChecks {
    /// No records, for `zone_count` zones.
    pub(crate) fn new(zone_count: u32) -> DataChecks {
        DataChecks {
            zones: vec![BTreeMap::new(); zone_count as usize],
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
        if let Some(z) = self.zones.get_mut(zone as usize) {
            z.insert(offset_bytes, Written { len_bytes, crc32c });
        }
    }

    /// The check of `zone`'s bytes `from..to` (written by completed writes that tile it
    /// exactly), or `None` if a write in it has no checksum or the range is too long.
    pub(crate) fn check(
        &self,
        zone: u32,
        from: u64,
        to: u64,
        block_bytes: u64,
    ) -> Option<DataCheck> {
        let records = self.zones.get(zone as usize)?;
        let blocks = (to - from) / block_bytes;
        if from >= to || blocks > u64::from(CHECK_BLOCKS_MAX) {
            return None;
        }
        let mut at = from;
        let mut crc = 0u32;
        while at < to {
            let w = records.get(&at)?;
            crc = crc32c::crc32c_combine(crc, w.crc32c?, w.len_bytes as usize);
            at += w.len_bytes;
        }
        (at == to).then_some(DataCheck {
            blocks: blocks as u32,
            crc32c: crc,
        })
    }

    /// After a table that stored `zone` with `written_bytes` was made durable: forgets the
    /// records below it (all of them if the zone was reset).
    pub(crate) fn persisted(&mut self, zone: u32, written_bytes: u64, reset: bool) {
        let Some(z) = self.zones.get_mut(zone as usize) else {
            return;
        };
        if reset {
            z.clear();
        } else {
            *z = z.split_off(&written_bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_combines_the_writes_that_tile_the_range() {
        let data: Vec<u8> = (0..12288u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut c = DataChecks::new(2);
        c.record(1, 4096, 4096, DataChecks::checksum(&data[..4096]));
        c.record(1, 8192, 8192, DataChecks::checksum(&data[4096..]));
        let want = DataCheck {
            blocks: 3,
            crc32c: crc32c::crc32c(&data),
        };
        assert_eq!(c.check(1, 4096, 16384, 4096), Some(want));
        assert_eq!(c.check(1, 4096, 8192, 4096).unwrap().blocks, 1);
        // Not on a record's boundary, a gap, the other zone, an empty range: no check.
        assert_eq!(c.check(1, 4096, 12288, 4096), None);
        assert_eq!(c.check(1, 0, 16384, 4096), None);
        assert_eq!(c.check(0, 4096, 16384, 4096), None);
        assert_eq!(c.check(1, 4096, 4096, 4096), None);
        c.persisted(1, 8192, false);
        assert_eq!(c.check(1, 4096, 8192, 4096), None);
        assert!(c.check(1, 8192, 16384, 4096).is_some());
        c.persisted(1, 0, true);
        assert_eq!(c.check(1, 8192, 16384, 4096), None);
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
            c.check(0, 0, 8192, 4096).unwrap().crc32c,
            crc32c::crc32c(&both)
        );
        let long = vec![0u8; CHECKED_WRITE_BYTES_MAX as usize + 4096];
        assert_eq!(DataChecks::checksum(&long), None);
        c.record(0, 8192, long.len() as u64, None);
        assert_eq!(c.check(0, 0, 8192 + long.len() as u64, 4096), None);
    }
}
