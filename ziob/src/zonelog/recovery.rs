//! Recovery when a [`LogSpace`](super::LogSpace) opens: find every log from the zone headers,
//! order its zones, read its last zone through and cut it at the first torn or corrupt
//! record.

use std::collections::BTreeMap;
use std::ops::Range;

use ziob_backends::{ZoneInfo, ZoneState};

use super::allocator::ZoneAllocator;
use super::chain::{Chain, LogZone, ZoneEnd};
use super::layout::Layout;
use super::position::Position;
use super::scan::{scan_zone, ScanRange, Stop};
use super::zone_header::{decode_zone_header, zone_header_len, ZoneHeader, ZONE_HEADER_BYTES_MAX};
use crate::client::Client;
use crate::error::Result;

/// Recovery reads one block (at least 512 bytes) of each zone: a zone header fits.
const _: () = assert!(ZONE_HEADER_BYTES_MAX <= 512);

/// Zones reported at once.
const REPORT_BATCH_ZONES: u32 = 1024;

/// What recovery found for one log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogRecovery {
    /// Zones the log kept.
    pub zones: usize,
    /// Records in the zones that were read through (the last zone, and any not Full).
    pub records_scanned: u64,
    /// Bytes after the first torn or corrupt record that recovery dropped (for a Full zone
    /// counted up to its capacity), plus the data of any zone after it.
    pub dropped_bytes: u64,
    /// Where the log was cut, if it was.
    pub cut: Option<LogCut>,
}

/// Where recovery cut a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogCut {
    /// The device zone.
    pub zone: u32,
    /// The position of the first record dropped (the log's end after recovery).
    pub position: Position,
    /// What was wrong there.
    pub reason: String,
}

/// What recovery found in a space.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpaceRecovery {
    /// Each log found, by name.
    pub logs: BTreeMap<String, LogRecovery>,
    /// Zones with data but no valid zone header (reset before use).
    pub unknown_zones: Vec<u32>,
    /// Zones reset at open: those after a cut, and duplicates of a log's zone number.
    pub reset_zones: Vec<u32>,
    /// Offline or Read Only zones (not used).
    pub unusable_zones: Vec<u32>,
    /// Total of every log's `dropped_bytes`.
    pub dropped_bytes: u64,
}

/// The outcome of recovery: each log's chain and report, the allocator, the space report.
pub(crate) struct Recovered {
    pub logs: BTreeMap<String, (Chain, LogRecovery)>,
    pub allocator: ZoneAllocator,
    pub report: SpaceRecovery,
}

fn is_active(state: ZoneState) -> bool {
    matches!(
        state,
        ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened | ZoneState::Closed
    )
}

/// Zones sorted by what they hold.
#[derive(Debug, Default)]
pub(crate) struct Sorted {
    /// Each log's zones by sequence number, with the predecessor link of their header.
    pub logs: BTreeMap<String, BTreeMap<u32, (ZoneInfo, Option<(u32, u32)>)>>,
    /// Empty zones.
    pub empty: Vec<u32>,
    /// Zones with data and no valid header.
    pub unknown: Vec<ZoneInfo>,
    /// Zones whose header repeats a log's sequence number (the lower zone index is kept).
    pub duplicates: Vec<ZoneInfo>,
    /// Offline or Read Only zones.
    pub unusable: Vec<u32>,
}

/// Sorts the zones of a space by their state and header (pure).
pub(crate) fn sort_zones(
    found: Vec<(ZoneInfo, Option<std::result::Result<ZoneHeader, String>>)>,
) -> Sorted {
    let mut s = Sorted::default();
    for (info, header) in found {
        match (info.state, header) {
            (ZoneState::Empty, _) => s.empty.push(info.index),
            (ZoneState::Offline | ZoneState::ReadOnly, _) => s.unusable.push(info.index),
            (_, Some(Ok(h))) => match s.logs.entry(h.name).or_default().entry(h.seq) {
                std::collections::btree_map::Entry::Occupied(_) => s.duplicates.push(info),
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert((info, h.prev));
                }
            },
            (_, _) => s.unknown.push(info),
        }
    }
    s
}

