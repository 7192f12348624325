//! Reading a log: records from a position on, across its zones.

use bytes::Bytes;

use super::chain::Lookup;
use super::log::ZoneLog;
use super::position::Position;
use super::scan::{scan_zone, ScanRange, Stop};
use crate::error::{Result, ZiobError};

/// Records read and where reading goes on.
pub(crate) type Batch = (Vec<(Position, Bytes)>, Position);

impl ZoneLog {
    /// The record at `pos` (a position an append returned).
    ///
    /// # Errors
    /// [`ZiobError::Truncated`] before [`start`](ZoneLog::start);
    /// [`ZiobError::InvalidPosition`] where no record starts or at or past
    /// [`end`](ZoneLog::end); [`ZiobError::LogCorrupt`] for damaged data.
    pub async fn read(&self, pos: Position) -> Result<Bytes> {
        let (mut recs, _) = self
            .read_batch(pos, 1, self.space.layout.block_bytes)
            .await?;
        match recs.pop() {
            Some((p, bytes)) if p == pos => Ok(bytes),
            _ => Err(ZiobError::InvalidPosition {
                log: self.log.name.clone(),
                position: pos.into_raw(),
                detail: if pos >= self.end() {
                    format!("it is at or past the log's end {}", self.end())
                } else {
                    "no record starts there".into()
                },
            }),
        }
    }

    /// Up to `max_records` records from `pos` on (a record's position, the position
    /// after one, or [`start`](ZoneLog::start)), in log order, with their positions.
    /// Empty at the end of the log. Go on from `last.0.after(last.1.len())`.
    ///
    /// # Errors
    /// As [`ZoneLog::read`].
    pub async fn read_from(
        &self,
        pos: Position,
        max_records: usize,
    ) -> Result<Vec<(Position, Bytes)>> {
        Ok(self
            .read_batch(pos, max_records, self.space.layout.read_window_bytes)
            .await?
            .0)
    }

    /// Up to `max_records` records from `from`, and the position to go on from.
    pub(crate) async fn read_batch(
        &self,
        from: Position,
        max_records: usize,
        window_bytes: u64,
    ) -> Result<Batch> {
        let layout = self.space.layout;
        let mut out: Vec<(Position, Bytes)> = Vec::new();
        let mut cursor = from;
        while out.len() < max_records {
            let look = {
                let c = self.log.chain();
                if c.removed {
                    return Err(self.log.no_such_log());
                }
                match c.lookup(cursor, layout.capacity_bytes) {
                    Lookup::Truncated => return Err(self.truncated(cursor, c.start())),
                    other => other,
                }
            };
            let (seq, zone, start, data_end) = match look {
                Lookup::Zone {
                    seq,
                    zone,
                    from,
                    data_end,
                    ..
                } => (seq, zone, from, data_end),
                Lookup::AtEnd(p) => {
                    cursor = cursor.max(p);
                    break;
                }
                Lookup::Truncated => unreachable!("handled above"),
            };
            let range = ScanRange {
                from: start,
                data_end,
                block_bytes: layout.block_bytes,
                capacity_bytes: layout.capacity_bytes,
                window_bytes,
            };
            let client = &self.space.client;
            let mut read = |off, len| client.read(zone, off, len);
            let scanned = scan_zone(&mut read, range, max_records - out.len()).await?;
            // The zone may have been dropped (and reset) while it was read.
            let next_zone = {
                let c = self.log.chain();
                if c.removed {
                    return Err(self.log.no_such_log());
                }
                if c.zones.get(&seq).map(|z| z.zone) != Some(zone) {
                    return Err(self.truncated(cursor, c.start()));
                }
                c.zones
                    .range(seq.saturating_add(1)..)
                    .next()
                    .map(|(&s, _)| c.zone_start(s))
            };
            let nothing_read = out.is_empty() && scanned.records.is_empty();
            out.extend(
                scanned
                    .records
                    .into_iter()
                    .map(|(off, b)| (Position::new(seq, off as u32), b)),
            );
            let here = Position::new(seq, scanned.next as u32);
            cursor = here;
            match scanned.stop {
                None => break,
                Some(Stop::End) => match next_zone {
                    Some(p) => cursor = p,
                    None if scanned.next >= data_end => break,
                    None => {
                        return Err(self.corrupt(here, "zeros where the log's data goes on".into()))
                    }
                },
                Some(Stop::Torn(reason)) | Some(Stop::Corrupt(reason)) => {
                    return Err(if nothing_read && here == from {
                        ZiobError::InvalidPosition {
                            log: self.log.name.clone(),
                            position: from.into_raw(),
                            detail: format!("no record starts there ({reason})"),
                        }
                    } else {
                        self.corrupt(here, reason)
                    });
                }
            }
        }
        Ok((out, cursor))
    }

    fn truncated(&self, position: Position, start: Position) -> ZiobError {
        ZiobError::Truncated {
            log: self.log.name.clone(),
            position: position.into_raw(),
            start: start.into_raw(),
        }
    }

    fn corrupt(&self, position: Position, detail: String) -> ZiobError {
        ZiobError::LogCorrupt {
            log: self.log.name.clone(),
            position: position.into_raw(),
            detail,
        }
    }
}
