//! The zone vocabulary every layer shares: [`ZoneState`], [`ZoneAction`], [`ZoneTarget`],
//! [`ZoneInfo`] and [`PersistedZone`]. Plain data with no dependency, so that the errors
//! (`model::error`) and the state machine (`model::state`) both use it without depending on
//! each other.

/// The state of a zone, as in the NVMe ZNS command set (the discriminant is the Zone State
/// value of a zone descriptor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ZoneState {
    /// ZSE: nothing written since the last reset. Holds no resource.
    Empty = 0x1,
    /// ZSIO: opened by a write or append. Holds an open and an active resource.
    ImplicitlyOpened = 0x2,
    /// ZSEO: opened by an Open Zone command. Holds an open and an active resource.
    ExplicitlyOpened = 0x3,
    /// ZSC: closed, still active. Holds an active resource.
    Closed = 0x4,
    /// ZSRO: made read only by the device. Holds no resource.
    ReadOnly = 0xD,
    /// ZSF: write pointer at capacity, or finished. Holds no resource.
    Full = 0xE,
    /// ZSO: made offline by the device or by Offline Zone. Holds no resource.
    Offline = 0xF,
}

impl ZoneState {
    /// Every state, in discriminant order.
    pub const ALL: [ZoneState; 7] = [
        ZoneState::Empty,
        ZoneState::ImplicitlyOpened,
        ZoneState::ExplicitlyOpened,
        ZoneState::Closed,
        ZoneState::ReadOnly,
        ZoneState::Full,
        ZoneState::Offline,
    ];

    /// The NVMe Zone State value.
    pub fn nvme_code(self) -> u8 {
        self as u8
    }

    /// The state with NVMe Zone State value `code`, if any.
    pub fn from_nvme_code(code: u8) -> Option<ZoneState> {
        ZoneState::ALL.into_iter().find(|s| s.nvme_code() == code)
    }

    /// Whether the state holds an open resource.
    pub fn is_open(self) -> bool {
        matches!(
            self,
            ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened
        )
    }

    /// Whether the state holds an active resource.
    pub fn is_active(self) -> bool {
        self.is_open() || self == ZoneState::Closed
    }

    /// snake_case name used in JSON output, e.g. `implicitly_opened`.
    pub fn as_str(self) -> &'static str {
        match self {
            ZoneState::Empty => "empty",
            ZoneState::ImplicitlyOpened => "implicitly_opened",
            ZoneState::ExplicitlyOpened => "explicitly_opened",
            ZoneState::Closed => "closed",
            ZoneState::ReadOnly => "read_only",
            ZoneState::Full => "full",
            ZoneState::Offline => "offline",
        }
    }

    /// The two-letter condition code `blkzone report` prints, e.g. `oi`.
    pub fn short_name(self) -> &'static str {
        match self {
            ZoneState::Empty => "em",
            ZoneState::ImplicitlyOpened => "oi",
            ZoneState::ExplicitlyOpened => "oe",
            ZoneState::Closed => "cl",
            ZoneState::ReadOnly => "ro",
            ZoneState::Full => "fu",
            ZoneState::Offline => "ol",
        }
    }
}

impl std::fmt::Display for ZoneState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ZoneState::Empty => "Empty",
            ZoneState::ImplicitlyOpened => "Implicitly Opened",
            ZoneState::ExplicitlyOpened => "Explicitly Opened",
            ZoneState::Closed => "Closed",
            ZoneState::ReadOnly => "Read Only",
            ZoneState::Full => "Full",
            ZoneState::Offline => "Offline",
        })
    }
}

/// A Zone Management Send action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ZoneAction {
    /// Open Zone: Empty/Closed/Implicitly Opened → Explicitly Opened.
    Open,
    /// Close Zone: Opened → Closed (stays active even with nothing written).
    Close,
    /// Finish Zone: Empty/Opened/Closed → Full; Full stays Full.
    Finish,
    /// Reset Zone: Opened/Closed/Full → Empty; Empty stays Empty.
    Reset,
    /// Offline Zone: Read Only → Offline.
    Offline,
}

impl std::fmt::Display for ZoneAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ZoneAction::Open => "open",
            ZoneAction::Close => "close",
            ZoneAction::Finish => "finish",
            ZoneAction::Reset => "reset",
            ZoneAction::Offline => "offline",
        })
    }
}

/// Which zones a [`ZoneAction`] applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ZoneTarget {
    /// One zone, by index.
    One(u32),
    /// Select All: every zone in a state the action applies to (Open: Closed; Close: Opened;
    /// Finish: Opened and Closed; Reset: Opened, Closed and Full; Offline: Read Only).
    All,
}

/// What a zone report says about one zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZoneInfo {
    /// Zone index (0-based).
    pub index: u32,
    /// First byte of the zone on the device.
    pub start_bytes: u64,
    /// Writable bytes of the zone.
    pub capacity_bytes: u64,
    /// Write pointer in bytes from the zone start. For a Full zone this is the capacity
    /// (never the next zone's start, unlike the Linux block layer).
    pub write_pointer_bytes: u64,
    /// The zone state.
    pub state: ZoneState,
}

/// A zone as a persistent backend stores it: its state and how far data was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PersistedZone {
    /// The state.
    pub state: ZoneState,
    /// Bytes of data written from the zone start (below capacity for a finished zone; data
    /// past it reads as zeros).
    pub written_bytes: u64,
}
