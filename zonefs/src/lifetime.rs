//! Write lifetime classes: which open data zone a file's data goes to.

/// How long a file's data is expected to live, as RocksDB's `Env::WriteLifeTimeHint`
/// (`NotSet`, `None`, `Short`, `Medium`, `Long`, `Extreme`), plus a class of its own for
/// write-ahead logs. Files of one class share an open data zone, so data that dies together
/// sits together and whole zones become free without copying.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WriteLifetime {
    /// No hint given (`WLTH_NOT_SET`).
    NotSet,
    /// The hint "no particular lifetime" (`WLTH_NONE`).
    None,
    /// Short-lived data (`WLTH_SHORT`).
    Short,
    /// Medium (`WLTH_MEDIUM`).
    Medium,
    /// Long (`WLTH_LONG`).
    Long,
    /// Extreme (`WLTH_EXTREME`).
    Extreme,
    /// A write-ahead log: appended in small pieces, synced often, deleted whole.
    Wal,
}

impl WriteLifetime {
    /// Every class, in code order.
    pub const ALL: [WriteLifetime; 7] = [
        WriteLifetime::NotSet,
        WriteLifetime::None,
        WriteLifetime::Short,
        WriteLifetime::Medium,
        WriteLifetime::Long,
        WriteLifetime::Extreme,
        WriteLifetime::Wal,
    ];

    /// The class's code in the journal (docs/format.md, "Zone file layer").
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The class with journal code `code`.
    pub fn from_code(code: u8) -> Option<WriteLifetime> {
        Self::ALL.get(code as usize).copied()
    }
}

/// Maps classes to open-zone slots when fewer than 7 data zones may be active at once: the WAL
/// keeps a slot of its own if there are at least two; the six hint classes share the rest in
/// order (neighbouring lifetimes together).
pub fn slot_of(class: WriteLifetime, slots: usize) -> usize {
    let n = WriteLifetime::ALL.len();
    if slots >= n {
        return class.code() as usize;
    }
    if slots == 1 {
        return 0;
    }
    if class == WriteLifetime::Wal {
        return slots - 1;
    }
    // Six hint classes over slots - 1 slots.
    class.code() as usize * (slots - 1) / (n - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_slots_are_in_range() {
        for c in WriteLifetime::ALL {
            assert_eq!(WriteLifetime::from_code(c.code()), Some(c));
            for slots in 1..=9 {
                assert!(slot_of(c, slots) < slots);
            }
        }
        assert_eq!(WriteLifetime::from_code(7), None);
        assert_eq!(slot_of(WriteLifetime::Wal, 2), 1);
        assert_eq!(slot_of(WriteLifetime::Extreme, 2), 0);
    }
}
