//! [`OnDevice`]: how much of each zone any core may read straight from the device, without
//! a hop to the zone's owner core.
//!
//! The owner core's shard is the only writer of a zone's entry: it publishes the zone's
//! `device_wp` (bytes the device has, contiguous from the zone start) as write-backs land.
//! Those bytes do not change on the device until the zone is reset, so a reader on another
//! core may read them from the device itself. A reset (or a shrink of `device_wp`, after a
//! resync) is announced first: the zone's sequence number becomes odd and its readable end
//! 0 before the device is touched, and even again after. A reader takes the sequence number
//! before it reads and compares it after (a seqlock): if it changed, what it read may be
//! the reset zone's bytes and it reads again through the owner, who waits for the reset.
//!
//! Only whole readable ranges are read this way; data still in buffer memory is the owner's
//! to serve. A pass-through instance publishes nothing (its reads have no hop to save
//! beyond the device read itself, and it keeps no `device_wp`).

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

/// One zone's published state.
#[derive(Default)]
struct ZoneEntry {
    /// Even: stable; odd: the zone's on-device bytes are being invalidated (a reset).
    seq: AtomicU64,
    /// Bytes from the zone start that any core may read from the device.
    end: AtomicU64,
}

/// Counts of direct reads made on one core.
#[derive(Default)]
struct CoreCounts {
    reads: AtomicU64,
    bytes: AtomicU64,
    fallbacks: AtomicU64,
}

/// Per zone, the readable on-device prefix and its seqlock; per core, direct-read counts.
pub(crate) struct OnDevice {
    zones: Box<[ZoneEntry]>,
    counts: Box<[CoreCounts]>,
}

/// What a reader saw before its device read: check it again after with
/// [`OnDevice::unchanged`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    zone: u32,
    seq: u64,
}

/// Direct reads made on one core: reads served, bytes, and reads that found their zone
/// reset meanwhile (and went to the owner instead).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DirectCounts {
    pub(crate) reads: u64,
    pub(crate) bytes: u64,
    pub(crate) fallbacks: u64,
}

impl OnDevice {
    /// Nothing readable yet in any of `zones` zones; counts for `cores` cores and for the
    /// threads that are no core.
    pub(crate) fn new(zones: u32, cores: usize) -> OnDevice {
        OnDevice {
            zones: (0..zones).map(|_| ZoneEntry::default()).collect(),
            counts: (0..=cores).map(|_| CoreCounts::default()).collect(),
        }
    }

    /// Owner: the device has the first `end` bytes of `zone`. A smaller `end` than before is
    /// a change of bytes readers may be reading: announced through the sequence number.
    pub(crate) fn publish(&self, zone: u32, end: u64) {
        let e = &self.zones[zone as usize];
        if end >= e.end.load(SeqCst) {
            e.end.store(end, SeqCst);
        } else {
            e.seq.fetch_add(1, SeqCst);
            e.end.store(end, SeqCst);
            e.seq.fetch_add(1, SeqCst);
        }
    }

    /// Owner, before it resets `zone` on the device: nothing of it is readable until the
    /// returned guard drops (then the readable end stays 0 until [`publish`](Self::publish)).
    /// A guard dropped without a reset done (an error, a cancelled task) only costs readers
    /// a trip to the owner.
    pub(crate) fn invalidate(&self, zone: u32) -> Invalidation<'_> {
        let e = &self.zones[zone as usize];
        e.seq.fetch_add(1, SeqCst);
        e.end.store(0, SeqCst);
        Invalidation { entry: e }
    }

    /// Reader: `Some` if `[offset, offset + len)` of `zone` may be read from the device
    /// now (no reset under way, all of it below the readable end).
    pub(crate) fn readable(&self, zone: u32, offset: u64, len: u64) -> Option<Seen> {
        let e = self.zones.get(zone as usize)?;
        let seq = e.seq.load(SeqCst);
        if seq % 2 == 1 || offset.checked_add(len)? > e.end.load(SeqCst) {
            return None;
        }
        Some(Seen { zone, seq })
    }

    /// Reader, after its device read: true if the zone was not reset (or shrunk) since
    /// [`readable`](Self::readable), so the bytes read are the zone's.
    pub(crate) fn unchanged(&self, seen: Seen) -> bool {
        self.zones[seen.zone as usize].seq.load(SeqCst) == seen.seq
    }

    /// Counts a direct read made on `core` (`None`: on a thread that is no core of the
    /// runtime): `Some(bytes)` served, `None` read through the owner after all.
    pub(crate) fn count(&self, core: Option<usize>, served: Option<u64>) {
        let slot = core.unwrap_or(self.counts.len() - 1);
        let Some(c) = self.counts.get(slot) else {
            return;
        };
        match served {
            Some(bytes) => {
                c.reads.fetch_add(1, SeqCst);
                c.bytes.fetch_add(bytes, SeqCst);
            }
            None => {
                c.fallbacks.fetch_add(1, SeqCst);
            }
        }
    }

    /// The direct reads made on `core` so far; core 0's include those made on threads that
    /// are no core of the runtime.
    pub(crate) fn counts(&self, core: usize) -> DirectCounts {
        let mut slots = vec![core];
        if core == 0 {
            slots.push(self.counts.len() - 1);
        }
        let mut out = DirectCounts::default();
        for c in slots.into_iter().filter_map(|s| self.counts.get(s)) {
            out.reads += c.reads.load(SeqCst);
            out.bytes += c.bytes.load(SeqCst);
            out.fallbacks += c.fallbacks.load(SeqCst);
        }
        out
    }
}

