//! The free-zone allocator of a [`LogSpace`](super::LogSpace): which zones of the space are
//! free, which hold stale data and need a reset before use, and how many are active.
//!
//! A zone is *active* while it is open or closed (written but not Full): the device allows
//! at most `limit` of those (its Max Open / Max Active Resources as the buffer presents them:
//! none with the buffer on, the device's with it off). Every log holds one active zone (the
//! one it appends to); zones it finished are Full and not active. Pure bookkeeping, no I/O.

use std::collections::{BTreeMap, BTreeSet};

/// A zone handed out by [`ZoneAllocator::take`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The zone.
    pub zone: u32,
    /// The zone holds stale data: reset it before writing.
    pub needs_reset: bool,
}

/// Why no zone could be handed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoZone {
    /// Every zone of the space is used by a log.
    Exhausted {
        /// Zones of the space in use by logs.
        used: usize,
    },
    /// Zones are free, but the active-zone limit is reached.
    ActiveLimit {
        /// The limit.
        limit: u32,
    },
}

/// Free, stale and active zones of one space.
#[derive(Debug, Clone, Default)]
pub struct ZoneAllocator {
    /// Empty zones.
    free: BTreeSet<u32>,
    /// Zones with stale data (no log owns them), and whether each is active.
    stale: BTreeMap<u32, bool>,
    /// Zones owned by logs that are active.
    active: BTreeSet<u32>,
    /// Zones owned by logs.
    owned: BTreeSet<u32>,
    /// Max active zones, if limited.
    limit: Option<u32>,
}

impl ZoneAllocator {
    /// An allocator with no zones and at most `limit` active zones.
    pub fn new(limit: Option<u32>) -> Self {
        ZoneAllocator {
            limit,
            ..Default::default()
        }
    }

    /// Adds an Empty zone.
    pub fn add_free(&mut self, zone: u32) {
        self.free.insert(zone);
    }

    /// Adds a zone with stale data (active if it is open or closed).
    pub fn add_stale(&mut self, zone: u32, active: bool) {
        self.stale.insert(zone, active);
    }

    /// Adds a zone a log owns (found by recovery).
    pub fn add_owned(&mut self, zone: u32, active: bool) {
        self.owned.insert(zone);
        if active {
            self.active.insert(zone);
        }
    }

    /// Active zones: owned ones and stale ones.
    pub fn active_count(&self) -> usize {
        self.active.len() + self.stale.values().filter(|&&a| a).count()
    }

    /// Empty zones.
    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Zones with stale data.
    pub fn stale_count(&self) -> usize {
        self.stale.len()
    }

    /// Hands out a zone for a log (it becomes owned and active): an Empty one while the
    /// active limit allows, else a stale one (its reset frees an active resource if it held
    /// one). Lowest index first, among the zones `preferred` accepts if it accepts any of
    /// that kind.
    pub fn take(&mut self, preferred: impl Fn(u32) -> bool) -> Result<Grant, NoZone> {
        let below_limit = self.limit.is_none_or(|l| self.active_count() < l as usize);
        let free = self
            .free
            .iter()
            .find(|&&z| preferred(z))
            .or(self.free.first())
            .copied();
        let usable_stale = |(&z, &active): (&u32, &bool)| (active || below_limit).then_some(z);
        let stale = self
            .stale
            .iter()
            .filter_map(usable_stale)
            .find(|&z| preferred(z))
            .or_else(|| self.stale.iter().find_map(usable_stale));
        let grant = if let (true, Some(z)) = (below_limit, free) {
            self.free.remove(&z);
            Grant {
                zone: z,
                needs_reset: false,
            }
        } else if let Some(z) = stale {
            self.stale.remove(&z);
            Grant {
                zone: z,
                needs_reset: true,
            }
        } else if !below_limit && (!self.free.is_empty() || !self.stale.is_empty()) {
            return Err(NoZone::ActiveLimit {
                limit: self.limit.unwrap_or(u32::MAX),
            });
        } else {
            return Err(NoZone::Exhausted {
                used: self.owned.len(),
            });
        };
        self.owned.insert(grant.zone);
        self.active.insert(grant.zone);
        Ok(grant)
    }

    /// An owned zone became Full (finished): it no longer holds an active resource.
    pub fn mark_full(&mut self, zone: u32) {
        self.active.remove(&zone);
    }

    /// An owned zone was reset: it is free again.
    pub fn release_reset(&mut self, zone: u32) {
        self.owned.remove(&zone);
        self.active.remove(&zone);
        self.stale.remove(&zone);
        self.free.insert(zone);
    }

