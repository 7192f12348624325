//! [`FileStat`]: what one file is made of (for `ziob fs ls -l` and tests).

use crate::lifetime::WriteLifetime;
use crate::tree::Node;

/// A file's size, lifetime class and extents, as [`ZoneFs::stat`](crate::ZoneFs::stat) saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStat {
    /// Every byte appended (synced or not).
    pub size_bytes: u64,
    /// Bytes made durable by `sync` (journaled extents).
    pub synced_bytes: u64,
    /// The file's lifetime class (which open data zone its appends go to).
    pub lifetime: WriteLifetime,
    /// Extents `(zone, offset, length)` the file is made of.
    pub extents: usize,
}

impl FileStat {
    /// The stat of `node`.
    pub(crate) fn of(node: &Node) -> FileStat {
        FileStat {
            size_bytes: node.size(),
            synced_bytes: node.extents[..node.synced].iter().map(|e| e.len).sum(),
            lifetime: node.lifetime,
            extents: node.extents.len(),
        }
    }
}
