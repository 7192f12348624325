//! The in-memory picture of one log: its zones in sequence order, which one takes appends,
//! and where its records end. Pure state, guarded by the log's mutex; no I/O.

use std::collections::BTreeMap;

use super::position::Position;

/// One zone of a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogZone {
    /// The device zone.
    pub zone: u32,
    /// Where the zone's data ends for readers, in bytes from the zone start.
    pub end: ZoneEnd,
}

/// Where a log zone's records end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneEnd {
    /// The zone takes appends; its data is complete up to `written` (the end of the
    /// furthest completed append).
    Open {
        /// Bytes from the zone start.
        written: u64,
    },
    /// The zone takes no more appends. `Some(end)`: its records end there (anything past
    /// it is not data); `None`: read on to zeros at a block boundary or the capacity.
    Sealed(Option<u64>),
}

/// Where a read at some position goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Before the log's first zone.
    Truncated,
    /// Nothing to read yet: wait for the log's end to pass this position (the cursor,
    /// moved past empty zone ends).
    AtEnd(Position),
    /// Read zone `zone` (sequence `seq`) from byte `from` up to `data_end`.
    Zone {
        /// The zone's sequence number.
        seq: u32,
        /// The device zone.
        zone: u32,
        /// Where to start (a record start or the end of one).
        from: u64,
        /// Bytes past this are not data.
        data_end: u64,
        /// Whether `data_end` is a known end (`false`: read until zeros at a block
        /// boundary).
        sealed_unknown_end: bool,
    },
}

/// The zones of one log.
#[derive(Debug, Clone)]
pub struct Chain {
    /// The zones by sequence number.
    pub zones: BTreeMap<u32, LogZone>,
    /// Bumped whenever the zone taking appends changes (a rollover).
    pub generation: u64,
    /// The sequence number the next zone gets (numbers of abandoned rollovers are skipped).
    pub next_seq: u32,
    /// A position past every record, at or before the next record appended.
    pub end: Position,
    /// Bytes of the zone header (where records start in every zone).
    pub header_bytes: u64,
    /// The log was removed.
    pub removed: bool,
}

impl Chain {
    /// A chain with no zones yet.
    pub fn new(header_bytes: u64) -> Chain {
        Chain {
            zones: BTreeMap::new(),
            generation: 0,
            next_seq: 0,
            end: Position::ZERO,
            header_bytes,
            removed: false,
        }
    }

    /// The first position of zone `seq`.
    pub fn zone_start(&self, seq: u32) -> Position {
        Position::new(seq, self.header_bytes as u32)
    }

    /// The log's first position: the first record of its first zone.
    pub fn start(&self) -> Position {
        match self.zones.keys().next() {
            Some(&seq) => self.zone_start(seq),
            None => self.end,
        }
    }

    /// The zone taking appends: `(seq, zone, written)`.
    pub fn open_zone(&self) -> Option<(u32, u32, u64)> {
        let (&seq, z) = self.zones.iter().next_back()?;
        match z.end {
            ZoneEnd::Open { written } => Some((seq, z.zone, written)),
            ZoneEnd::Sealed(_) => None,
        }
    }

    /// Records that an append of zone `seq` completed with data up to `end_bytes`.
    pub fn appended(&mut self, seq: u32, end_bytes: u64) {
        if let Some(LogZone {
            end: ZoneEnd::Open { written },
            ..
        }) = self.zones.get_mut(&seq)
        {
            *written = (*written).max(end_bytes);
        }
        self.end = self.end.max(Position::new(seq, end_bytes as u32));
    }

    /// Seals the last zone (it takes no more appends) with its records ending at `end`.
    pub fn seal_last(&mut self, end: Option<u64>) {
        if let Some((_, z)) = self.zones.iter_mut().next_back() {
            z.end = ZoneEnd::Sealed(end);
        }
    }

