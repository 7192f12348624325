//! What the API may return, judged against the model: reads while the work runs, reports,
//! errors, and a zone's whole content after a power cut.

use ziob::{ErrorKind, ZiobError, ZoneInfo, ZoneState};

use super::data::{op_byte, op_bytes};
use super::model::{Model, ZoneModel};
use super::ops::OpKind;

/// Whether an error is one the API may return for `op` here, given whether device faults
/// are injected, whether the instance is being closed and whether the op's zone is wild (a
/// dropped reset or finish of it may still be running).
pub fn allowed_error(
    e: &ZiobError,
    op: &OpKind,
    faults: bool,
    closing: bool,
    zone_wild: bool,
) -> Result<(), String> {
    let writes = matches!(op, OpKind::Append { .. } | OpKind::WriteAtWp { .. });
    let durability = matches!(
        op,
        OpKind::Flush { .. } | OpKind::Sync | OpKind::Finish { .. } | OpKind::Close
    );
    let zone_state = matches!(
        op,
        OpKind::Open { .. }
            | OpKind::CloseZone { .. }
            | OpKind::Finish { .. }
            | OpKind::Reset { .. }
    );
    let ok = match e {
        ZiobError::Closed => closing,
        ZiobError::BufferFull { .. } => writes,
        ZiobError::Writeback { .. } => {
            faults && !matches!(op, OpKind::Read { .. } | OpKind::Report)
        }
        ZiobError::ZonesFailed { .. } => faults && matches!(op, OpKind::Sync | OpKind::Close),
        ZiobError::Device(d) => match d.kind() {
            ErrorKind::Io => faults,
            ErrorKind::ZoneFull | ErrorKind::BoundaryError => writes,
            ErrorKind::InvalidWrite => matches!(op, OpKind::WriteAtWp { .. }),
            ErrorKind::TooManyActive => durability || writes || zone_state,
            // Pass-through writes meet the device's own limits.
            ErrorKind::TooManyOpen => zone_state || writes,
            ErrorKind::InvalidTransition => zone_state,
            // A write in flight when an earlier one of its zone failed, or when a reset ran
            // under it, does not count as written (emu).
            ErrorKind::Aborted => writes && (faults || zone_wild),
            _ => false,
        },
        // No task panics and no core stops in the simulation.
        ZiobError::Config(_)
        | ZiobError::Runtime(_)
        | ZiobError::Aborted { .. }
        | ZiobError::RuntimeStopped { .. }
        | ZiobError::BlockingOnCore { .. } => false,
        // Zone log errors: the simulation uses no zone logs.
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{op:?} returned an error it must not: {e} ({e:?})"))
    }
}

/// A read of `buf.len()` bytes at `offset` of `zone` that started at model time `started`:
/// every byte acknowledged before it started must read back exactly.
pub fn check_live_read(
    m: &Model,
    zone: u32,
    started: u64,
    offset: u64,
    buf: &[u8],
) -> Result<(), String> {
    let z = &m.zones[zone as usize];
    if z.wild.is_some() {
        return Ok(());
    }
    let end = offset + buf.len() as u64;
    let base = z.baseline.len() as u64;
    if offset < base {
        let to = end.min(base);
        let want = &z.baseline[offset as usize..to as usize];
        let got = &buf[..(to - offset) as usize];
        if let Some(i) = first_difference(want, got) {
            return Err(format!(
                "zone {zone}: read at {offset} len {} returned {:#04x} at byte {} where the recovered data has {:#04x}",
                buf.len(),
                got[i],
                offset + i as u64,
                want[i]
            ));
        }
    }
    for e in z.acked.iter().filter(|e| e.acked_at < started) {
        let (lo, hi) = (e.offset.max(offset), e.end().min(end));
        if lo >= hi {
            continue;
        }
        for pos in lo..hi {
            let want = op_byte(e.op_id, (pos - e.offset) as usize);
            let got = buf[(pos - offset) as usize];
            if want != got {
                return Err(format!(
                    "zone {zone}: read at {offset} len {} returned {got:#04x} at byte {pos}, inside the write acknowledged at [{}, {}) which has {want:#04x}",
                    buf.len(),
                    e.offset,
                    e.end()
                ));
            }
        }
    }
    Ok(())
}

/// A report that started at model time `started` (no reset or finish ran meanwhile): every
/// zone's write pointer covers what was acknowledged before and stays within the capacity.
pub fn check_report(m: &Model, infos: &[ZoneInfo], started: u64) -> Result<(), String> {
    if infos.len() != m.zones.len() {
        return Err(format!(
            "report returned {} zones, the device has {}",
            infos.len(),
            m.zones.len()
        ));
    }
    for (info, z) in infos.iter().zip(&m.zones) {
        if z.wild.is_some() {
            continue;
        }
        let acked = z.acked_end_before(started);
        let wp = info.write_pointer_bytes;
        if wp < acked || wp > m.capacity_bytes {
            return Err(format!(
                "zone {}: report says write pointer {wp} ({:?}); acknowledged data ends at {acked}, capacity {}",
                info.index, info.state, m.capacity_bytes
            ));
        }
    }
    Ok(())
}

