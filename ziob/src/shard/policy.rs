//! Write-back decisions as pure functions of a zone's buffer (mechanism lives in `writeback`).

use super::zone::{Writeback, ZoneBuf};

/// The next write-back of a zone: bytes `[start, end)` from chunk `chunk`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Index of the chunk in the zone's chunk list.
    pub(crate) chunk: usize,
    /// First byte (the device write pointer).
    pub(crate) start: u64,
    /// End (exclusive): a block multiple.
    pub(crate) end: u64,
}

/// What to write next, if anything, from where the last issued write-back ended: the rest of
/// a full chunk of a whole write-back unit (`unit_bytes`) always; whole blocks of a smaller
/// or partly filled chunk only up to the zone's `target` (flush, idle, memory pressure, the
/// zone filled to capacity). A small full chunk waits: the next write grows it.
pub(crate) fn next_writeback(zone: &ZoneBuf, block_bytes: u64, unit_bytes: u64) -> Option<Plan> {
    let start = zone.issued_wp;
    if start >= zone.wp {
        return None;
    }
    let (i, c) = zone
        .chunks
        .iter()
        .enumerate()
        .find(|(_, c)| c.start <= start && start < c.end())?;
    let end = if c.is_full() && c.cap >= unit_bytes {
        c.end()
    } else {
        let limit = c.end().min(zone.target);
        limit / block_bytes * block_bytes
    };
    (end > start).then_some(Plan {
        chunk: i,
        start,
        end,
    })
}

/// Bytes of a zone a pressure write-back could move to the device (whole blocks).
pub(crate) fn writable_dirty_bytes(zone: &ZoneBuf, block_bytes: u64) -> u64 {
    (zone.wp / block_bytes * block_bytes).saturating_sub(zone.device_wp)
}

/// Zones to write back under memory pressure so that about `need_bytes` more become
/// writable to the device: those with whole dirty blocks and no write-back running, least
/// recently written first, only as many as cover what write-backs already running do not.
/// (Kicking every dirty zone at once would turn a buffer of many small zones into as many
/// one-block writes, and sorting them all on every allocation costs O(zones).)
pub(crate) fn pressure_victims<'a>(
    zones: impl Iterator<Item = &'a ZoneBuf>,
    block_bytes: u64,
    need_bytes: u64,
) -> Vec<u32> {
    let mut in_flight = 0u64;
    let mut v: Vec<(u64, u32, u64)> = Vec::new();
    for z in zones {
        if z.writeback_running() {
            in_flight += z.dirty_bytes();
        } else if z.writeback == Writeback::Idle && !z.exclusive() && z.error.is_none() {
            let bytes = writable_dirty_bytes(z, block_bytes);
            if bytes > 0 {
                v.push((z.last_write_seq, z.index, bytes));
            }
        }
    }
    let mut need = need_bytes.saturating_sub(in_flight);
    if need == 0 {
        return Vec::new();
    }
    v.sort_unstable();
    let mut out = Vec::new();
    for (_, index, bytes) in v {
        if need == 0 {
            break;
        }
        out.push(index);
        need = need.saturating_sub(bytes);
    }
    out
}

/// Zones whose clean chunks to drop, least recently written first.
pub(crate) fn eviction_order<'a>(zones: impl Iterator<Item = &'a ZoneBuf>) -> Vec<u32> {
    let mut v: Vec<(u64, u32)> = zones
        .filter(|z| z.clean_bytes() > 0)
        .map(|z| (z.last_write_seq, z.index))
        .collect();
    v.sort_unstable();
    v.into_iter().map(|(_, i)| i).collect()
}

/// Extra bytes a shard frees beyond the shortfall when memory runs short (1/16 of the
/// budget): the next allocations then fit without another scan of every zone, so the cost
/// of choosing what to evict or write back is paid once per many appends, not per append.
pub(crate) fn pressure_headroom(budget_bytes: u64) -> u64 {
    budget_bytes / 16
}

/// Transient write-back failures of a zone in a row that are retried; the next one is kept
/// as the zone's error.
pub(crate) const WRITEBACK_RETRIES: u32 = 3;

/// Wait before retry number `retry` (0-based) of a failed write-back: 1, 2, 4 ms...
pub(crate) fn retry_backoff(retry: u32) -> std::time::Duration {
    std::time::Duration::from_millis(1 << retry.min(10))
}

/// Whether a failed write-back with this error may succeed if tried again after the zone is
/// read back: an I/O error of the medium or the host ([`ErrorKind::Io`]), or a write the
/// device did not carry out because an earlier one failed ([`ErrorKind::Aborted`]). Zone
/// state errors (Read Only, Offline, Full, invalid write...) are not.
pub(crate) fn is_transient(kind: ziob_backends::ErrorKind) -> bool {
    use ziob_backends::ErrorKind;
    matches!(kind, ErrorKind::Io | ErrorKind::Aborted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ziob_backends::ZoneState;
    use ziob_runtime::DmaBuf;

    fn zone_with(bytes: usize, cap: u64) -> ZoneBuf {
        let mut z = ZoneBuf::from_device(0, ZoneState::Empty, 0);
        let chunks = (0..(bytes as u64).div_ceil(cap))
            .map(|_| (cap, DmaBuf::with_capacity(cap as usize)))
            .collect();
        z.copy_in(&vec![1; bytes], chunks);
        z
    }

    #[test]
    fn full_chunks_go_partial_ones_wait_for_a_target() {
        let mut z = zone_with(8192 + 5000, 8192);
        assert_eq!(
            next_writeback(&z, 4096, 8192),
            Some(Plan {
                chunk: 0,
                start: 0,
                end: 8192
            })
        );
        z.issued_wp = 8192;
        z.complete_writeback(0, 8192);
        assert_eq!(z.device_wp, 8192);
        assert_eq!(
            next_writeback(&z, 4096, 8192),
            None,
            "partial chunk without a target"
        );
        z.target = z.wp;
        assert_eq!(
            next_writeback(&z, 4096, 8192),
            Some(Plan {
                chunk: 1,
                start: 8192,
                end: 8192 + 4096
            }),
            "only whole blocks"
        );
        z.issued_wp = 8192 + 4096;
        assert_eq!(
            next_writeback(&z, 4096, 8192),
            None,
            "a partial block is never written"
        );
    }

    #[test]
    fn completions_out_of_order_advance_the_device_pointer_contiguously() {
        let mut z = zone_with(4 * 8192, 8192);
        z.complete_writeback(8192, 16384);
        z.complete_writeback(16384, 24576);
        assert_eq!(z.device_wp, 0, "a hole at the start");
        z.complete_writeback(0, 8192);
        assert_eq!(z.device_wp, 24576);
        assert!(z.completed_ahead.is_empty());
    }

    #[test]
    fn victims_are_least_recently_written_first() {
        let mut a = zone_with(8192, 8192);
        a.index = 1;
        a.last_write_seq = 9;
        let mut b = zone_with(4096, 8192);
        b.index = 2;
        b.last_write_seq = 3;
        let mut c = zone_with(100, 8192);
        c.index = 3;
        c.last_write_seq = 1;
        assert_eq!(
            pressure_victims([&a, &b, &c].into_iter(), 4096, u64::MAX),
            vec![2, 1]
        );
        assert_eq!(
            pressure_victims([&a, &b, &c].into_iter(), 4096, 4096),
            vec![2],
            "only as many as cover the need"
        );
        assert_eq!(
            pressure_victims([&a, &b, &c].into_iter(), 4096, 0),
            Vec::<u32>::new()
        );
    }
}