/// A zone announced as being reset (see [`OnDevice::invalidate`]); dropping it ends the
/// announcement.
pub(crate) struct Invalidation<'a> {
    entry: &'a ZoneEntry,
}

impl Drop for Invalidation<'_> {
    fn drop(&mut self) {
        self.entry.seq.fetch_add(1, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_published_ranges_are_readable() {
        let d = OnDevice::new(4, 2);
        assert_eq!(d.readable(1, 0, 1), None, "nothing published");
        d.publish(1, 8192);
        assert!(d.readable(1, 0, 8192).is_some());
        assert!(d.readable(1, 4096, 4096).is_some());
        assert_eq!(d.readable(1, 4096, 4097), None, "past the readable end");
        assert_eq!(d.readable(1, u64::MAX, 2), None, "overflowing range");
        assert_eq!(d.readable(0, 0, 1), None, "another zone");
        assert_eq!(d.readable(9, 0, 1), None, "no such zone");
        d.publish(1, 16384);
        assert!(d.readable(1, 8192, 8192).is_some(), "the end only grows");
    }

    #[test]
    fn a_reset_during_a_read_is_seen_after_it() {
        let d = OnDevice::new(2, 1);
        d.publish(0, 4096);
        let before = d.readable(0, 0, 4096).unwrap();
        {
            let _reset = d.invalidate(0);
            assert_eq!(d.readable(0, 0, 1), None, "nothing readable during a reset");
            assert!(!d.unchanged(before));
        }
        assert!(
            !d.unchanged(before),
            "a read across a whole reset is caught too"
        );
        assert_eq!(d.readable(0, 0, 1), None, "after a reset, until published");
        d.publish(0, 4096);
        let after = d.readable(0, 0, 4096).unwrap();
        assert!(d.unchanged(after));
        assert_ne!(before, after);
    }

    #[test]
    fn a_shrink_is_announced_like_a_reset() {
        let d = OnDevice::new(1, 1);
        d.publish(0, 8192);
        let seen = d.readable(0, 0, 4096).unwrap();
        d.publish(0, 4096);
        assert!(
            !d.unchanged(seen),
            "bytes past the new end may have changed"
        );
        assert!(d.readable(0, 0, 4096).is_some());
        assert_eq!(d.readable(0, 4096, 1), None);
    }

    #[test]
    fn counts_are_per_core() {
        let d = OnDevice::new(1, 2);
        d.count(Some(1), Some(100));
        d.count(Some(1), Some(28));
        d.count(Some(1), None);
        d.count(Some(7), Some(1)); // no such core: not counted
        assert_eq!(d.counts(0), DirectCounts::default());
        d.count(None, Some(5)); // a thread that is no core: with core 0's
        assert_eq!(
            d.counts(0),
            DirectCounts {
                reads: 1,
                bytes: 5,
                fallbacks: 0
            }
        );
        assert_eq!(
            d.counts(1),
            DirectCounts {
                reads: 2,
                bytes: 128,
                fallbacks: 1
            }
        );
    }
}