/// Recovers the space over `zones` (see [`LogSpace::open`](super::LogSpace::open)).
pub(crate) async fn recover(
    client: &Client,
    layout: &Layout,
    zones: Range<u32>,
    active_limit: Option<u32>,
) -> Result<Recovered> {
    let mut found = Vec::new();
    let mut first = zones.start;
    while first < zones.end {
        let count = (zones.end - first).min(REPORT_BATCH_ZONES);
        for info in client.report(first, count).await? {
            let header = if matches!(
                info.state,
                ZoneState::Empty | ZoneState::Offline | ZoneState::ReadOnly
            ) {
                None
            } else {
                let bytes = client
                    .read(info.index, 0, layout.block_bytes as usize)
                    .await?;
                Some(decode_zone_header(&bytes))
            };
            found.push((info, header));
        }
        first += count;
    }
    let sorted = sort_zones(found);
    let mut alloc = ZoneAllocator::new(active_limit);
    let mut report = SpaceRecovery::default();
    for &z in &sorted.empty {
        alloc.add_free(z);
    }
    for info in &sorted.unknown {
        alloc.add_stale(info.index, is_active(info.state));
        report.unknown_zones.push(info.index);
    }
    report.unusable_zones = sorted.unusable.clone();
    let mut to_reset: Vec<ZoneInfo> = sorted.duplicates.clone();
    let mut logs = BTreeMap::new();
    for (name, zs) in sorted.logs {
        let (chain, rec, after_cut) = recover_log(client, layout, &name, &zs, &mut alloc).await?;
        if let Some(cut) = &rec.cut {
            tracing::warn!(
                log = %name, zone = cut.zone, position = %cut.position,
                dropped_bytes = rec.dropped_bytes, reason = %cut.reason,
                "zone log recovery cut the log at a torn or corrupt record"
            );
        }
        report.dropped_bytes += rec.dropped_bytes;
        report.logs.insert(name.clone(), rec.clone());
        to_reset.extend(after_cut);
        logs.insert(name, (chain, rec));
    }
    // Zones whose data recovery gave up: reset now, so a later open cannot take them back.
    for info in to_reset {
        client.reset(info.index).await?;
        alloc.add_free(info.index);
        report.reset_zones.push(info.index);
    }
    Ok(Recovered {
        logs,
        allocator: alloc,
        report,
    })
}

