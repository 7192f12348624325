//! [`Geometry`]: the shape and limits of a zoned device.

use crate::limits;
use crate::model::error::{Boundary, DeviceError, IoOp, Result};

/// Shape and limits of a zoned device. All sizes are in bytes; zone `i` starts at byte
/// `i * zone_size_bytes` of the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Logical block size in bytes (a power of two between 512 and 64 KiB). Every offset and
    /// length handed to a device is a multiple of it.
    pub block_size_bytes: u64,
    /// Distance between zone starts in bytes (a multiple of the block size).
    pub zone_size_bytes: u64,
    /// Writable bytes per zone (a multiple of the block size, at most the zone size). Bytes in
    /// `[zone_capacity_bytes, zone_size_bytes)` are never writable and read as zeros.
    pub zone_capacity_bytes: u64,
    /// Number of zones.
    pub zone_count: u32,
    /// Max Open Resources: zones that may be open at once. `None` = no limit.
    pub max_open_zones: Option<u32>,
    /// Max Active Resources: zones that may be open or closed at once. `None` = no limit.
    pub max_active_zones: Option<u32>,
    /// Largest zone append in bytes (the Zone Append Size Limit; a multiple of the block size).
    pub max_append_bytes: u64,
    /// Whether completed writes may sit in a volatile cache until a flush.
    pub volatile_write_cache: bool,
}

impl Geometry {
    /// LBA Out of Range unless `zone` exists.
    pub fn check_zone(&self, zone: u32) -> Result<()> {
        if zone >= self.zone_count {
            return Err(DeviceError::OutOfRange {
                zone,
                zone_count: self.zone_count,
            });
        }
        Ok(())
    }

    /// A typed error unless `offset_bytes` and `len_bytes` are block multiples and `len_bytes`
    /// is positive.
    pub fn check_aligned(
        &self,
        op: IoOp,
        zone: u32,
        offset_bytes: u64,
        len_bytes: u64,
    ) -> Result<()> {
        let bs = self.block_size_bytes;
        if len_bytes == 0 || !len_bytes.is_multiple_of(bs) || !offset_bytes.is_multiple_of(bs) {
            return Err(DeviceError::Misaligned {
                op,
                zone,
                offset_bytes,
                len_bytes,
                block_size_bytes: bs,
            });
        }
        Ok(())
    }

    /// A typed error unless an append of `len_bytes` is block aligned, not empty and at most
    /// the zone append size limit.
    pub fn check_append(&self, zone: u32, len_bytes: u64) -> Result<()> {
        self.check_aligned(IoOp::Append, zone, 0, len_bytes)?;
        if len_bytes > self.max_append_bytes {
            return Err(DeviceError::AppendTooLarge {
                zone,
                len_bytes,
                max_append_bytes: self.max_append_bytes,
            });
        }
        Ok(())
    }

    /// A typed Zone Boundary Error unless a read of `len_bytes` at `offset_bytes` ends inside
    /// the zone (reads may go past the capacity, up to the zone size).
    pub fn check_read_end(&self, zone: u32, offset_bytes: u64, len_bytes: u64) -> Result<()> {
        if offset_bytes.saturating_add(len_bytes) > self.zone_size_bytes {
            let bs = self.block_size_bytes;
            return Err(DeviceError::BoundaryError {
                op: IoOp::Read,
                zone,
                offset_blocks: offset_bytes / bs,
                len_blocks: len_bytes.div_ceil(bs),
                boundary: Boundary::ZoneEnd,
                limit_blocks: self.zone_size_blocks(),
            });
        }
        Ok(())
    }

    /// The Zone Boundary Error of a `len_bytes` write (or append) at `at_bytes` that would
    /// cross the zone capacity.
    pub fn capacity_error(
        &self,
        op: IoOp,
        zone: u32,
        at_bytes: u64,
        len_bytes: u64,
    ) -> DeviceError {
        let bs = self.block_size_bytes;
        DeviceError::BoundaryError {
            op,
            zone,
            offset_blocks: at_bytes / bs,
            len_blocks: len_bytes.div_ceil(bs),
            boundary: Boundary::Capacity,
            limit_blocks: self.zone_capacity_blocks(),
        }
    }

    /// A geometry with no open/active limits, capacity = zone size, the default append limit
    /// (clamped to the zone capacity), 4 KiB blocks and a volatile write cache.
    pub fn new(zone_count: u32, zone_size_bytes: u64) -> Geometry {
        Geometry {
            block_size_bytes: 4096,
            zone_size_bytes,
            zone_capacity_bytes: zone_size_bytes,
            zone_count,
            max_open_zones: None,
            max_active_zones: None,
            max_append_bytes: limits::MAX_APPEND_BYTES_DEFAULT.min(zone_size_bytes),
            volatile_write_cache: true,
        }
    }