    /// Adds zone `zone` with sequence `seq` as the one taking appends.
    pub fn push_open(&mut self, seq: u32, zone: u32) {
        debug_assert!(self.zones.keys().next_back().is_none_or(|&s| s < seq));
        self.zones.insert(
            seq,
            LogZone {
                zone,
                end: ZoneEnd::Open {
                    written: self.header_bytes,
                },
            },
        );
        self.next_seq = self.next_seq.max(seq.saturating_add(1));
        self.generation += 1;
        if self.end < self.zone_start(seq) && self.zones.len() == 1 {
            self.end = self.zone_start(seq);
        }
    }

    /// The zones a `truncate_before(pos)` may drop: every zone but the last whose records
    /// are all before `pos` (by sequence number, or by a known end within `pos`'s zone).
    pub fn droppable_before(&self, pos: Position) -> Vec<(u32, u32)> {
        let last = self.zones.keys().next_back().copied();
        self.zones
            .iter()
            .filter(|(&seq, z)| {
                Some(seq) != last
                    && (seq < pos.seq()
                        || (seq == pos.seq()
                            && matches!(z.end, ZoneEnd::Sealed(Some(e)) if e <= pos.offset_bytes() as u64)))
            })
            .map(|(&seq, z)| (seq, z.zone))
            .collect()
    }

    /// Where a read at `cursor` goes. Moves past zone ends and gaps in the sequence
    /// numbers; `capacity` bounds zones with no known end.
    pub fn lookup(&self, cursor: Position, capacity: u64) -> Lookup {
        if cursor >= self.end {
            return Lookup::AtEnd(cursor);
        }
        let Some((&first, _)) = self.zones.iter().next() else {
            return Lookup::AtEnd(self.end);
        };
        if cursor.seq() < first {
            return Lookup::Truncated;
        }
        let mut cursor = cursor;
        for (&seq, z) in self.zones.range(cursor.seq()..) {
            if seq > cursor.seq() {
                cursor = self.zone_start(seq);
                if cursor >= self.end {
                    return Lookup::AtEnd(cursor);
                }
            }
            let from = (cursor.offset_bytes() as u64).max(self.header_bytes);
            let (data_end, unknown) = match z.end {
                ZoneEnd::Open { written } => (written, false),
                ZoneEnd::Sealed(Some(e)) => (e, false),
                ZoneEnd::Sealed(None) => (capacity, true),
            };
            let data_end = if seq == self.end.seq() {
                data_end.min(self.end.offset_bytes() as u64)
            } else {
                data_end
            };
            if from < data_end {
                return Lookup::Zone {
                    seq,
                    zone: z.zone,
                    from,
                    data_end,
                    sealed_unknown_end: unknown,
                };
            }
        }
        // No zone has data at or after the cursor: nothing between it and the end.
        Lookup::AtEnd(self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_walks_zones_and_stops_at_the_end() {
        let mut c = Chain::new(30);
        c.push_open(0, 7);
        c.appended(0, 100);
        c.seal_last(Some(100));
        c.push_open(2, 9); // sequence 1 was abandoned
        assert_eq!(c.start(), Position::new(0, 30));
        assert_eq!(c.end, Position::new(0, 100));
        assert!(matches!(
            c.lookup(Position::new(0, 30), 1 << 20),
            Lookup::Zone {
                seq: 0,
                zone: 7,
                from: 30,
                data_end: 100,
                ..
            }
        ));
        // At the end of zone 0 with nothing in zone 2 yet: at the end.
        assert_eq!(
            c.lookup(Position::new(0, 100), 1 << 20),
            Lookup::AtEnd(Position::new(0, 100))
        );
        c.appended(2, 50);
        assert!(matches!(
            c.lookup(Position::new(0, 100), 1 << 20),
            Lookup::Zone {
                seq: 2,
                zone: 9,
                from: 30,
                data_end: 50,
                ..
            }
        ));
        assert_eq!(c.droppable_before(Position::new(2, 30)), vec![(0, 7)]);
        assert_eq!(c.droppable_before(Position::new(0, 100)), vec![(0, 7)]);
        assert_eq!(c.droppable_before(Position::new(0, 99)), vec![]);
        c.zones.remove(&0);
        assert_eq!(c.lookup(Position::new(0, 30), 1 << 20), Lookup::Truncated);
        assert_eq!(c.start(), Position::new(2, 30));
    }
}
