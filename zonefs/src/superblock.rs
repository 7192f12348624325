//! The superblock: the first record of every journal zone (docs/format.md, "Zone file layer").

use ziob::Geometry;

use crate::wire::{Reader, Writer};

/// The superblock's magic bytes.
pub const MAGIC: [u8; 7] = *b"ZIOBZFS";
/// The format version this code writes. Version 2 journals start every batch with a
/// `BatchStart` mark and may name data a crash lost in their last batch (docs/format.md);
/// version 1 journals (read too) have no marks and name flushed data only.
pub const VERSION: u16 = 2;
/// The oldest format version this code reads.
pub const VERSION_MIN: u16 = 1;
/// Payload kind byte of a superblock record.
pub const KIND_SUPERBLOCK: u8 = 0x01;

/// What a journal zone's superblock says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Superblock {
    /// The format version of the zone it heads ([`VERSION`] when written by this code).
    pub version: u16,
    /// Reserved (journal) zones: zones `0..journal_zones`.
    pub journal_zones: u32,
    /// Active zones the file system leaves to others on the device (it holds at most the
    /// device's active-zone limit minus this many). 0 = none.
    pub reserved_active_zones: u16,
    /// The file system's zones: `0..zone_count`, at most the device's zone count (the zones
    /// past it are not the file system's and are never touched).
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
    /// The superblock for a file system over zones `0..geometry.zone_count` of a device of
    /// `geometry` with `journal_zones` reserved zones, leaving `reserved_active_zones` active
    /// zones to others.
    pub fn for_geometry(
        geometry: &Geometry,
        journal_zones: u32,
        reserved_active_zones: u16,
        generation: u64,
    ) -> Superblock {
        Superblock {
            version: VERSION,
            journal_zones,
            reserved_active_zones,
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
        w.u16(self.version)
            .u16(self.reserved_active_zones)
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
        if !(VERSION_MIN..=VERSION).contains(&version) {
            return Err(SuperblockError::Invalid(format!(
                "version {version}, this code reads versions {VERSION_MIN} to {VERSION}"
            )));
        }
        let reserved_active_zones = r.u16().ok_or_else(|| invalid("truncated"))?;
        let sb = (|| {
            Some(Superblock {
                version,
                journal_zones: r.u32()?,
                reserved_active_zones,
                zone_count: r.u32()?,
                block_bytes: r.u32()? as u64,
                zone_size_bytes: r.u64()?,
                zone_capacity_bytes: r.u64()?,
                generation: r.u64()?,
            })
        })()
        .ok_or_else(|| invalid("truncated"))?;
        if !r.is_empty() {
            return Err(invalid("trailing bytes"));
        }
        if sb.journal_zones < 2 || sb.journal_zones >= sb.zone_count {
            return Err(invalid("journal zone count out of range"));
        }
        Ok(sb)
    }

    /// Checks the recorded geometry against the device's (the file system's zone count must
    /// not exceed the device's; the rest must be equal); names the first difference.
    pub fn check_geometry(&self, geometry: &Geometry) -> Result<(), String> {
        if self.zone_count > geometry.zone_count {
            return Err(format!(
                "zone count: formatted {}, device {}",
                self.zone_count, geometry.zone_count
            ));
        }
        let pairs = [
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
            version: VERSION,
            journal_zones: 2,
            reserved_active_zones: 0,
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
        assert_eq!(&bytes[8..10], &2u16.to_le_bytes());
        assert_eq!(&bytes[10..12], &[0, 0]);
        assert_eq!(&bytes[40..48], &7u64.to_le_bytes());
        assert_eq!(Superblock::decode(&bytes), Ok(sb));
        let ranged = Superblock {
            reserved_active_zones: 0x0102,
            zone_count: 40,
            ..sb
        };
        let bytes = ranged.encode();
        assert_eq!(&bytes[10..12], &[0x02, 0x01]);
        assert_eq!(&bytes[16..20], &40u32.to_le_bytes());
        assert_eq!(Superblock::decode(&bytes), Ok(ranged));
        // A version 1 superblock (no batch marks in its zone) is read as such.
        let v1 = Superblock { version: 1, ..sb };
        let bytes = v1.encode();
        assert_eq!(&bytes[8..10], &1u16.to_le_bytes());
        assert_eq!(Superblock::decode(&bytes), Ok(v1));
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
        // A file system over the first zones of a larger device is fine.
        g.zone_count = 65;
        assert!(sample().check_geometry(&g).is_ok());
        g.zone_count = 63;
        assert!(sample()
            .check_geometry(&g)
            .unwrap_err()
            .contains("zone count"));
    }
}
