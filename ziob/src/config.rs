//! [`ZiobConfig`]: how the zone write buffer behaves.

use std::time::Duration;

use ziob_backends::Geometry;

use crate::error::{Result, ZiobError};

/// Default write-back unit: 512 KiB (clamped to the zone capacity).
pub const WRITEBACK_UNIT_BYTES_DEFAULT: u64 = 512 << 10;
/// Default memory budget of one shard: 64 MiB.
pub const SHARD_BUDGET_BYTES_DEFAULT: u64 = 64 << 20;
/// Default idle time after which a zone's whole blocks are written back.
pub const IDLE_WRITEBACK_DEFAULT: Duration = Duration::from_millis(200);

/// Settings of a [`Ziob`](crate::Ziob) instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZiobConfig {
    /// Buffer writes and serve reads from memory (`true`, the default) or send every
    /// operation straight to the device (pass-through, to measure the buffer's effect).
    pub buffered: bool,
    /// Memory budget of each core's shard in bytes. Writers wait when it is used up; it is
    /// never exceeded.
    pub shard_budget_bytes: u64,
    /// Size of one write-back in bytes: a multiple of the block size, at most the zone
    /// capacity. `None` = [`WRITEBACK_UNIT_BYTES_DEFAULT`] clamped to the device.
    pub writeback_unit_bytes: Option<u64>,
    /// A zone not written for this long has its whole blocks written back. `None` = never.
    pub idle_writeback: Option<Duration>,
    /// How many of the runtime's cores the instance runs on: its shards sit on cores
    /// `0..n` and zone `z` is owned by core `z % n` ([`crate::placement`]); calls from the
    /// other cores (and from plain threads) are sent there. `None` (the default) = every
    /// core. Fewer cores suit a caller whose own work lives on those cores (e.g. a store
    /// with one shard on core 0): its reads and writes then never cross cores.
    pub cores: Option<usize>,
}

impl Default for ZiobConfig {
    fn default() -> Self {
        ZiobConfig {
            buffered: true,
            shard_budget_bytes: SHARD_BUDGET_BYTES_DEFAULT,
            writeback_unit_bytes: None,
            idle_writeback: Some(IDLE_WRITEBACK_DEFAULT),
            cores: None,
        }
    }
}

impl ZiobConfig {
    /// The pass-through configuration: no buffering at all.
    pub fn pass_through() -> Self {
        ZiobConfig {
            buffered: false,
            ..ZiobConfig::default()
        }
    }

    /// The write-back unit for `geometry`: the configured one, or the default rounded down
    /// to a block multiple and clamped to the zone capacity.
    pub fn unit_bytes(&self, geometry: &Geometry) -> Result<u64> {
        let bs = geometry.block_size_bytes;
        let cap = geometry.zone_capacity_bytes;
        match self.writeback_unit_bytes {
            Some(u) => {
                if u == 0 || u % bs != 0 || u > cap {
                    return Err(ZiobError::Config(format!(
                        "write-back unit {u} bytes must be a positive multiple of the block size {bs} and at most the zone capacity {cap}"
                    )));
                }
                Ok(u)
            }
            None => Ok(Self::fit_unit_bytes(WRITEBACK_UNIT_BYTES_DEFAULT, geometry)),
        }
    }

    /// A write-back unit of about `bytes` that `geometry` takes: at most the zone capacity,
    /// rounded down to whole blocks (at least one). What the default unit gets, and what a
    /// caller that picks its own for any device can pass as
    /// [`writeback_unit_bytes`](Self::writeback_unit_bytes).
    pub fn fit_unit_bytes(bytes: u64, geometry: &Geometry) -> u64 {
        let bs = geometry.block_size_bytes;
        (bytes.min(geometry.zone_capacity_bytes) / bs).max(1) * bs
    }

    /// The cores the instance runs on for a runtime of `runtime_cores` cores: the
    /// configured count, which must be between 1 and `runtime_cores`, or all of them.
    pub fn instance_cores(&self, runtime_cores: usize) -> Result<usize> {
        match self.cores {
            None => Ok(runtime_cores),
            Some(n) if n >= 1 && n <= runtime_cores => Ok(n),
            Some(n) => Err(ZiobError::Config(format!(
                "the instance cannot run on {n} cores: the runtime has {runtime_cores} (choose 1 to {runtime_cores}, or None for all)"
            ))),
        }
    }

    /// Checks the settings against a device geometry.
    pub fn validate(&self, geometry: &Geometry) -> Result<()> {
        let unit = self.unit_bytes(geometry)?;
        if self.buffered && self.shard_budget_bytes < 2 * unit {
            return Err(ZiobError::Config(format!(
                "shard budget {} bytes must hold at least two write-back units of {unit} bytes",
                self.shard_budget_bytes
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A unit is fitted to the zones: at most the capacity, whole blocks, at least one; the
    /// default unit is fitted the same way.
    #[test]
    fn a_unit_is_fitted_to_the_zone_capacity_in_whole_blocks() {
        let mut g = Geometry::new(8, 16 << 20);
        g.zone_capacity_bytes = 12 << 20;
        assert_eq!(ZiobConfig::fit_unit_bytes(4 << 20, &g), 4 << 20);
        g.zone_capacity_bytes = 3 << 20;
        let fit = |bytes, g: &Geometry| ZiobConfig::fit_unit_bytes(bytes, g);
        assert_eq!(fit(4 << 20, &g), 3 << 20, "at most the capacity");
        g.zone_capacity_bytes = (3 << 20) + 512;
        g.block_size_bytes = 4096;
        assert_eq!(fit(4 << 20, &g), 3 << 20, "whole blocks");
        g.block_size_bytes = 16 << 10;
        assert_eq!(fit(12 << 10, &g), 16 << 10, "at least one block");
        assert_eq!(fit(40 << 10, &g), 32 << 10);
        g.zone_capacity_bytes = 12 << 20;
        g.block_size_bytes = 4096;
        let config = ZiobConfig::default();
        assert_eq!(config.unit_bytes(&g).unwrap(), WRITEBACK_UNIT_BYTES_DEFAULT);
        g.zone_capacity_bytes = 256 << 10;
        assert_eq!(
            config.unit_bytes(&g).unwrap(),
            256 << 10,
            "the default fitted"
        );
    }
}
