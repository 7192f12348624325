//! The superblock: the first record of every journal zone (docs/format.md, "Zone file layer").

use ziob::Geometry;

use crate::wire::{Reader, Writer};

/// The superblock's magic bytes.
pub const MAGIC: [u8; 7] = *b"ZIOBZFS";
/// The format version this code writes and reads.
pub const VERSION: u16 = 1;
/// Payload kind byte of a superblock record.
pub const KIND_SUPERBLOCK: u8 = 0x01;

/// What a journal zone's superblock says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Superblock {
    /// Reserved (journal) zones: zones `0..journal_zones`.
    pub journal_zones: u32,
    /// The device's zone count when formatted.
    pub zone_count: u32,
    /// Block size in bytes.
    pub block_bytes: u64,
    /// Zone size in bytes.
    pub zone_size_bytes: u64,
    /// Zone capacity in bytes.
    pub zone_capacity_bytes: u64,
    /// Grows by one per journal zone written: the newest valid zone wins at mount.
    pub generation: u64,
}

/// Why bytes are not a superblock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SuperblockError {
    /// Not a zonefs superblock at all (wrong kind or magic).
    Foreign,
    /// A zonefs superblock this code cannot use (version, bad fields).
    Invalid(String),
}

impl Superblock {
    /// The superblock for a device of `geometry` with `journal_zones` reserved zones.
    pub fn for_geometry(geometry: &Geometry, journal_zones: u32, generation: u64) -> Superblock {
        Superblock {
            journal_zones,
            zone_count: geometry.zone_count,
            block_bytes: geometry.block_size_bytes,
            zone_size_bytes: geometry.zone_size_bytes,
            zone_capacity_bytes: geometry.zone_capacity_bytes,
            generation,
        }
    }

    /// The record payload (48 bytes).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(KIND_SUPERBLOCK);
        w.0.extend_from_slice(&MAGIC);
        w.u16(VERSION)
            .u16(0)
            .u32(self.journal_zones)
            .u32(self.zone_count)
            .u32(u32::try_from(self.block_bytes).expect("block below 4 GiB"))
            .u64(self.zone_size_bytes)
            .u64(self.zone_capacity_bytes)
            .u64(self.generation);
        w.0
    }

    /// Decodes a superblock record payload.
    pub fn decode(payload: &[u8]) -> Result<Superblock, SuperblockError> {
        let mut r = Reader::new(payload);
        if r.u8() != Some(KIND_SUPERBLOCK) || r.bytes(7) != Some(&MAGIC[..]) {
            return Err(SuperblockError::Foreign);
        }
        let invalid = |s: &str| SuperblockError::Invalid(s.to_string());
        let version = r.u16().ok_or_else(|| invalid("truncated"))?;
        if version != VERSION {
            return Err(SuperblockError::Invalid(format!(
                "version {version}, this code reads version {VERSION}"
            )));
        }
        let reserved = r.u16().ok_or_else(|| invalid("truncated"))?;
        let sb = (|| {
            Some(Superblock {
                journal_zones: r.u32()?,
                zone_count: r.u32()?,
                block_bytes: r.u32()? as u64,
                zone_size_bytes: r.u64()?,
                zone_capacity_bytes: r.u64()?,
                generation: r.u64()?,
            })
        })()
        .ok_or_else(|| invalid("truncated"))?;
        if reserved != 0 || !r.is_empty() {
            return Err(invalid("reserved bytes set or trailing bytes"));
        }
        if sb.journal_zones < 2 || sb.journal_zones >= sb.zone_count {
            return Err(invalid("journal zone count out of range"));
        }
        Ok(sb)
    }

    /// Checks the recorded geometry against the device's; names the first difference.
    pub fn check_geometry(&self, geometry: &Geometry) -> Result<(), String> {
        let pairs = [
            (
                "zone count",
                self.zone_count as u64,
                geometry.zone_count as u64,
            ),
            ("block size", self.block_bytes, geometry.block_size_bytes),
            ("zone size", self.zone_size_bytes, geometry.zone_size_bytes),
            (
                "zone capacity",
                self.zone_capacity_bytes,
                geometry.zone_capacity_bytes,
            ),
        ];
        for (name, ours, dev) in pairs {
            if ours != dev {
                return Err(format!("{name}: formatted {ours}, device {dev}"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Superblock {
        Superblock {
            journal_zones: 2,
            zone_count: 64,
            block_bytes: 4096,
            zone_size_bytes: 1 << 20,
            zone_capacity_bytes: 1 << 20,
            generation: 7,
        }
    }

    #[test]
    fn round_trip_and_bytes() {
        let sb = sample();
        let bytes = sb.encode();
        assert_eq!(bytes.len(), 48);
        assert_eq!(&bytes[..8], b"\x01ZIOBZFS");
        assert_eq!(&bytes[8..10], &1u16.to_le_bytes());
        assert_eq!(&bytes[40..48], &7u64.to_le_bytes());
        assert_eq!(Superblock::decode(&bytes), Ok(sb));
    }

    #[test]
    fn rejects_foreign_and_invalid() {
        assert_eq!(
            Superblock::decode(b"ZIOBLOG\0rest"),
            Err(SuperblockError::Foreign)
        );
        let mut bytes = sample().encode();
        bytes[8] = 9;
        assert!(matches!(
            Superblock::decode(&bytes),
            Err(SuperblockError::Invalid(_))
        ));
        let bytes = sample().encode();
        assert!(matches!(
            Superblock::decode(&bytes[..30]),
            Err(SuperblockError::Invalid(_))
        ));
        let mut one = sample();
        one.journal_zones = 1;
        assert!(Superblock::decode(&one.encode()).is_err());
    }

    #[test]
    fn geometry_check_names_the_field() {
        let mut g = Geometry::new(64, 1 << 20);
        assert!(sample().check_geometry(&g).is_ok());
        g.zone_count = 65;
        assert!(sample()
            .check_geometry(&g)
            .unwrap_err()
            .contains("zone count"));
    }
}