    /// An owned zone is given up without a reset (e.g. a reset or header write that failed
    /// or was dropped): it holds stale data and, if it was active, stays active until reset.
    pub fn release_stale(&mut self, zone: u32) {
        self.owned.remove(&zone);
        let active = self.active.remove(&zone);
        self.stale.insert(zone, active);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prefers_free_then_stale_and_respects_the_limit() {
        let mut a = ZoneAllocator::new(Some(2));
        for z in 0..4 {
            a.add_free(z);
        }
        a.add_stale(9, false);
        assert_eq!(
            a.take(|_| false).unwrap(),
            Grant {
                zone: 0,
                needs_reset: false
            }
        );
        assert_eq!(
            a.take(|_| false).unwrap(),
            Grant {
                zone: 1,
                needs_reset: false
            }
        );
        assert_eq!(a.take(|_| false), Err(NoZone::ActiveLimit { limit: 2 }));
        a.mark_full(0);
        assert_eq!(
            a.take(|_| false).unwrap(),
            Grant {
                zone: 2,
                needs_reset: false
            }
        );
        a.mark_full(1);
        a.mark_full(2);
        a.release_stale(2); // a Full zone given up without a reset: stale, not active
        assert_eq!(
            a.take(|_| false).unwrap(),
            Grant {
                zone: 3,
                needs_reset: false
            }
        );
        assert_eq!(
            a.take(|_| false).unwrap(),
            Grant {
                zone: 2,
                needs_reset: true
            }
        );
        assert_eq!(a.active_count(), 2);
        // Zone 9 is stale but not active: taking it would exceed the limit.
        assert_eq!(a.take(|_| false), Err(NoZone::ActiveLimit { limit: 2 }));
        a.release_stale(3); // still active while stale
        assert_eq!(
            a.take(|_| false).unwrap(),
            Grant {
                zone: 3,
                needs_reset: true
            }
        );
    }

    #[test]
    fn exhausted_when_everything_is_owned() {
        let mut a = ZoneAllocator::new(None);
        a.add_free(5);
        a.add_owned(6, false);
        a.take(|_| false).unwrap();
        assert_eq!(a.take(|_| false), Err(NoZone::Exhausted { used: 2 }));
        a.release_reset(5);
        assert_eq!(a.take(|_| false).unwrap().zone, 5);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Take,
        Full(usize),
        Reset(usize),
        Stale(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => Just(Op::Take),
            2 => (0usize..64).prop_map(Op::Full),
            1 => (0usize..64).prop_map(Op::Reset),
            1 => (0usize..64).prop_map(Op::Stale),
        ]
    }

    proptest! {
        /// Against a model: every zone is in exactly one place, a zone is never handed out
        /// twice, the active count never exceeds the limit, `take` fails only when no
        /// zone could be handed out without breaking the limit, and an Empty zone handed
        /// out is the lowest preferred one when one is Empty (zones of one parity
        /// preferred, or none).
        #[test]
        fn never_double_grants_or_exceeds_the_limit(
            zones in 1u32..12, limit in proptest::option::of(1u32..5),
            parity in proptest::option::of(0u32..2),
            ops in proptest::collection::vec(op(), 1..80)
        ) {
            let preferred = |z: u32| parity.is_some_and(|p| z % 2 == p);
            let mut a = ZoneAllocator::new(limit);
            for z in 0..zones { a.add_free(z); }
            // Model: owned zones and whether each is active.
            let mut owned: BTreeMap<u32, bool> = BTreeMap::new();
            let mut stale_active: BTreeMap<u32, bool> = BTreeMap::new();
            for o in ops {
                match o {
                    Op::Take => {
                        let active_now = owned.values().filter(|&&x| x).count()
                            + stale_active.values().filter(|&&x| x).count();
                        let free_exists = owned.len() + stale_active.len() < zones as usize;
                        let below = limit.is_none_or(|l| active_now < l as usize);
                        let can = (below && (free_exists || !stale_active.is_empty()))
                            || stale_active.values().any(|&x| x);
                        let free = |z: &u32| !owned.contains_key(z) && !stale_active.contains_key(z);
                        let lowest_free = (0..zones).filter(free).find(|&z| preferred(z))
                            .or((0..zones).find(free));
                        match a.take(preferred) {
                            Ok(g) => {
                                prop_assert!(can);
                                if !g.needs_reset {
                                    prop_assert_eq!(Some(g.zone), lowest_free);
                                }
                                prop_assert!(!owned.contains_key(&g.zone));
                                prop_assert_eq!(g.needs_reset, stale_active.remove(&g.zone).is_some());
                                owned.insert(g.zone, true);
                            }
                            Err(_) => prop_assert!(!can),
                        }
                    }
                    Op::Full(i) => if let Some((&z, _)) = owned.iter().nth(i % owned.len().max(1)) {
                        a.mark_full(z);
                        owned.insert(z, false);
                    },
                    Op::Reset(i) => if let Some((&z, _)) = owned.iter().nth(i % owned.len().max(1)) {
                        a.release_reset(z);
                        owned.remove(&z);
                    },
                    Op::Stale(i) => if let Some((&z, &act)) = owned.iter().nth(i % owned.len().max(1)) {
                        a.release_stale(z);
                        owned.remove(&z);
                        stale_active.insert(z, act);
                    },
                }
                let active = owned.values().filter(|&&x| x).count()
                    + stale_active.values().filter(|&&x| x).count();
                prop_assert_eq!(a.active_count(), active);
                if let Some(l) = limit { prop_assert!(active <= l as usize); }
                prop_assert_eq!(
                    a.free_count() + a.stale_count() + owned.len(),
                    zones as usize
                );
            }
        }
    }
}
