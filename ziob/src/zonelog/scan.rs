//! Reading records out of one zone through a read function, in windows: used by readers and
//! streams, and by recovery to find where a log's last zone stops being valid.

use std::future::Future;

use bytes::Bytes;

use super::record::{decode_at, Decoded};
use crate::error::Result;

/// Why a scan of a zone stopped before `max_records`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// No more records in the zone's data (zeros at a block boundary, or the data end).
    End,
    /// A record runs past the end of the data.
    Torn(String),
    /// Bytes that are not a valid record.
    Corrupt(String),
}

/// Records read from one zone.
#[derive(Debug, Default)]
pub struct Scanned {
    /// Each record's zone offset and payload.
    pub records: Vec<(u64, Bytes)>,
    /// The zone offset where the scan stopped (just past the last record or padding read).
    pub next: u64,
    /// Why it stopped; `None` when `max_records` were read.
    pub stop: Option<Stop>,
}

/// Where and how to scan a zone.
#[derive(Debug, Clone, Copy)]
pub struct ScanRange {
    /// The zone offset to start at (a record start or the end of a record).
    pub from: u64,
    /// Bytes past this zone offset are not data.
    pub data_end: u64,
    /// The block size: reads are whole blocks, padding ends at block boundaries.
    pub block_bytes: u64,
    /// The zone capacity (no read goes past it).
    pub capacity_bytes: u64,
    /// Bytes to read at once (more when a record is larger).
    pub window_bytes: u64,
}

/// Reads up to `max_records` records of one zone through `read(offset, len)` (offset and
/// len whole blocks within the zone's capacity), window by window.
pub async fn scan_zone<R, F>(read: &mut R, range: ScanRange, max_records: usize) -> Result<Scanned>
where
    R: FnMut(u64, usize) -> F,
    F: Future<Output = Result<Bytes>>,
{
    let bs = range.block_bytes;
    let align_up = |x: u64| x.div_ceil(bs) * bs;
    let mut out = Scanned {
        next: range.from,
        ..Default::default()
    };
    let mut window = Bytes::new();
    let mut window_start = 0u64;
    let mut want_upto = 0u64;
    loop {
        let at = out.next;
        if out.records.len() >= max_records {
            return Ok(out);
        }
        let window_end = window_start + window.len() as u64;
        let covered = at >= window_start && at < window_end && want_upto <= window_end;
        if !covered && at < range.data_end {
            let start = at / bs * bs;
            let end = align_up(
                (at + range.window_bytes)
                    .max(want_upto)
                    .min(align_up(range.data_end)),
            )
            .min(range.capacity_bytes);
            window = read(start, (end - start) as usize).await?;
            window_start = start;
        }
        want_upto = 0;
        match decode_at(&window, window_start, at, range.data_end, bs) {
            Decoded::Record { payload, next } => {
                out.records.push((at, window.slice(payload)));
                out.next = next;
            }
            Decoded::Padding { next } => out.next = next,
            Decoded::End => {
                out.stop = Some(Stop::End);
                return Ok(out);
            }
            Decoded::NeedMore { upto } => {
                if window_start + (window.len() as u64) >= upto.min(range.capacity_bytes) {
                    // The read came back short: nothing more to get.
                    out.stop = Some(Stop::Torn(format!(
                        "zone data at byte {at} could not be read up to byte {upto}"
                    )));
                    return Ok(out);
                }
                want_upto = upto;
            }
            Decoded::Torn { reason } => {
                out.stop = Some(Stop::Torn(reason));
                return Ok(out);
            }
            Decoded::Corrupt { reason } => {
                out.stop = Some(Stop::Corrupt(reason));
                return Ok(out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::encode_record;
    use super::*;

    fn zone_with(records: &[Vec<u8>], pad_every: usize) -> (Vec<u8>, Vec<u64>) {
        let mut data = Vec::new();
        let mut offs = Vec::new();
        for (i, r) in records.iter().enumerate() {
            offs.push(data.len() as u64);
            encode_record(&mut data, r);
            if pad_every > 0 && i % pad_every == 0 {
                data.resize(data.len().div_ceil(4096) * 4096, 0);
            }
        }
        (data, offs)
    }

    fn reader(zone: Vec<u8>) -> impl FnMut(u64, usize) -> std::future::Ready<Result<Bytes>> {
        move |off, len| {
            assert_eq!(off % 4096, 0);
            assert_eq!(len % 4096, 0);
            let mut b = vec![0u8; len];
            let have = zone.len().saturating_sub(off as usize).min(len);
            b[..have].copy_from_slice(&zone[off as usize..off as usize + have]);
            std::future::ready(Ok(Bytes::from(b)))
        }
    }

    proptest::proptest! {
        /// Every record comes back with its offset, whatever the window size, padding and
        /// batch size; the scan ends with `End` at the data end.
        #[test]
        fn scans_back_what_was_framed(
            records in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..9000), 0..20),
            pad_every in 0usize..4, window in 1u64..5, batch in 1usize..7,
        ) {
            let (data, offs) = zone_with(&records, pad_every);
            let data_end = data.len() as u64;
            let cap = (data_end + 8192).div_ceil(4096) * 4096;
            let mut read = reader(data);
            let mut got = Vec::new();
            let mut from = 0;
            loop {
                let range = ScanRange { from, data_end, block_bytes: 4096, capacity_bytes: cap, window_bytes: window * 4096 };
                let s = futures::executor::block_on(scan_zone(&mut read, range, batch)).unwrap();
                got.extend(s.records);
                from = s.next;
                match s.stop {
                    None => continue,
                    Some(Stop::End) => break,
                    Some(other) => panic!("{other:?}"),
                }
            }
            proptest::prop_assert_eq!(got.len(), records.len());
            for ((off, bytes), (want_off, want)) in got.iter().zip(offs.iter().zip(&records)) {
                proptest::prop_assert_eq!(off, want_off);
                proptest::prop_assert_eq!(&bytes[..], &want[..]);
            }
        }

        /// Cutting the data anywhere (a torn tail) keeps exactly the records that end
        /// before the cut and reports the rest as torn, unless the cut is at a record end.
        #[test]
        fn a_cut_keeps_the_whole_records_before_it(
            records in proptest::collection::vec(proptest::collection::vec(1u8..=255, 0..3000), 1..10),
            cut_frac in 0.0f64..1.0,
        ) {
            let (data, offs) = zone_with(&records, 0);
            let cut = (data.len() as f64 * cut_frac) as u64;
            let mut read = reader(data[..cut as usize].to_vec());
            let range = ScanRange { from: 0, data_end: cut, block_bytes: 4096, capacity_bytes: 1 << 20, window_bytes: 4096 };
            let s = futures::executor::block_on(scan_zone(&mut read, range, usize::MAX)).unwrap();
            let whole = offs.iter().zip(&records).filter(|(o, r)| **o + 12 + r.len() as u64 <= cut).count();
            proptest::prop_assert_eq!(s.records.len(), whole);
            let at_boundary = offs.contains(&cut) || cut == 0;
            match s.stop {
                Some(Stop::End) => proptest::prop_assert!(at_boundary),
                Some(Stop::Torn(_)) => proptest::prop_assert!(!at_boundary),
                other => proptest::prop_assert!(false, "{:?}", other),
            }
        }
    }
}
