//! The device facts the layer needs, fixed at mount: block size, zone capacity, whether
//! appends must be whole blocks (a pass-through instance), the largest append, and how many
//! data zones may be open at once.

use ziob::{Client, Geometry};

use crate::error::{FsError, Result};
use crate::lifetime::WriteLifetime;

/// How the layer writes to this instance.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// The device geometry.
    pub geometry: Geometry,
    /// Appends are padded to whole blocks of at most `max_append_bytes` (buffer off).
    pub whole_blocks: bool,
    /// The largest single append when `whole_blocks`.
    pub max_append_bytes: u64,
    /// Class slots: data zones that may be open at once for files, one per lifetime class,
    /// fewer when the device's active-zone limit (as the instance presents it) says so; one
    /// active zone is kept for the journal and one for garbage collection.
    pub slots: usize,
    /// The slot garbage collection appends to: a slot of its own (`slots`) unless the limit
    /// leaves only one data zone open (then it shares slot 0).
    pub gc_slot: usize,
}

impl Layout {
    /// Asks the instance whether it buffers and which limits it presents.
    pub async fn of(client: &Client) -> Result<Layout> {
        let (buffered, presented) = client
            .with_ziob(|z| async move { Ok((z.config().buffered, *z.view_geometry())) })
            .await?;
        let geometry = client.geometry();
        let limit = match (presented.max_active_zones, presented.max_open_zones) {
            (Some(a), Some(o)) => Some(a.min(o)),
            (a, o) => a.or(o),
        };
        let classes = WriteLifetime::ALL.len();
        let (slots, gc_slot) = match limit {
            None => (classes, classes),
            Some(2) => (1, 0),
            Some(l) if l >= 3 => {
                let slots = (l as usize - 2).min(classes);
                (slots, slots)
            }
            Some(l) => {
                return Err(FsError::Config(format!(
                    "the device allows {l} active zone(s); the file layer needs 2 (journal + data)"
                )))
            }
        };
        Ok(Layout {
            geometry,
            whole_blocks: !buffered,
            max_append_bytes: geometry.max_append_bytes.max(geometry.block_size_bytes),
            slots,
            gc_slot,
        })
    }

    /// Open-zone slots in all: the class slots and the GC slot.
    pub fn all_slots(&self) -> usize {
        self.slots.max(self.gc_slot + 1)
    }

    /// Writable bytes per zone.
    pub fn capacity(&self) -> u64 {
        self.geometry.zone_capacity_bytes
    }

    /// Block size in bytes.
    pub fn block(&self) -> u64 {
        self.geometry.block_size_bytes
    }

    /// How many bytes `len` bytes of data take in a zone (rounded up to blocks when appends
    /// must be whole blocks).
    pub fn footprint(&self, len: u64) -> u64 {
        if self.whole_blocks {
            len.div_ceil(self.block()) * self.block()
        } else {
            len
        }
    }

    /// The largest piece of data one append may carry when `room` bytes are left in the zone.
    pub fn piece(&self, want: u64, room: u64) -> u64 {
        if self.whole_blocks {
            let max = (self.max_append_bytes / self.block() * self.block()).min(room);
            want.min(max)
        } else {
            want.min(room)
        }
    }
}
