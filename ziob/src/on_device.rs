//! [`OnDevice`]: how much of each zone any thread may read straight from the device, without
//! a hop to the zone's owner core, and counts of such direct reads.
//!
//! The owner core's shard is the only writer of a zone's entry. It publishes the zone's
//! on-device prefix: the bytes below `device_wp` (what completed write-backs put on the
//! device, contiguous from the zone start), and where its buffer memory of the zone starts
//! (memory may still hold a clean copy of written-back bytes). A thread that is no core of
//! the runtime (a RocksDB thread behind `BlockingClient`) may read the whole prefix from
//! the device rather than wait for the owner's core. The runtime's cores do too where the
//! device reads at once (`read_now`: a page cache, RAM — a copy from memory either way,
//! where the owner's costs a hop to its core and back; with kv-demo's tables on
//! another core's zones, readrandom went from 36–50k to ~410k reads/s, docs/KV-BENCH.md
//! section 17); where a device read
//! waits, they read only below both ends and leave what memory holds to the owner
//! (measured: kv-demo's reads were slower when its cores read clean copies from the device,
//! RocksDB's readwhilewriting on the plugin ~2.4× as fast when its threads did). The owner
//! reads its own memory. Those bytes do not change on the device
//! until the zone is reset, so any thread may read them from the device itself. A reset is
//! announced before the device is touched — the zone's sequence number becomes odd and its
//! readable end 0 — and ends with the end still 0 and the number even again; a shrink of the
//! prefix (a resync after a failed write-back finds the device has less) bumps the number
//! twice around the smaller end. A reader takes the sequence number before its device read and
//! compares it after (a seqlock): if it changed, what it read may be another generation's
//! bytes and it reads again through the owner, who orders its read after the reset.
//!
//! A pass-through instance publishes nothing (it keeps no `device_wp`; its reads go to the
//! owner, whose read is the device read).

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

/// One zone's published state.
#[derive(Default)]
struct ZoneEntry {
    /// Even: stable; odd: a reset of the zone is under way.
    seq: AtomicU64,
    /// Bytes from the zone start that may be read from the device.
    end: AtomicU64,
    /// Where the owner's memory of the zone starts: a read on a core of the runtime below
    /// `end` but at or past this goes to the owner's memory instead (a hint; the device has
    /// those bytes too).
    mem_start: AtomicU64,
}

/// Counts of direct reads made on one core, on a cache line of its own (every direct read
/// updates them).
#[derive(Default)]
#[repr(align(64))]
struct CoreCounts {
    reads: AtomicU64,
    bytes: AtomicU64,
    fallbacks: AtomicU64,
}

/// Per zone, the readable on-device prefix and its seqlock; per core, direct-read counts.
pub(crate) struct OnDevice {
    zones: Box<[ZoneEntry]>,
    /// One per core of the instance, then one for every other thread (plain threads and
    /// runtime cores the instance does not run on).
    counts: Box<[CoreCounts]>,
}

/// What a reader saw before its device read: check it again after with
/// [`OnDevice::unchanged`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    zone: u32,
    seq: u64,
}

/// Direct reads made on one core: reads served, bytes, and reads that went to the owner
/// after all (the zone was reset during the device read, or the read failed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DirectCounts {
    pub(crate) reads: u64,
    pub(crate) bytes: u64,
    pub(crate) fallbacks: u64,
}

impl OnDevice {
    /// Nothing readable yet in any of `zones` zones; counts for the instance's `cores` cores
    /// and for every other thread.
    pub(crate) fn new(zones: u32, cores: usize) -> OnDevice {
        OnDevice {
            zones: (0..zones).map(|_| ZoneEntry::default()).collect(),
            counts: (0..=cores).map(|_| CoreCounts::default()).collect(),
        }
    }

