//! The data zones' table: which are free, which class slot each open zone serves, how far each
//! is written and how many of its bytes are live (in some file's extents).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// What a data zone is used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneUse {
    /// Empty, ready to be opened.
    Free,
    /// Being appended to by the class slot given.
    Open(usize),
    /// Written and left (Full or finished); freed when its live bytes drop to 0.
    Closed,
    /// Offline or read-only on the device: never used.
    Unusable,
}

/// One data zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataZone {
    /// What it is used for.
    pub usage: ZoneUse,
    /// Bytes written from its start, as far as this layer knows (the write pointer).
    pub written: u64,
    /// Bytes of it in files' extents.
    pub live: u64,
}

/// Every data zone (`first..zone_count`) and the open zone of each class slot.
#[derive(Debug)]
pub struct ZoneTable {
    first: u32,
    zones: Vec<DataZone>,
    /// Bytes of each zone known to be on the device from its start: written back (by a sync)
    /// or flushed (by garbage collection), so durable by the end of the next journal commit
    /// at the latest, whose device cache flush covers every write-back completed before it.
    on_device: Vec<u64>,
    /// Appends in flight to each zone (issued without the state lock): such a zone is
    /// neither reset nor garbage collected. Counted by [`AppendGuard`]s, which a dropped
    /// append future also ends.
    appending: Arc<[AtomicU32]>,
    open: Vec<Option<u32>>,
    free: BTreeSet<u32>,
}

impl ZoneTable {
    /// A table of data zones `first..first + zones.len()` with `slots` class slots; a zone
    /// marked `Open(slot)` becomes that slot's open zone (mount adopts a zone a class left
    /// partly written; at most one per slot, the slot below `slots`).
    pub fn new(first: u32, zones: Vec<DataZone>, slots: usize) -> ZoneTable {
        let mut open = vec![None; slots];
        for (i, z) in zones.iter().enumerate() {
            if let ZoneUse::Open(slot) = z.usage {
                debug_assert!(
                    slot < slots && open[slot].is_none(),
                    "zone {} adopted for slot {slot} of {slots}, held by {:?}",
                    first + i as u32,
                    open.get(slot)
                );
                if let Some(o) = open.get_mut(slot) {
                    o.get_or_insert(first + i as u32);
                }
            }
        }
        let free = zones
            .iter()
            .enumerate()
            .filter(|(_, z)| z.usage == ZoneUse::Free)
            .map(|(i, _)| first + i as u32)
            .collect();
        ZoneTable {
            first,
            // What mount found on the device is durable.
            on_device: zones.iter().map(|z| z.written).collect(),
            appending: zones.iter().map(|_| AtomicU32::new(0)).collect(),
            zones,
            open,
            free,
        }
    }

    /// Zone `zone`'s entry.
    pub fn get(&self, zone: u32) -> &DataZone {
        &self.zones[(zone - self.first) as usize]
    }

    fn get_mut(&mut self, zone: u32) -> &mut DataZone {
        &mut self.zones[(zone - self.first) as usize]
    }