/// The acknowledged writes of `z` past `end`, for a failure report.
fn lost(z: &ZoneModel, end: u64) -> String {
    let mut v: Vec<_> = z.acked.iter().filter(|e| e.end() > end).collect();
    v.sort_by_key(|e| e.offset);
    v.iter()
        .map(|e| {
            format!(
                "[{}, {}) acknowledged at t{}",
                e.offset,
                e.end(),
                e.acked_at
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y)
}

/// A zone after a power cut and reopen: `info` from the report, `content` the whole zone
/// (zone size bytes) read through the buffer. Checks, unless the zone is wild:
/// - the write pointer covers everything a completed flush/sync/finish/close made durable;
/// - every acknowledged byte below the data end reads back exactly;
/// - every other byte below it is flush padding (zeros ending on a block boundary) or data of
///   a write that was issued to this zone (dropped, failed or not acknowledged in time), in
///   one piece from that write's start;
/// - nothing past the data end: zeros up to the zone size.
///
/// Returns the bytes it verified.
pub fn check_recovered(
    z: &ZoneModel,
    info: &ZoneInfo,
    content: &[u8],
    block_bytes: u64,
) -> Result<u64, String> {
    let zone = info.index;
    if let Some(why) = &z.wild {
        let _ = why;
        return Ok(0);
    }
    if z.reset_in_flight && info.state == ZoneState::Empty {
        // The cut came while a reset was in flight, and the device had completed it.
        return Ok(0);
    }
    let full = info.state == ZoneState::Full;
    let end = if full {
        info.capacity_bytes
    } else {
        info.write_pointer_bytes
    };
    if !full && end < z.durable_bytes {
        return Err(format!(
            "LOST DURABLE DATA: zone {zone}: {} bytes were made durable ({}), but the device kept only {end} (state {:?}); lost acknowledged writes: {}",
            z.durable_bytes, z.durable_why, info.state, lost(z, end)
        ));
    }
    if let Some(i) = content[end as usize..].iter().position(|&b| b != 0) {
        return Err(format!(
            "zone {zone}: byte {} past the write pointer {end} is {:#04x}, not zero",
            end as usize + i,
            content[end as usize + i]
        ));
    }
    // The bytes that must match, in order: the recovered baseline, then acknowledged writes.
    let mut known: Vec<(u64, Vec<u8>)> = Vec::new();
    if !z.baseline.is_empty() {
        known.push((0, z.baseline.clone()));
    }
    let mut acked = z.acked.clone();
    acked.sort_by_key(|e| e.offset);
    for e in &acked {
        known.push((e.offset, op_bytes(e.op_id, e.len as usize)));
    }
    let acked_ids: std::collections::HashSet<u64> = acked.iter().map(|e| e.op_id).collect();
    let mut unexplained: Vec<(u64, u64)> = z
        .issued
        .iter()
        .copied()
        .filter(|(id, _)| !acked_ids.contains(id))
        .collect();
    let mut pos = 0u64;
    for (at, bytes) in &known {
        if *at >= end {
            break;
        }
        walk_gap(zone, content, pos, *at, end, block_bytes, &mut unexplained)?;
        let hi = (*at + bytes.len() as u64).min(end);
        let got = &content[*at as usize..hi as usize];
        if let Some(i) = first_difference(&bytes[..got.len()], got) {
            return Err(format!(
                "zone {zone}: after the power cut byte {} reads {:#04x}; the acknowledged write at [{at}, {}) has {:#04x} there (write pointer {end}, durable {})",
                *at as usize + i,
                got[i],
                *at + bytes.len() as u64,
                bytes[i],
                z.durable_bytes
            ));
        }
        pos = hi;
    }
    if pos < end {
        walk_gap(zone, content, pos, end, end, block_bytes, &mut unexplained)?;
    }
    Ok(end)
}

/// Explains `content[from..to)`, a stretch no acknowledged write covers, as flush padding
/// and pieces of unacknowledged writes (each used once). `data_end` is the zone's data end.
fn walk_gap(
    zone: u32,
    content: &[u8],
    from: u64,
    to: u64,
    data_end: u64,
    block_bytes: u64,
    unexplained: &mut Vec<(u64, u64)>,
) -> Result<(), String> {
    let mut p = from as usize;
    let to = to as usize;
    while p < to {
        if content[p] == 0 {
            let q = content[p..to]
                .iter()
                .position(|&b| b != 0)
                .map_or(to, |i| p + i);
            if (q as u64) < data_end && !(q as u64).is_multiple_of(block_bytes) {
                return Err(format!(
                    "zone {zone}: zeros at [{p}, {q}) are followed by data at {q}, which is not on a block boundary (flush padding must end on one)"
                ));
            }
            p = q;
            continue;
        }
        let best = unexplained
            .iter()
            .enumerate()
            .map(|(i, &(id, len))| {
                let n = (len as usize).min(to - p);
                let m = (0..n)
                    .position(|k| op_byte(id, k) != content[p + k])
                    .unwrap_or(n);
                (m, i)
            })
            .max();
        match best {
            Some((m, i)) if m > 0 => {
                unexplained.swap_remove(i);
                p += m;
            }
            _ => {
                let show: Vec<String> = content[p..(p + 8).min(to)]
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                return Err(format!(
                    "zone {zone}: bytes at {p} ({} ...) are no acknowledged write, no padding and no start of any write issued to this zone (gap [{from}, {to}), data end {data_end})",
                    show.join(" ")
                ));
            }
        }
    }
    Ok(())
}

/// The checker must be able to fail: each test breaks one promise on a hand-made zone.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::model::Extent;

    const BS: u64 = 4096;
    const ZONE: usize = 4 * BS as usize;

    /// Zone 0 with: write 1 (acked) at [0, 5000), padding to 8192, write 2 (issued, not
    /// acknowledged) at [8192, 9192), then write 3 (acked) at [9192, 10000); flushed up to
    /// 5000; the device kept [0, 12288) (the rest of the block is padding).
    fn layout() -> (ZoneModel, ZoneInfo, Vec<u8>) {
        let mut content = vec![0u8; ZONE];
        content[..5000].copy_from_slice(&op_bytes(1, 5000));
        content[8192..9192].copy_from_slice(&op_bytes(2, 1000));
        content[9192..10000].copy_from_slice(&op_bytes(3, 808));
        let z = ZoneModel {
            acked: vec![
                Extent {
                    offset: 0,
                    op_id: 1,
                    len: 5000,
                    acked_at: 1,
                },
                Extent {
                    offset: 9192,
                    op_id: 3,
                    len: 808,
                    acked_at: 5,
                },
            ],
            issued: vec![(1, 5000), (2, 1000), (3, 808)],
            durable_bytes: 5000,
            ..ZoneModel::default()
        };
        let info = ZoneInfo {
            index: 0,
            start_bytes: 0,
            capacity_bytes: ZONE as u64,
            write_pointer_bytes: 3 * BS,
            state: ZoneState::Closed,
        };
        (z, info, content)
    }

    #[test]
    fn a_consistent_zone_passes() {
        let (z, info, content) = layout();
        assert_eq!(check_recovered(&z, &info, &content, BS), Ok(3 * BS));
    }

    #[test]
    fn a_flipped_acknowledged_byte_fails() {
        let (z, info, mut content) = layout();
        content[4321] ^= 0x10;
        let e = check_recovered(&z, &info, &content, BS).unwrap_err();
        assert!(e.contains("byte 4321"), "{e}");
    }

    #[test]
    fn a_write_pointer_behind_a_flush_fails() {
        let (z, mut info, content) = layout();
        info.write_pointer_bytes = BS;
        let e = check_recovered(&z, &info, &content[..], BS).unwrap_err();
        assert!(e.starts_with("LOST DURABLE DATA"), "{e}");
    }

    #[test]
    fn padding_that_ends_off_a_block_boundary_fails() {
        let (mut z, info, mut content) = layout();
        // Write 2 lands at 7000 instead of 8192: zeros [5000, 7000) end off a boundary.
        content[7000..8000].copy_from_slice(&op_bytes(2, 1000));
        content[8000..9192].fill(0);
        z.acked.pop();
        z.issued.pop();
        content[9192..10000].fill(0);
        let e = check_recovered(&z, &info, &content, BS).unwrap_err();
        assert!(e.contains("not on a block boundary"), "{e}");
    }

    #[test]
    fn bytes_no_write_explains_fail() {
        let (z, info, mut content) = layout();
        content[8192..9192].copy_from_slice(&op_bytes(99, 1000));
        let e = check_recovered(&z, &info, &content, BS).unwrap_err();
        assert!(e.contains("no start of any write"), "{e}");
    }

    #[test]
    fn data_past_the_write_pointer_fails() {
        let (z, info, mut content) = layout();
        content[3 * BS as usize + 10] = 7;
        let e = check_recovered(&z, &info, &content, BS).unwrap_err();
        assert!(e.contains("past the write pointer"), "{e}");
    }

    #[test]
    fn a_live_read_that_misses_an_acknowledged_byte_fails() {
        let (z, _, content) = layout();
        let mut m = Model::new(vec![z], ZONE as u64, 10);
        m.clock = 10;
        assert_eq!(
            check_live_read(&m, 0, 10, 4000, &content[4000..9500]),
            Ok(())
        );
        let mut bad = content[4000..9500].to_vec();
        bad[999] = 0;
        assert!(check_live_read(&m, 0, 10, 4000, &bad).is_err());
        // A write acknowledged after the read started may be missing.
        assert_eq!(check_live_read(&m, 0, 3, 9000, &[0u8; 100]), Ok(()));
    }
}
