//! The kinds of operation whose latency each core records.

use ziob_backends::ZoneAction;

/// A kind of operation timed by the shards: the calls applications make (measured on the
/// core owning the zone, from the moment the call is admitted there until it completes or is
/// dropped) and the device I/O the buffer issues on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// [`Ziob::append`](crate::Ziob::append).
    Append,
    /// [`Ziob::write_at`](crate::Ziob::write_at).
    WriteAt,
    /// [`Ziob::read`](crate::Ziob::read).
    Read,
    /// [`Ziob::flush`](crate::Ziob::flush) (one zone).
    Flush,
    /// [`Ziob::sync`](crate::Ziob::sync) (one core's part of it).
    Sync,
    /// [`Ziob::write_back`](crate::Ziob::write_back) (one zone;
    /// [`Ziob::flush_device`](crate::Ziob::flush_device) counts as the device flush it
    /// waits for).
    WriteBack,
    /// Zone action Open (one zone, or a core's part of all).
    ZoneOpen,
    /// Zone action Close.
    ZoneClose,
    /// Zone action Finish (write-back, device finish and cache flush included).
    ZoneFinish,
    /// Zone action Reset.
    ZoneReset,
    /// Zone action Offline.
    ZoneOffline,
    /// One device write issued by write-back.
    DeviceWrite,
    /// One device read for a read the buffer could not serve from memory (a miss).
    DeviceRead,
    /// One device write-cache flush (shared by the callers of a group commit).
    DeviceFlush,
}

impl OpKind {
    /// Number of kinds.
    pub const COUNT: usize = 14;

    /// Every kind, in declaration order (the index of a kind is `kind as usize`).
    pub const ALL: [OpKind; OpKind::COUNT] = [
        OpKind::Append,
        OpKind::WriteAt,
        OpKind::Read,
        OpKind::Flush,
        OpKind::Sync,
        OpKind::WriteBack,
        OpKind::ZoneOpen,
        OpKind::ZoneClose,
        OpKind::ZoneFinish,
        OpKind::ZoneReset,
        OpKind::ZoneOffline,
        OpKind::DeviceWrite,
        OpKind::DeviceRead,
        OpKind::DeviceFlush,
    ];

    /// The kind's name: the `op` label of the published metrics and the JSON key.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Append => "append",
            OpKind::WriteAt => "write_at",
            OpKind::Read => "read",
            OpKind::Flush => "flush",
            OpKind::Sync => "sync",
            OpKind::WriteBack => "write_back",
            OpKind::ZoneOpen => "zone_open",
            OpKind::ZoneClose => "zone_close",
            OpKind::ZoneFinish => "zone_finish",
            OpKind::ZoneReset => "zone_reset",
            OpKind::ZoneOffline => "zone_offline",
            OpKind::DeviceWrite => "device_write",
            OpKind::DeviceRead => "device_read",
            OpKind::DeviceFlush => "device_flush",
        }
    }

    /// The kind timing a zone action.
    pub fn of_action(action: ZoneAction) -> OpKind {
        match action {
            ZoneAction::Open => OpKind::ZoneOpen,
            ZoneAction::Close => OpKind::ZoneClose,
            ZoneAction::Finish => OpKind::ZoneFinish,
            ZoneAction::Reset => OpKind::ZoneReset,
            ZoneAction::Offline => OpKind::ZoneOffline,
        }
    }
}

impl std::fmt::Display for OpKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_kind_at_its_index_with_a_unique_name() {
        let mut names = std::collections::HashSet::new();
        for (i, k) in OpKind::ALL.iter().enumerate() {
            assert_eq!(*k as usize, i);
            assert!(names.insert(k.name()), "{k} named twice");
            assert_eq!(
                serde_json::to_value(k).unwrap(),
                serde_json::Value::from(k.name())
            );
        }
    }
}