    /// Every data zone with its index.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &DataZone)> {
        self.zones
            .iter()
            .enumerate()
            .map(move |(i, z)| (self.first + i as u32, z))
    }

    /// Number of class slots.
    pub fn slots(&self) -> usize {
        self.open.len()
    }

    /// The zone slot `slot` appends to, if one is open.
    pub fn open_zone(&self, slot: usize) -> Option<u32> {
        self.open[slot]
    }

    /// Opens the lowest free zone `preferred` accepts for `slot`, else the lowest free zone;
    /// None when no zone is free.
    pub fn open_new(&mut self, slot: usize, preferred: impl Fn(u32) -> bool) -> Option<u32> {
        debug_assert!(self.open[slot].is_none());
        let zone = self
            .free
            .iter()
            .copied()
            .find(|&z| preferred(z))
            .or(self.free.first().copied())?;
        self.free.remove(&zone);
        *self.get_mut(zone) = DataZone {
            usage: ZoneUse::Open(slot),
            written: 0,
            live: 0,
        };
        self.on_device[(zone - self.first) as usize] = 0;
        self.open[slot] = Some(zone);
        Some(zone)
    }

    /// Bytes of `zone` known to be on the device from its start (durable by the end of the
    /// next journal commit).
    pub fn on_device(&self, zone: u32) -> u64 {
        self.on_device[(zone - self.first) as usize]
    }

    /// A write-back (or flush) of `zone` that started when `upto` bytes were written to it
    /// has finished.
    pub fn note_on_device(&mut self, zone: u32, upto: u64) {
        let f = &mut self.on_device[(zone - self.first) as usize];
        *f = (*f).max(upto);
    }

    /// An append to `zone` is issued: in flight until the guard is dropped (under the state
    /// lock once its result is recorded; anywhere when the append's future is dropped, whose
    /// bytes then are dead).
    pub fn begin_append(&mut self, zone: u32) -> AppendGuard {
        let index = (zone - self.first) as usize;
        self.appending[index].fetch_add(1, Ordering::SeqCst);
        AppendGuard {
            counts: self.appending.clone(),
            index,
        }
    }

    /// Whether appends to `zone` are in flight.
    pub fn is_appending(&self, zone: u32) -> bool {
        self.appending[(zone - self.first) as usize].load(Ordering::SeqCst) > 0
    }

    /// Zones free (empty).
    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Zones that can hold data (not offline or read-only).
    pub fn usable_count(&self) -> usize {
        self.zones
            .iter()
            .filter(|z| z.usage != ZoneUse::Unusable)
            .count()
    }

    /// The closed zone with the most garbage (`capacity` - live bytes), if it has at least
    /// `min_garbage`: the next victim of garbage collection. Ties go to the lowest index.
    /// A closed zone without live data is normally reset by the operation that emptied it,
    /// but not when that operation's future was dropped (or failed) before: then it is a
    /// victim like any other, with nothing to move.
    pub fn gc_victim(&self, capacity: u64, min_garbage: u64) -> Option<u32> {
        self.iter()
            .filter(|(i, z)| z.usage == ZoneUse::Closed && !self.is_appending(*i))
            .map(|(i, z)| (capacity.saturating_sub(z.live), i))
            .filter(|(g, _)| *g >= min_garbage)
            .max_by_key(|(g, i)| (*g, std::cmp::Reverse(*i)))
            .map(|(_, i)| i)
    }

    /// `len` bytes appended to `zone` end at `end`; `live` of them belong to a file.
    pub fn note_append(&mut self, zone: u32, end: u64, live: u64) {
        let z = self.get_mut(zone);
        z.written = z.written.max(end);
        z.live += live;
    }

    /// Adds `len` live bytes to `zone` (building the table at mount; a relocation's copies
    /// once its moves are applied).
    pub fn add_live(&mut self, zone: u32, len: u64) {
        self.get_mut(zone).live += len;
    }

    /// The zone is left (full or finished): no more appends to it.
    pub fn close(&mut self, zone: u32) {
        if let ZoneUse::Open(slot) = self.get(zone).usage {
            self.open[slot] = None;
        }
        let z = self.get_mut(zone);
        if z.usage != ZoneUse::Free {
            z.usage = ZoneUse::Closed;
        }
    }

    /// Removes `len` live bytes from `zone`; true when the zone now holds no live byte and
    /// has data (it should be reset).
    pub fn free_bytes(&mut self, zone: u32, len: u64) -> bool {
        let z = self.get_mut(zone);
        z.live = z.live.saturating_sub(len);
        z.live == 0 && z.written > 0 && matches!(z.usage, ZoneUse::Open(_) | ZoneUse::Closed)
    }

    /// The zone was reset: it is free again.
    pub fn reset_done(&mut self, zone: u32) {
        self.close(zone);
        *self.get_mut(zone) = DataZone {
            usage: ZoneUse::Free,
            written: 0,
            live: 0,
        };
        self.on_device[(zone - self.first) as usize] = 0;
        self.free.insert(zone);
    }
}

/// One append in flight to a zone ([`ZoneTable::begin_append`]); ends when dropped.
#[derive(Debug)]
pub struct AppendGuard {
    counts: Arc<[AtomicU32]>,
    index: usize,
}

impl Drop for AppendGuard {
    fn drop(&mut self) {
        self.counts[self.index].fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn free() -> DataZone {
        DataZone {
            usage: ZoneUse::Free,
            written: 0,
            live: 0,
        }
    }

    #[test]
    fn open_fill_free_reset() {
        let mut t = ZoneTable::new(2, vec![free(), free(), free()], 2);
        assert_eq!(t.open_new(0, |_| false), Some(2));
        assert_eq!(t.open_new(1, |_| false), Some(3));
        t.note_append(2, 100, 100);
        t.note_append(2, 200, 100);
        assert!(!t.free_bytes(2, 100));
        assert!(t.free_bytes(2, 100));
        t.reset_done(2);
        assert_eq!(t.open_zone(0), None);
        t.close(3);
        assert_eq!(t.open_zone(1), None);
        assert_eq!(t.open_new(1, |_| false), Some(2));
        assert_eq!(t.open_new(0, |_| false), Some(4));
        // A zone without data is not reported as needing a reset.
        assert!(!t.free_bytes(4, 0));
    }

    #[test]
    fn opens_the_lowest_preferred_free_zone_else_the_lowest() {
        let mut t = ZoneTable::new(2, vec![free(), free(), free(), free()], 3);
        let odd = |z: u32| z % 2 == 1;
        assert_eq!(t.open_new(0, odd), Some(3));
        assert_eq!(t.open_new(1, odd), Some(5));
        // No odd zone is free: the lowest free one.
        assert_eq!(t.open_new(2, odd), Some(2));
        assert_eq!(t.free_count(), 1);
    }
}
