//! The device facts the layer needs, fixed at mount: block size, zone capacity, whether
//! appends must be whole blocks (a pass-through instance), the largest append, how many
//! zones the file system spans and how many data zones may be open at once.

use ziob::{Client, Geometry};

use crate::error::{FsError, Result};
use crate::lifetime::WriteLifetime;

/// How the layer writes to this instance.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// The device geometry, except `zone_count`: the file system's zones `0..zone_count`
    /// (at most the device's; zones past it belong to someone else and are never touched).
    pub geometry: Geometry,
    /// The device's zone count.
    pub device_zones: u32,
    /// The active zones the layer may use (`None`: no limit): the limit a pass-through
    /// instance presents, or with the buffer on the smallest core's share of the device's
    /// active zones.
    pub active_limit: Option<u32>,
    /// Active zones the file system leaves to others on the same device (recorded by mkfs):
    /// it keeps at most `active_limit - reserved_active` zones active.
    pub reserved_active: u32,
    /// Appends are padded to whole blocks of at most `max_append_bytes` (buffer off).
    pub whole_blocks: bool,
    /// The largest single append when `whole_blocks`.
    pub max_append_bytes: u64,
    /// Class slots: data zones that may be open at once for files, one per lifetime class,
    /// fewer when the active-zone limit ([`Layout::active_limit`]) says so; one
    /// active zone is kept for the journal and one for garbage collection.
    pub slots: usize,
    /// The slot garbage collection appends to: a slot of its own (`slots`) unless the limit
    /// leaves only one data zone open (then it shares slot 0).
    pub gc_slot: usize,
}

impl Layout {
    /// Asks the instance whether it buffers and which limits it presents: the layout of a
    /// file system over the whole device that leaves no active zone to others (mkfs and
    /// mount narrow it with [`Layout::restrict`]).
    pub async fn of(client: &Client) -> Result<Layout> {
        let (buffered, presented) = client
            .with_ziob(|z| async move { Ok((z.config().buffered, *z.view_geometry())) })
            .await?;
        let geometry = client.geometry();
        let active_limit = if buffered {
            // The buffer lifts the open limit (a zone waits for an open resource) but not the
            // active one for data that reaches the device: a zone synced or written back is
            // active there, and each core of the instance may hold only its share of the
            // device's active zones (a sync past it fails with Too Many Active Zones). The
            // layer keeps within the smallest share: then no core goes over its own,
            // wherever the zones lie (also with classes placed on one core,
            // `ZoneFs::place_class_on_core`).
            let cores = client.cores();
            ziob::placement::resource_share(geometry.max_active_zones, cores - 1, cores)
        } else {
            match (presented.max_active_zones, presented.max_open_zones) {
                (Some(a), Some(o)) => Some(a.min(o)),
                (a, o) => a.or(o),
            }
        };
        let mut layout = Layout {
            geometry,
            device_zones: geometry.zone_count,
            active_limit,
            reserved_active: 0,
            whole_blocks: !buffered,
            max_append_bytes: geometry.max_append_bytes.max(geometry.block_size_bytes),
            slots: 0,
            gc_slot: 0,
        };
        layout.set_slots()?;
        Ok(layout)
    }

    /// The layout of a file system over zones `0..zone_count` that leaves `reserved_active`
    /// active zones to others.
    ///
    /// # Errors
    /// [`FsError::Config`] when `zone_count` exceeds the device's zones, or the active-zone
    /// limit minus `reserved_active` leaves fewer than the 2 the layer needs.
    pub fn restrict(mut self, zone_count: u32, reserved_active: u32) -> Result<Layout> {
        if zone_count > self.device_zones {
            return Err(FsError::Config(format!(
                "a file system of {zone_count} zones on a device of {} zones",
                self.device_zones
            )));
        }
        self.geometry.zone_count = zone_count;
        self.reserved_active = reserved_active;
        self.set_slots()?;
        Ok(self)
    }

    /// Sets the class slots and the GC slot from the active-zone limit left to the layer.
    fn set_slots(&mut self) -> Result<()> {
        let classes = WriteLifetime::ALL.len();
        let limit = self
            .active_limit
            .map(|l| l.saturating_sub(self.reserved_active));
        (self.slots, self.gc_slot) = match limit {
            None => (classes, classes),
            Some(2) => (1, 0),
            Some(l) if l >= 3 => {
                let slots = (l as usize - 2).min(classes);
                (slots, slots)
            }
            Some(l) => {
                return Err(FsError::Config(format!(
                    "the device allows {} active zone(s) and {} are left to others; the file layer needs 2 (journal + data), it has {l}",
                    self.active_limit.unwrap_or(0),
                    self.reserved_active
                )))
            }
        };
        Ok(())
    }

    /// Active zones the layer may hold at once: the journal's, the class slots and the GC
    /// slot.
    pub fn active_zones(&self) -> usize {
        1 + self.all_slots()
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
