//! Space accounting over the data zones (`df`), the figures `zenfs df` prints: free, used
//! (live), reclaimable, space amplification.

use crate::zones::{ZoneTable, ZoneUse};

/// What the data zones hold, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpaceUsage {
    /// Writable bytes of all usable data zones.
    pub total_bytes: u64,
    /// Bytes still writable: free zones whole, plus what is left in open zones.
    pub free_bytes: u64,
    /// Bytes in files (live extents, synced or not).
    pub used_bytes: u64,
    /// Bytes written or spent that no file holds, in zones that still hold live data (a zone
    /// without live data is reset at once): dead data, padding, and the unwritten rest of
    /// finished zones. Zone garbage collection reclaims them by moving the live data out.
    pub reclaimable_bytes: u64,
    /// The part of `reclaimable_bytes` in zones with no room left (full or finished): what
    /// `zenfs df` counts as reclaimable, which leaves out the dead bytes of zones still being
    /// written.
    pub reclaimable_in_full_zones_bytes: u64,
    /// Usable data zones.
    pub data_zones: u32,
    /// Zones free (empty).
    pub free_zones: u32,
}

impl SpaceUsage {
    /// Sums the table (zone capacity `capacity`).
    pub fn of(zones: &ZoneTable, capacity: u64) -> SpaceUsage {
        let mut u = SpaceUsage {
            total_bytes: 0,
            free_bytes: 0,
            used_bytes: 0,
            reclaimable_bytes: 0,
            reclaimable_in_full_zones_bytes: 0,
            data_zones: 0,
            free_zones: 0,
        };
        for (_, z) in zones.iter() {
            if z.usage == ZoneUse::Unusable {
                continue;
            }
            u.data_zones += 1;
            u.total_bytes += capacity;
            u.used_bytes += z.live;
            u.reclaimable_bytes += z.written.saturating_sub(z.live);
            if z.written >= capacity {
                u.reclaimable_in_full_zones_bytes += z.written.saturating_sub(z.live);
            }
            match z.usage {
                ZoneUse::Free => {
                    u.free_zones += 1;
                    u.free_bytes += capacity;
                }
                ZoneUse::Open(_) => u.free_bytes += capacity.saturating_sub(z.written),
                _ => {}
            }
        }
        u
    }

    /// Bytes of the device the files occupy: used + reclaimable (every byte written or
    /// given up in a zone that holds live data).
    pub fn occupied_bytes(&self) -> u64 {
        self.used_bytes + self.reclaimable_bytes
    }

    /// Space amplification: bytes occupied in zones (used + reclaimable) over bytes in files;
    /// 1.0 when nothing is stored. (`zenfs df` prints the excess, reclaimable / used, as a
    /// percentage: that is `(space_amplification() - 1) * 100`.)
    pub fn space_amplification(&self) -> f64 {
        if self.used_bytes == 0 {
            return 1.0;
        }
        (self.used_bytes + self.reclaimable_bytes) as f64 / self.used_bytes as f64
    }

    /// Space amplification as `zenfs df` counts it: reclaimable bytes in full zones only
    /// ([`reclaimable_in_full_zones_bytes`](Self::reclaimable_in_full_zones_bytes)); never
    /// more than [`space_amplification`](Self::space_amplification). For comparing with
    /// ZenFS; a small file system whose data all sit in zones still being written shows
    /// about 1.0 here whatever their dead bytes.
    pub fn space_amplification_full_zones(&self) -> f64 {
        if self.used_bytes == 0 {
            return 1.0;
        }
        (self.used_bytes + self.reclaimable_in_full_zones_bytes) as f64 / self.used_bytes as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zones::DataZone;

    /// Dead bytes count as reclaimable in every zone that holds live data, and in the
    /// full-zones figure only where the zone has no room left.
    #[test]
    fn full_zones_figure_counts_only_zones_without_room() {
        let zone = |usage, written, live| DataZone {
            usage,
            written,
            live,
        };
        let table = ZoneTable::new(
            4,
            vec![
                zone(ZoneUse::Free, 0, 0),
                zone(ZoneUse::Closed, 100, 60),
                zone(ZoneUse::Closed, 70, 20),
                zone(ZoneUse::Unusable, 100, 0),
            ],
            2,
        );
        let u = SpaceUsage::of(&table, 100);
        assert_eq!((u.data_zones, u.free_zones, u.total_bytes), (3, 1, 300));
        assert_eq!((u.used_bytes, u.reclaimable_bytes), (80, 90));
        assert_eq!(u.reclaimable_in_full_zones_bytes, 40);
        assert!((u.space_amplification() - 170.0 / 80.0).abs() < 1e-12);
        assert!((u.space_amplification_full_zones() - 120.0 / 80.0).abs() < 1e-12);
    }
}