/// Recovers one log from its zones (by sequence number). Returns its chain, its report and
/// the zones after a cut (to reset).
async fn recover_log(
    client: &Client,
    layout: &Layout,
    name: &str,
    zones: &BTreeMap<u32, (ZoneInfo, Option<(u32, u32)>)>,
    alloc: &mut ZoneAllocator,
) -> Result<(Chain, LogRecovery, Vec<ZoneInfo>)> {
    let header = zone_header_len(name);
    let cap = layout.capacity_bytes;
    let mut chain = Chain::new(header);
    let mut rec = LogRecovery::default();
    let mut after_cut = Vec::new();
    let last_seq = *zones.keys().next_back().expect("a log has a zone");
    // Where each zone's records end, as the header of the zone after it recorded.
    let recorded_ends: BTreeMap<u32, u64> = zones
        .values()
        .filter_map(|(_, prev)| prev.map(|(s, e)| (s, e as u64)))
        .collect();
    for (&seq, (info, _)) in zones {
        if rec.cut.is_some() {
            rec.dropped_bytes += info.write_pointer_bytes;
            after_cut.push(*info);
            continue;
        }
        let last = seq == last_seq;
        let full = info.state == ZoneState::Full;
        if full && !last {
            // Finished when the log moved on: complete up to the end the next zone's header
            // recorded (else up to zeros at a block boundary), read when asked for.
            chain.zones.insert(
                seq,
                LogZone {
                    zone: info.index,
                    end: ZoneEnd::Sealed(recorded_ends.get(&seq).copied()),
                },
            );
            alloc.add_owned(info.index, false);
            continue;
        }
        let data_end = if full {
            recorded_ends.get(&seq).copied().unwrap_or(cap)
        } else {
            info.write_pointer_bytes
        };
        let range = ScanRange {
            from: header,
            data_end,
            block_bytes: layout.block_bytes,
            capacity_bytes: cap,
            window_bytes: layout.read_window_bytes.max(1 << 20),
        };
        let mut read = |off, len| client.read(info.index, off, len);
        let scanned = scan_zone(&mut read, range, usize::MAX).await?;
        rec.records_scanned += scanned.records.len() as u64;
        let next = scanned.next;
        let problem = match scanned.stop {
            Some(Stop::End) if (full && !recorded_ends.contains_key(&seq)) || next == data_end => {
                None
            }
            Some(Stop::End) => Some(format!(
                "zeros at byte {next} where records should go on to the write pointer {data_end}"
            )),
            Some(Stop::Torn(r)) | Some(Stop::Corrupt(r)) => Some(r),
            None => unreachable!("an unbounded scan stops for a reason"),
        };
        if let Some(reason) = problem {
            rec.dropped_bytes += data_end - next;
            rec.cut = Some(LogCut {
                zone: info.index,
                position: Position::new(seq, next as u32),
                reason,
            });
        }
        let open = last && !full && rec.cut.is_none();
        if !open && !full {
            // The rest of the zone is not used: finish it (frees its active resource).
            client.finish(info.index).await?;
        }
        chain.zones.insert(
            seq,
            LogZone {
                zone: info.index,
                end: if open {
                    ZoneEnd::Open { written: next }
                } else {
                    ZoneEnd::Sealed(Some(next))
                },
            },
        );
        alloc.add_owned(info.index, open);
        chain.end = chain.end.max(Position::new(seq, next as u32));
    }
    chain.next_seq = last_seq.saturating_add(1);
    chain.generation = 1;
    rec.zones = chain.zones.len();
    Ok((chain, rec, after_cut))
}

#[cfg(test)]
mod tests {
    use super::super::zone_header::encode_zone_header;
    use super::*;

    fn info(index: u32, state: ZoneState) -> ZoneInfo {
        ZoneInfo {
            index,
            start_bytes: index as u64 * 65536,
            capacity_bytes: 65536,
            write_pointer_bytes: if state == ZoneState::Empty { 0 } else { 4096 },
            state,
        }
    }

    #[test]
    fn sorts_zones_by_log_and_sequence() {
        let h = |name: &str, seq| Some(decode_zone_header(&encode_zone_header(name, seq, None)));
        let found = vec![
            (info(0, ZoneState::Full), h("b", 1)),
            (info(1, ZoneState::Empty), None),
            (info(2, ZoneState::Closed), h("a", 0)),
            (info(3, ZoneState::Full), h("b", 0)),
            (info(4, ZoneState::Closed), Some(Err("no magic".into()))),
            (info(5, ZoneState::Offline), None),
            (info(6, ZoneState::Full), h("b", 1)),
        ];
        let s = sort_zones(found);
        let b: Vec<(u32, u32)> = s.logs["b"].iter().map(|(&q, i)| (q, i.0.index)).collect();
        assert_eq!(b, vec![(0, 3), (1, 0)]);
        assert_eq!(s.logs["a"].len(), 1);
        assert_eq!(s.empty, vec![1]);
        assert_eq!(
            s.unknown.iter().map(|i| i.index).collect::<Vec<_>>(),
            vec![4]
        );
        assert_eq!(
            s.duplicates.iter().map(|i| i.index).collect::<Vec<_>>(),
            vec![6]
        );
        assert_eq!(s.unusable, vec![5]);
    }
}
