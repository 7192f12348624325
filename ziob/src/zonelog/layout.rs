//! How a space's logs lie on the device: block and zone sizes, and whether appends must be
//! whole blocks (a pass-through instance sends them straight to the device's Zone Append).

use bytes::Bytes;
use ziob_backends::Geometry;

use super::record::frame_len;
use super::zone_header::zone_header_len;

/// The device facts a log needs, fixed when the space opens.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// Block size in bytes.
    pub block_bytes: u64,
    /// Writable bytes per zone.
    pub capacity_bytes: u64,
    /// Appends must be whole blocks of at most `max_append_bytes` (pass-through).
    pub whole_blocks: bool,
    /// Largest append (pass-through only).
    pub max_append_bytes: u64,
    /// Bytes to read at once when reading many records.
    pub read_window_bytes: u64,
}

impl Layout {
    /// The layout for a device of `geometry`, buffered or not.
    pub fn new(geometry: &Geometry, buffered: bool, read_window_bytes: u64) -> Layout {
        let bs = geometry.block_size_bytes;
        Layout {
            block_bytes: bs,
            capacity_bytes: geometry.zone_capacity_bytes,
            whole_blocks: !buffered,
            max_append_bytes: geometry.max_append_bytes,
            read_window_bytes: (read_window_bytes.div_ceil(bs) * bs).max(bs),
        }
    }

    /// The largest record payload a log named `name` takes.
    pub fn max_record_bytes(&self, name: &str) -> u64 {
        let mut room = self.capacity_bytes.saturating_sub(zone_header_len(name));
        if self.whole_blocks {
            // The header takes the zone's first block(s); a record append is at most
            // max_append_bytes.
            let header_blocks = zone_header_len(name).div_ceil(self.block_bytes) * self.block_bytes;
            room = self
                .capacity_bytes
                .saturating_sub(header_blocks)
                .min(self.max_append_bytes);
        }
        room.saturating_sub(frame_len(0) as u64)
    }

    /// `bytes` as an append: padded with zeros to whole blocks when appends must be.
    pub fn append_bytes(&self, mut bytes: Vec<u8>) -> Bytes {
        if self.whole_blocks {
            let n = (bytes.len() as u64).div_ceil(self.block_bytes) * self.block_bytes;
            bytes.resize(n as usize, 0);
        }
        Bytes::from(bytes)
    }
}
