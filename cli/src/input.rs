//! Reading the data of `write`, `append` and `stats` from stdin, never more than fits.
//!
//! A zone takes a bounded number of bytes, so stdin is read up to that bound plus one byte:
//! input that is larger is refused before anything is written, without reading (or holding
//! in memory) the rest of it — `cat /dev/zero | ziob write ...` fails at once.

use std::io::Read;

use ziob_backends::{Geometry, ZoneInfo};

/// What bounds the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// The zone's capacity after its write pointer.
    Capacity,
    /// The device's zone append size limit (smaller than what the zone has left).
    AppendLimit,
}

/// How much input a zone takes, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// The zone.
    pub zone: u32,
    /// The zone's write pointer in bytes.
    pub write_pointer_bytes: u64,
    /// Bytes of capacity after the write pointer.
    pub remaining_bytes: u64,
    /// The most input accepted, in bytes.
    pub limit_bytes: u64,
    /// What sets `limit_bytes`.
    pub bound: Bound,
}

/// Input larger than its [`Room`]: nothing was written.
#[derive(Debug, thiserror::Error)]
#[error("{}", describe(.0))]
pub struct TooLarge(pub Room);

fn describe(r: &Room) -> String {
    match r.bound {
        Bound::Capacity => format!(
            "input is larger than zone {} can take: {} bytes of capacity remain after its write pointer (byte {}); nothing was written",
            r.zone, r.remaining_bytes, r.write_pointer_bytes
        ),
        Bound::AppendLimit => format!(
            "input is larger than one append to zone {} may be: the zone append size limit is {} bytes ({} bytes of capacity remain in the zone); nothing was written",
            r.zone, r.limit_bytes, r.remaining_bytes
        ),
    }
}

impl Room {
    /// The room of zone `info.index` on a device of `geometry`, in whole blocks.
    /// `append_limit` says whether the zone append size limit applies (one device append)
    /// or not (a write, or appends through the buffer, which splits them).
    pub fn of(geometry: &Geometry, info: &ZoneInfo, append_limit: bool) -> Room {
        let bs = geometry.block_size_bytes;
        let remaining = info.capacity_bytes.saturating_sub(info.write_pointer_bytes);
        let remaining = remaining - remaining % bs;
        let (limit, bound) = if append_limit && geometry.max_append_bytes < remaining {
            let max = geometry.max_append_bytes;
            (max - max % bs, Bound::AppendLimit)
        } else {
            (remaining, Bound::Capacity)
        };
        Room {
            zone: info.index,
            write_pointer_bytes: info.write_pointer_bytes,
            remaining_bytes: remaining,
            limit_bytes: limit,
            bound,
        }
    }
}

/// Why reading the input failed.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// More input than fits.
    #[error(transparent)]
    TooLarge(#[from] TooLarge),
    /// stdin could not be read.
    #[error("reading stdin: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads `from` to its end if it holds at most `room.limit_bytes`; reads one byte more and
/// stops otherwise.
pub fn read_within(from: impl Read, room: &Room) -> Result<Vec<u8>, InputError> {
    let mut data = Vec::new();
    from.take(room.limit_bytes.saturating_add(1))
        .read_to_end(&mut data)?;
    if data.len() as u64 > room.limit_bytes {
        return Err(TooLarge(*room).into());
    }
    Ok(data)
}

/// [`read_within`] on this process's stdin.
pub fn read_stdin_within(room: &Room) -> Result<Vec<u8>, InputError> {
    read_within(std::io::stdin().lock(), room)
}
