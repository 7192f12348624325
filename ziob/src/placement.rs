//! Which core owns which zone, and how the device's open/active limits are shared.
//!
//! Rule: zone `z` is owned by core `z % cores`. Each core gets an equal share of the device's
//! Max Open and Max Active Resources (the first `limit % cores` cores get one more), so the
//! shards never exceed the device's limits together without talking to each other.

/// The core that owns `zone`.
pub fn owner_core(zone: u32, cores: usize) -> usize {
    zone as usize % cores
}

/// This core's share of a device-wide resource limit (`None` = no limit).
pub fn resource_share(limit: Option<u32>, core: usize, cores: usize) -> Option<u32> {
    limit.map(|l| {
        let base = l / cores as u32;
        let extra = u32::from((core as u32) < l % cores as u32);
        base + extra
    })
}

/// The zones core `core` owns, in order.
pub fn owned_zones(zone_count: u32, core: usize, cores: usize) -> impl Iterator<Item = u32> {
    (core as u32..zone_count).step_by(cores)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_to_the_limit() {
        for limit in 1..40u32 {
            for cores in 1..8usize {
                let sum: u32 = (0..cores)
                    .map(|c| resource_share(Some(limit), c, cores).unwrap())
                    .sum();
                assert_eq!(sum, limit, "limit {limit} cores {cores}");
            }
        }
        assert_eq!(resource_share(None, 0, 4), None);
    }

    #[test]
    fn every_zone_has_exactly_one_owner() {
        let cores = 3;
        let mut seen = [0; 10];
        for c in 0..cores {
            for z in owned_zones(10, c, cores) {
                assert_eq!(owner_core(z, cores), c);
                seen[z as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&n| n == 1));
    }
}