    /// Owner: the device holds the first `end` bytes of `zone`, and the owner's memory of it
    /// starts at `mem_start`. A smaller `end` than before is a change of bytes readers may
    /// be reading: announced through the sequence number. Nothing is published while a
    /// reset of the zone is under way (the reset ends with nothing readable).
    pub(crate) fn publish(&self, zone: u32, end: u64, mem_start: u64) {
        let e = &self.zones[zone as usize];
        if e.seq.load(SeqCst) % 2 == 1 {
            return;
        }
        if e.mem_start.load(SeqCst) != mem_start {
            e.mem_start.store(mem_start, SeqCst);
        }
        let now = e.end.load(SeqCst);
        if end > now {
            e.end.store(end, SeqCst);
        } else if end < now {
            e.seq.fetch_add(1, SeqCst);
            e.end.store(end, SeqCst);
            e.seq.fetch_add(1, SeqCst);
        }
    }

    /// Owner, before it resets `zone` on the device: nothing of it is readable until the
    /// returned guard drops, and then nothing until [`publish`](Self::publish) says so
    /// again. A guard dropped without a reset done (an error, a cancelled task) only costs
    /// readers a trip to the owner until the owner publishes again.
    pub(crate) fn invalidate(&self, zone: u32) -> Invalidation<'_> {
        let e = &self.zones[zone as usize];
        e.seq.fetch_add(1, SeqCst);
        e.end.store(0, SeqCst);
        Invalidation { entry: e }
    }

    /// Reader: `Some` if `[offset, offset + len)` of `zone` may be read from the device
    /// now (no reset under way, all of it below the readable end) — on a core of the
    /// runtime (`on_core`), only if the owner's memory does not hold any of it either.
    pub(crate) fn readable(&self, zone: u32, offset: u64, len: u64, on_core: bool) -> Option<Seen> {
        let e = self.zones.get(zone as usize)?;
        let seq = e.seq.load(SeqCst);
        let mut end = e.end.load(SeqCst);
        if on_core {
            end = end.min(e.mem_start.load(SeqCst));
        }
        if seq % 2 == 1 || offset.checked_add(len)? > end {
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
    /// runtime): `Some(bytes)` served, `None` read through the owner after all. Reads on a
    /// core the instance does not run on count with those of other threads.
    pub(crate) fn count(&self, core: Option<usize>, served: Option<u64>) {
        let elsewhere = self.counts.len() - 1;
        let slot = core.filter(|&c| c < elsewhere).unwrap_or(elsewhere);
        let c = &self.counts[slot];
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

    /// The direct reads made on `core` so far; core 0's include those made on every other
    /// thread (see [`count`](Self::count)).
    pub(crate) fn counts(&self, core: usize) -> DirectCounts {
        let elsewhere = (core == 0).then_some(self.counts.len() - 1);
        let mut out = DirectCounts::default();
        for c in [Some(core), elsewhere]
            .into_iter()
            .flatten()
            .filter_map(|s| self.counts.get(s))
        {
            out.reads += c.reads.load(SeqCst);
            out.bytes += c.bytes.load(SeqCst);
            out.fallbacks += c.fallbacks.load(SeqCst);
        }
        out
    }
}

/// A zone announced as being reset (see [`OnDevice::invalidate`]); dropping it ends the
/// announcement with nothing readable.
pub(crate) struct Invalidation<'a> {
    entry: &'a ZoneEntry,
}

impl Drop for Invalidation<'_> {
    fn drop(&mut self) {
        self.entry.end.store(0, SeqCst);
        self.entry.seq.fetch_add(1, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_published_ranges_are_readable() {
        let d = OnDevice::new(4, 2);
        assert_eq!(d.readable(1, 0, 1, false), None, "nothing published");
        d.publish(1, 8192, 8192);
        assert!(d.readable(1, 0, 8192, false).is_some());
        assert!(d.readable(1, 4096, 4096, false).is_some());
        assert_eq!(
            d.readable(1, 4096, 4097, false),
            None,
            "past the readable end"
        );
        assert_eq!(d.readable(1, u64::MAX, 2, false), None, "overflowing range");
        assert_eq!(d.readable(0, 0, 1, false), None, "another zone");
        assert_eq!(d.readable(9, 0, 1, false), None, "no such zone");
        d.publish(1, 16384, 16384);
        assert!(
            d.readable(1, 8192, 8192, false).is_some(),
            "the end only grows"
        );
    }

    #[test]
    fn cores_leave_what_memory_holds_to_the_owner() {
        let d = OnDevice::new(1, 2);
        // Written back up to 16 KiB; memory still holds a clean copy from 4 KiB on.
        d.publish(0, 16384, 4096);
        assert!(
            d.readable(0, 4096, 8192, false).is_some(),
            "plain threads read the device"
        );
        assert_eq!(
            d.readable(0, 4096, 8192, true),
            None,
            "cores: the owner's memory"
        );
        assert!(
            d.readable(0, 0, 4096, true).is_some(),
            "below memory: the device"
        );
        // Evicted: memory starts where the written-back bytes end.
        d.publish(0, 16384, 16384);
        assert!(d.readable(0, 4096, 12288, true).is_some());
        assert_eq!(
            d.readable(0, 4096, 12289, true),
            None,
            "past the readable end"
        );
    }

    #[test]
    fn a_reset_during_a_read_is_seen_after_it() {
        let d = OnDevice::new(2, 1);
        d.publish(0, 4096, 4096);
        let before = d.readable(0, 0, 4096, false).unwrap();
        {
            let _reset = d.invalidate(0);
            assert_eq!(
                d.readable(0, 0, 1, false),
                None,
                "nothing readable during a reset"
            );
            assert!(!d.unchanged(before));
        }
        assert!(
            !d.unchanged(before),
            "a read across a whole reset is caught too"
        );
        assert_eq!(
            d.readable(0, 0, 1, false),
            None,
            "after a reset, until published"
        );
        d.publish(0, 4096, 4096);
        let after = d.readable(0, 0, 4096, false).unwrap();
        assert!(d.unchanged(after));
        assert_ne!(before, after);
    }

    #[test]
    fn nothing_published_during_a_reset_survives_it() {
        // A publish while the reset waits for the device (from a write-back that completed
        // just before it) must not outlive the reset: it ends with nothing readable.
        let d = OnDevice::new(1, 1);
        d.publish(0, 8192, 8192);
        {
            let _reset = d.invalidate(0);
            d.publish(0, 8192, 8192);
            assert_eq!(d.readable(0, 0, 1, false), None);
        }
        assert_eq!(
            d.readable(0, 0, 1, false),
            None,
            "a stale prefix outlived the reset"
        );
        d.publish(0, 4096, 4096);
        assert!(d.readable(0, 0, 4096, false).is_some());
    }

    #[test]
    fn counts_of_cores_outside_the_instance_go_with_other_threads() {
        let d = OnDevice::new(1, 2);
        d.count(Some(5), Some(10));
        d.count(None, Some(1));
        assert_eq!(d.counts(0).reads, 2);
        assert_eq!(d.counts(0).bytes, 11);
        assert_eq!(d.counts(1).reads, 0);
    }

    #[test]
    fn a_shrink_is_announced_like_a_reset() {
        let d = OnDevice::new(1, 1);
        d.publish(0, 8192, 8192);
        let seen = d.readable(0, 0, 4096, false).unwrap();
        d.publish(0, 4096, 4096);
        assert!(
            !d.unchanged(seen),
            "bytes past the new end may have changed"
        );
        assert!(d.readable(0, 0, 4096, false).is_some());
        assert_eq!(d.readable(0, 4096, 1, false), None);
    }

    #[test]
    fn counts_are_per_core() {
        let d = OnDevice::new(1, 2);
        d.count(Some(1), Some(100));
        d.count(Some(1), Some(28));
        d.count(Some(1), None);
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