    /// Blocks per zone (zone size / block size).
    pub fn zone_size_blocks(&self) -> u64 {
        self.zone_size_bytes / self.block_size_bytes
    }

    /// Writable blocks per zone.
    pub fn zone_capacity_blocks(&self) -> u64 {
        self.zone_capacity_bytes / self.block_size_bytes
    }

    /// Total size of the address space in bytes (zone count × zone size).
    pub fn device_size_bytes(&self) -> u64 {
        self.zone_size_bytes * u64::from(self.zone_count)
    }

    /// Checks every field and the relations between them.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(DeviceError::InvalidGeometry(msg));
        let bs = self.block_size_bytes;
        if !bs.is_power_of_two()
            || !(limits::BLOCK_SIZE_BYTES_MIN..=limits::BLOCK_SIZE_BYTES_MAX).contains(&bs)
        {
            return bad(format!(
                "block size {bs} bytes is not a power of two between {} and {}",
                limits::BLOCK_SIZE_BYTES_MIN,
                limits::BLOCK_SIZE_BYTES_MAX
            ));
        }
        if self.zone_size_bytes == 0 || !self.zone_size_bytes.is_multiple_of(bs) {
            return bad(format!(
                "zone size {} bytes is not a positive multiple of the block size {bs}",
                self.zone_size_bytes
            ));
        }
        if self.zone_capacity_bytes == 0
            || !self.zone_capacity_bytes.is_multiple_of(bs)
            || self.zone_capacity_bytes > self.zone_size_bytes
        {
            return bad(format!(
                "zone capacity {} bytes must be a positive multiple of the block size {bs} and at most the zone size {}",
                self.zone_capacity_bytes, self.zone_size_bytes
            ));
        }
        if self.zone_count == 0 || self.zone_count > limits::ZONE_COUNT_MAX {
            return bad(format!(
                "zone count {} is not between 1 and {}",
                self.zone_count,
                limits::ZONE_COUNT_MAX
            ));
        }
        match self.zone_size_bytes.checked_mul(u64::from(self.zone_count)) {
            Some(size) if size <= limits::DEVICE_SIZE_BYTES_MAX => {}
            _ => {
                return bad(format!(
                    "{} zones of {} bytes exceed the largest device size, {} bytes",
                    self.zone_count,
                    self.zone_size_bytes,
                    limits::DEVICE_SIZE_BYTES_MAX
                ))
            }
        }
        if self.max_append_bytes == 0 || !self.max_append_bytes.is_multiple_of(bs) {
            return bad(format!(
                "max append size {} bytes is not a positive multiple of the block size {bs}",
                self.max_append_bytes
            ));
        }
        for (name, v) in [
            ("max open zones", self.max_open_zones),
            ("max active zones", self.max_active_zones),
        ] {
            if v == Some(0) {
                return bad(format!("{name} is 0 (use no limit instead)"));
            }
        }
        if let (Some(open), Some(active)) = (self.max_open_zones, self.max_active_zones) {
            if open > active {
                return bad(format!(
                    "max open zones {open} exceeds max active zones {active}"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_rejects_bad_relations() {
        let mut g = Geometry::new(4, 1 << 20);
        assert!(g.validate().is_ok());
        g.zone_capacity_bytes = 2 << 20;
        assert!(g.validate().is_err());
        g.zone_capacity_bytes = 4096 * 3;
        g.max_open_zones = Some(3);
        g.max_active_zones = Some(2);
        let e = g.validate().unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid geometry: max open zones 3 exceeds max active zones 2"
        );
        g.max_active_zones = None;
        g.block_size_bytes = 3000;
        assert!(g.validate().is_err());
    }

    #[test]
    fn validate_refuses_devices_whose_size_overflows() {
        // The case: one zone of 2^64 - 4096 bytes made a 12 KiB emu file.
        let g = Geometry::new(1, u64::MAX - 4095);
        assert_eq!(
            g.validate().unwrap_err().to_string(),
            "invalid geometry: 1 zones of 18446744073709547520 bytes exceed the largest device size, 4611686018427387904 bytes"
        );
        let g = Geometry::new(1 << 20, 1 << 44);
        assert!(g.validate().is_err(), "2^64 bytes");
        let g = Geometry::new(1 << 20, 1 << 42);
        assert!(g.validate().is_ok(), "exactly the largest size");
        assert!(Geometry::new(1 << 20, (1 << 42) + 4096).validate().is_err());
    }
}
