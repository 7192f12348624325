//! The queue limits of a block device, read from `/sys/block/<dev>/queue/`.
//!
//! Plain (blocking) file reads of a pseudo file system: done once, when a device is opened.

use std::path::{Path, PathBuf};

/// What `queue/zoned` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZonedModel {
    /// `none`: a conventional block device.
    None,
    /// `host-aware`: zoned, but random writes are tolerated (SMR drive-managed fallback).
    HostAware,
    /// `host-managed`: sequential writes required (ZNS, zoned null_blk, host-managed SMR).
    HostManaged,
}

/// The queue attributes the zbd backend uses. Sizes in bytes; `None` = no limit (the kernel
/// writes 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimits {
    /// `queue/zoned`.
    pub zoned: ZonedModel,
    /// `queue/chunk_sectors` × 512: the zone size of a zoned device.
    pub zone_size_bytes: u64,
    /// `queue/max_open_zones` (0 = no limit).
    pub max_open_zones: Option<u32>,
    /// `queue/max_active_zones` (0 = no limit).
    pub max_active_zones: Option<u32>,
    /// `queue/zone_append_max_bytes` (0 = the device has no Zone Append).
    pub zone_append_max_bytes: Option<u64>,
    /// `queue/logical_block_size`.
    pub logical_block_size_bytes: u64,
    /// `queue/max_hw_sectors_kb` × 1024: the largest request the device takes.
    pub max_hw_bytes: u64,
    /// `queue/max_sectors_kb` × 1024: where the kernel splits a larger request.
    pub max_request_bytes: u64,
    /// `queue/write_cache` is `write back`: completed writes may sit in a volatile cache.
    pub volatile_write_cache: bool,
    /// `queue/fua` is 1: the device takes writes with Force Unit Access (absent: no).
    pub fua: bool,
}

/// The sysfs `queue` directory of the block device at `dev_path` (symlinks such as
/// `/dev/disk/by-id/…` are followed). Partitions are not zoned devices and are refused.
pub fn queue_dir(dev_path: &Path) -> std::io::Result<PathBuf> {
    let real = std::fs::canonicalize(dev_path)?;
    let name = real.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "device path has no name")
    })?;
    let dir = Path::new("/sys/block").join(name).join("queue");
    if !dir.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "{} is not a whole block device ({} does not exist)",
                real.display(),
                dir.display()
            ),
        ));
    }
    Ok(dir)
}

fn read_attr(dir: &Path, attr: &str) -> Result<String, String> {
    std::fs::read_to_string(dir.join(attr))
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("{}: {e}", dir.join(attr).display()))
}

fn read_u64(dir: &Path, attr: &str) -> Result<u64, String> {
    let text = read_attr(dir, attr)?;
    text.parse()
        .map_err(|_| format!("{}: `{text}` is not a number", dir.join(attr).display()))
}

/// 0 → `None` (the kernel's "no limit").
fn limit(v: u64) -> Option<u64> {
    (v != 0).then_some(v)
}

/// Reads `queue/zoned` (the only zone attribute a conventional device has).
pub fn zoned_model(dir: &Path) -> Result<ZonedModel, String> {
    match read_attr(dir, "zoned")?.as_str() {
        "none" => Ok(ZonedModel::None),
        "host-aware" => Ok(ZonedModel::HostAware),
        "host-managed" => Ok(ZonedModel::HostManaged),
        other => Err(format!("{}/zoned: unknown model `{other}`", dir.display())),
    }
}

/// Reads the limits from a `queue` directory. The error names the attribute that is missing
/// or malformed.
pub fn read_limits(dir: &Path) -> Result<QueueLimits, String> {
    let zoned = zoned_model(dir)?;
    let to_u32 = |v: u64, attr: &str| {
        u32::try_from(v).map_err(|_| format!("{}/{attr}: {v} is too large", dir.display()))
    };
    let max_open = limit(read_u64(dir, "max_open_zones")?)
        .map(|v| to_u32(v, "max_open_zones"))
        .transpose()?;
    let max_active = limit(read_u64(dir, "max_active_zones")?)
        .map(|v| to_u32(v, "max_active_zones"))
        .transpose()?;
    Ok(QueueLimits {
        zoned,
        zone_size_bytes: read_u64(dir, "chunk_sectors")? * 512,
        max_open_zones: max_open,
        max_active_zones: max_active,
        zone_append_max_bytes: limit(read_u64(dir, "zone_append_max_bytes")?),
        logical_block_size_bytes: read_u64(dir, "logical_block_size")?,
        max_hw_bytes: read_u64(dir, "max_hw_sectors_kb")? * 1024,
        max_request_bytes: read_u64(dir, "max_sectors_kb")? * 1024,
        volatile_write_cache: read_attr(dir, "write_cache")? == "write back",
        fua: read_attr(dir, "fua").is_ok_and(|v| v == "1"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_queue(attrs: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (k, v) in attrs {
            std::fs::write(dir.path().join(k), format!("{v}\n")).unwrap();
        }
        dir
    }

    const NVME_ZNS: &[(&str, &str)] = &[
        ("zoned", "host-managed"),
        ("chunk_sectors", "16384"),
        ("max_open_zones", "4"),
        ("max_active_zones", "0"),
        ("zone_append_max_bytes", "131072"),
        ("logical_block_size", "4096"),
        ("max_hw_sectors_kb", "512"),
        ("max_sectors_kb", "256"),
        ("write_cache", "write back"),
        ("fua", "1"),
    ];

    #[test]
    fn reads_limits_and_maps_zero_to_no_limit() {
        let dir = fake_queue(NVME_ZNS);
        let l = read_limits(dir.path()).unwrap();
        assert_eq!(
            l,
            QueueLimits {
                zoned: ZonedModel::HostManaged,
                zone_size_bytes: 8 << 20,
                max_open_zones: Some(4),
                max_active_zones: None,
                zone_append_max_bytes: Some(128 << 10),
                logical_block_size_bytes: 4096,
                max_hw_bytes: 512 << 10,
                max_request_bytes: 256 << 10,
                volatile_write_cache: true,
                fua: true,
            }
        );
    }

    #[test]
    fn write_through_cache_and_conventional_devices() {
        let mut attrs = NVME_ZNS.to_vec();
        attrs[0] = ("zoned", "none");
        attrs[8] = ("write_cache", "write through");
        attrs.pop(); // no `fua` attribute: taken as no FUA
        let dir = fake_queue(&attrs);
        let l = read_limits(dir.path()).unwrap();
        assert_eq!(l.zoned, ZonedModel::None);
        assert!(!l.volatile_write_cache);
        assert!(!l.fua);
    }

    #[test]
    fn missing_or_malformed_attributes_are_named() {
        let dir = fake_queue(&NVME_ZNS[..3]);
        let e = read_limits(dir.path()).unwrap_err();
        assert!(e.contains("max_active_zones"), "{e}");
        let mut attrs = NVME_ZNS.to_vec();
        attrs[2] = ("max_open_zones", "lots");
        let dir = fake_queue(&attrs);
        let e = read_limits(dir.path()).unwrap_err();
        assert!(e.ends_with("max_open_zones: `lots` is not a number"), "{e}");
    }

    #[test]
    fn queue_dir_refuses_what_is_not_a_block_device() {
        let e = queue_dir(Path::new("/definitely/not/a/device")).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        let f = tempfile::NamedTempFile::new().unwrap();
        let e = queue_dir(f.path()).unwrap_err();
        assert!(e.to_string().contains("is not a whole block device"), "{e}");
    }
}
