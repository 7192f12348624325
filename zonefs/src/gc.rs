//! Zone garbage collection policy (when to collect, which zone) and its counters. The
//! relocation itself is in `fs` (it needs the file system's I/O); this module only decides.
//!
//! Policy (ZenFS-like, run by the writer that needs a fresh zone, so writers wait for it):
//! - **Threshold**: when free data zones drop below [`GC_FREE_PERCENT`] % of the usable data
//!   zones, each zone allocation first relocates up to [`BACKGROUND_VICTIMS`] victims: the
//!   closed zone with the most garbage (capacity − live bytes), if its garbage is at least
//!   `100 − 3 × (20 − free %)` % of a zone (ZenFS's rule: 100 % at 20 % free, 40 % at 0 %).
//! - **Reserve**: writers never take the last free zone ([`Policy::reserve`], 1 on devices of
//!   4+ data zones): it is where GC copies to when nothing else is free.
//! - **Urgent**: a writer that finds no free zone beyond the reserve relocates victims with
//!   at least [`Policy::urgent_garbage`] bytes of garbage (1/32 of a zone, at least 2 blocks)
//!   until a zone is free; when no zone has that much garbage the device is full
//!   ([`FsError::NoSpace`](crate::FsError::NoSpace)).

use crate::layout::Layout;
use crate::zones::ZoneTable;

/// GC starts when free data zones are below this percentage of the usable data zones.
pub const GC_FREE_PERCENT: u64 = 20;
/// Victims relocated per zone allocation below the threshold (bounds a writer's wait).
pub const BACKGROUND_VICTIMS: usize = 2;
/// Largest piece copied by one read + append during relocation.
pub const COPY_CHUNK_BYTES: u64 = 1 << 20;

/// Whether `free` of `usable` data zones is below [`GC_FREE_PERCENT`] (where GC starts).
pub fn below_threshold(free: u64, usable: u64) -> bool {
    free * 100 < GC_FREE_PERCENT * usable
}

/// Counters since the mount ([`ZoneFs::stats`](crate::ZoneFs::stats)). Write amplification
/// of the layer = `(data_bytes + journal_bytes) / user_bytes`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsStats {
    /// Bytes appended to files by callers.
    pub user_bytes: u64,
    /// Bytes written to data zones: user bytes, GC copies and padding (whole-block appends
    /// without the buffer, write-back padding).
    pub data_bytes: u64,
    /// Bytes written to the journal (records, snapshots, padding).
    pub journal_bytes: u64,
    /// Live bytes garbage collection copied.
    pub gc_bytes: u64,
    /// Zones garbage collection emptied and reset.
    pub gc_zones: u64,
}

impl FsStats {
    /// Device bytes written per user byte (1.0 when nothing was appended).
    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes == 0 {
            return 1.0;
        }
        (self.data_bytes + self.journal_bytes) as f64 / self.user_bytes as f64
    }
}

/// What one [`ZoneFs::gc`](crate::ZoneFs::gc) call did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Zones emptied and reset.
    pub zones_reclaimed: u64,
    /// Live bytes copied.
    pub bytes_moved: u64,
}

/// The GC decisions for one device.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// Zone capacity.
    capacity: u64,
    /// Usable data zones.
    usable: u64,
    /// Free zones writers leave to GC.
    pub reserve: usize,
    /// Garbage a victim needs when a writer is out of zones.
    pub urgent_garbage: u64,
}

impl Policy {
    /// The policy for `layout` and the zones in `zones`.
    pub fn of(layout: &Layout, zones: &ZoneTable) -> Policy {
        let usable = zones.usable_count();
        let capacity = layout.capacity();
        Policy {
            capacity,
            usable: usable as u64,
            reserve: usize::from(usable >= 4),
            urgent_garbage: (capacity / 32).max(2 * layout.block()).min(capacity),
        }
    }

    /// Free zones are below [`GC_FREE_PERCENT`].
    pub fn below_threshold(&self, zones: &ZoneTable) -> bool {
        below_threshold(zones.free_count() as u64, self.usable)
    }

    /// The victim below the threshold: the most garbage, if at least ZenFS's share.
    pub fn background_victim(&self, zones: &ZoneTable) -> Option<u32> {
        let free_pct = (zones.free_count() as u64 * 100) / self.usable.max(1);
        let need_pct = 100 - 3 * GC_FREE_PERCENT.saturating_sub(free_pct);
        let need = (self.capacity * need_pct / 100).max(self.urgent_garbage);
        zones.gc_victim(self.capacity, need)
    }

    /// The victim when a writer is out of zones: the most garbage, if at least
    /// [`urgent_garbage`](Policy::urgent_garbage).
    pub fn urgent_victim(&self, zones: &ZoneTable) -> Option<u32> {
        zones.gc_victim(self.capacity, self.urgent_garbage)
    }
}
