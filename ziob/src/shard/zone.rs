//! One zone's buffer: its logical state and write pointer, what the device has, and the
//! chunks of memory in between. Pure data structure: no I/O, no waiting.

use std::collections::VecDeque;
use std::time::Instant;

use ziob_backends::ZoneState;
use ziob_runtime::DmaBuf;

use crate::error::ZiobError;
use crate::shard::read::ReadOut;

/// A staging buffer covering `[start, start + cap)` of the zone, filled up to `filled`.
pub(crate) struct Chunk {
    /// Zone offset of the first byte (a multiple of the block size).
    pub(crate) start: u64,
    /// Bytes of memory, charged against the shard budget.
    pub(crate) cap: u64,
    /// Bytes of data.
    pub(crate) filled: u64,
    /// The memory. A write-back writes a read-only view of it ([`DmaBuf::share`]) and the
    /// chunk keeps it: while the view is out, the issued range `[.., issued_wp)` is
    /// immutable (appends and padding only write at the write pointer, which is past it),
    /// and reads of any byte are served from here.
    pub(crate) buf: DmaBuf,
}

impl Chunk {
    pub(crate) fn end(&self) -> u64 {
        self.start + self.filled
    }
    pub(crate) fn is_full(&self) -> bool {
        self.filled == self.cap
    }
}

/// What the buffer believes about the device's copy of the zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeviceZone {
    /// Nothing written since the last reset: holds no resource.
    Empty,
    /// Being written: holds an open and an active resource.
    Open,
    /// Partly written, closed: holds an active resource.
    Closed,
    /// Full (written to capacity or finished): holds nothing.
    Full,
}

impl DeviceZone {
    /// The device state matching a reported zone state.
    pub(crate) fn from_state(s: ZoneState) -> DeviceZone {
        match s {
            ZoneState::Empty => DeviceZone::Empty,
            ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened => DeviceZone::Open,
            ZoneState::Closed => DeviceZone::Closed,
            ZoneState::Full | ZoneState::ReadOnly | ZoneState::Offline => DeviceZone::Full,
        }
    }
    pub(crate) fn is_active(self) -> bool {
        matches!(self, DeviceZone::Open | DeviceZone::Closed)
    }
}

/// The zone operation that holds a zone, if any (one at a time, set and cleared by a guard
/// in `guards.rs`, so a dropped future cannot leave it set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ZoneOp {
    /// Nothing holds the zone.
    Idle,
    /// A write larger than the shard can hold at once is streaming in: other writes,
    /// flushes, finishes and resets wait (reads do not).
    Streaming,
    /// A finish is in progress: everything else waits.
    Finishing,
    /// A reset is in progress: everything else waits, and nothing may be written back (the
    /// zone's data is being discarded).
    Resetting,
}

/// The zone's write-back task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writeback {
    /// No write-back task.
    Idle,
    /// Waiting in the shard's queue for an open/active resource.
    Queued,
    /// A write-back task (or a close of the device zone) is running.
    Running,
}

/// One zone as its owning shard sees it.
pub(crate) struct ZoneBuf {
    /// The zone index.
    pub(crate) index: u32,
    /// State shown to applications.
    pub(crate) state: ZoneState,
    /// Logical write pointer: bytes accepted from applications (data end for a Full zone).
    pub(crate) wp: u64,
    /// Bytes the device has (completed write-backs, contiguous from the zone start).
    pub(crate) device_wp: u64,
    /// Bytes handed to the device (write-backs issued; `>= device_wp`).
    pub(crate) issued_wp: u64,
    /// Write-backs that completed ahead of an earlier one still in flight: `(start, end)`.
    pub(crate) completed_ahead: Vec<(u64, u64)>,
    /// The device's copy of the zone.
    pub(crate) device: DeviceZone,
    /// Staging memory from (at most) `device_wp` rounded down to a chunk, up to `wp`.
    pub(crate) chunks: VecDeque<Chunk>,
    /// Write back at least up to here, whole blocks, even from a partly filled chunk.
    pub(crate) target: u64,
    /// Bytes from the zone start known durable (`<= device_wp`): covered by a completed
    /// device flush that began after they were written back, or by durable write-backs that
    /// continued such a prefix. `None` until a device flush covers the zone after the
    /// buffer opened or after a reset: data found on the device, or a reset, may still be
    /// in the device's volatile cache.
    pub(crate) durable_wp: Option<u64>,
    /// Write-backs ending at or below this are issued as durable writes
    /// ([`ZonedDevice::write_durable`](ziob_backends::ZonedDevice::write_durable)) on a
    /// device that has them: a zone flush set it, to end without a device cache flush.
    pub(crate) durable_target: u64,
    /// The zone's write-back task.
    pub(crate) writeback: Writeback,
    /// The operation holding the zone.
    pub(crate) op: ZoneOp,
    /// Device reads in flight (a reset waits for them; counted by a guard).
    pub(crate) readers: u32,
    /// Bumped by reset: a write-back that started before must not touch the new data.
    pub(crate) generation: u64,
    /// Resets that completed (a failed reset bumps `generation` but not this).
    pub(crate) resets: u64,
    /// A failed write-back, reported to every caller until the zone is reset.
    pub(crate) error: Option<ZiobError>,
    /// Transient write-back failures in a row (reset by a completed write-back, a reset or
    /// a finish); at `policy::WRITEBACK_RETRIES` the next one is kept as `error`.
    pub(crate) retries: u32,
    /// Sequence number of the last write (smaller = less recently written).
    pub(crate) last_write_seq: u64,
    /// Time of the last write, for idle write-back.
    pub(crate) last_write_at: Option<Instant>,
}

impl ZoneBuf {
    /// A zone as reported by the device at open time.
    pub(crate) fn from_device(index: u32, state: ZoneState, wp: u64) -> ZoneBuf {
        ZoneBuf {
            index,
            state,
            wp,
            device_wp: wp,
            issued_wp: wp,
            completed_ahead: Vec::new(),
            device: DeviceZone::from_state(state),
            chunks: VecDeque::new(),
            target: 0,
            // What the device had at open may still be in its volatile cache.
            durable_wp: None,
            durable_target: 0,
            writeback: Writeback::Idle,
            op: ZoneOp::Idle,
            readers: 0,
            generation: 0,
            resets: 0,
            error: None,
            retries: 0,
            last_write_seq: 0,
            last_write_at: None,
        }
    }

    /// A reset or finish holds the zone.
    pub(crate) fn exclusive(&self) -> bool {
        matches!(self.op, ZoneOp::Finishing | ZoneOp::Resetting)
    }

    /// A write-back task is running.
    pub(crate) fn writeback_running(&self) -> bool {
        self.writeback == Writeback::Running
    }

    /// The zone waits for a device resource to start its write-back.
    pub(crate) fn waiting_for_tokens(&self) -> bool {
        self.writeback == Writeback::Queued
    }

    /// Zone offset of the first byte in memory (the write pointer if no chunk).
    pub(crate) fn mem_start(&self) -> u64 {
        self.chunks.front().map_or(self.wp, |c| c.start)
    }

    /// Bytes from the zone start that completed write-backs put on the device (`device_wp`),
    /// whether or not memory still holds a clean copy of some of them: the readable end
    /// published in [`crate::on_device::OnDevice`] (plain threads read all of it from the
    /// device; the runtime's cores, where a device read waits, only what lies below
    /// [`mem_start`](Self::mem_start)).
    pub(crate) fn on_device_end(&self) -> u64 {
        self.device_wp
    }

    /// Bytes accepted but not on the device.
    pub(crate) fn dirty_bytes(&self) -> u64 {
        self.wp - self.device_wp
    }

    /// Records a completed write-back of `[start, end)` and advances `device_wp` over every
    /// range that is now contiguous with it.
    pub(crate) fn complete_writeback(&mut self, start: u64, end: u64) {
        self.completed_ahead.push((start, end));
        while let Some(pos) = self
            .completed_ahead
            .iter()
            .position(|&(s, _)| s == self.device_wp)
        {
            self.device_wp = self.completed_ahead.swap_remove(pos).1;
        }
    }

    /// Free bytes in the tail chunk (0 if there is none).
    pub(crate) fn tail_room(&self) -> u64 {
        match self.chunks.back() {
            Some(c) if c.end() == self.wp => c.cap - c.filled,
            _ => 0,
        }
    }

    /// Copies `data` at the write pointer: first into the tail chunk, then into `new_chunks`
    /// (fresh, empty chunks of the given capacities, charged by the caller). The caller has
    /// checked that everything fits.
    pub(crate) fn copy_in(&mut self, mut data: &[u8], new_chunks: Vec<(u64, DmaBuf)>) {
        let room = self.tail_room();
        if room > 0 {
            let n = room.min(data.len() as u64) as usize;
            let tail = self.chunks.back_mut().expect("room implies a tail");
            tail.buf.extend_from_slice(&data[..n]);
            tail.filled += n as u64;
            self.wp += n as u64;
            data = &data[n..];
        }
        for (cap, buf) in new_chunks {
            debug_assert!(buf.is_empty());
            let mut chunk = Chunk {
                start: self.wp,
                cap,
                filled: 0,
                buf,
            };
            let n = cap.min(data.len() as u64) as usize;
            chunk.buf.extend_from_slice(&data[..n]);
            chunk.filled = n as u64;
            self.wp += n as u64;
            data = &data[n..];
            self.chunks.push_back(chunk);
        }
        assert!(data.is_empty(), "copy_in was given too little room");
    }

    /// Moves the tail chunk's data into `buf`, a larger memory of `cap` bytes (charged by
    /// the caller, who gives the old capacity back). A write-back still holding a view of
    /// the old memory keeps it alive until it ends; the bytes it writes are the same.
    pub(crate) fn grow_tail(&mut self, cap: u64, mut buf: DmaBuf) {
        let t = self.chunks.back_mut().expect("a tail to grow");
        debug_assert!(cap > t.cap && buf.is_empty());
        buf.extend_from_slice(&t.buf[..t.filled as usize]);
        t.buf = buf;
        t.cap = cap;
    }

    /// Appends `[offset, offset + len)` from memory to `out`, where memory holds it.
    /// Returns `None` (and appends nothing) if part of the range below `wp` is in no chunk's
    /// memory (on the device only), else `Some(())`. Bytes at or past `wp` are zeros.
    pub(crate) fn copy_out<O: ReadOut>(&self, offset: u64, len: usize, out: &mut O) -> Option<()> {
        let end = offset + len as u64;
        let mem_start = self.chunks.front().map_or(self.wp, |c| c.start);
        if offset < mem_start.min(self.wp) {
            return None;
        }
        // Chunks are in order and contiguous; anything no chunk holds reads as zeros.
        let mut at = offset;
        for c in &self.chunks {
            let (lo, hi) = (at.max(c.start), end.min(c.end()));
            if lo >= hi {
                continue;
            }
            out.put_zeros((lo - at) as usize);
            out.put(&c.buf[(lo - c.start) as usize..(hi - c.start) as usize]);
            at = hi;
        }
        out.put_zeros((end - at) as usize);
        Some(())
    }

    /// Whether `[offset, end)` below `wp` is held by chunks (chunks are contiguous from
    /// [`ZoneBuf::mem_start`] to the write pointer).
    pub(crate) fn in_memory(&self, offset: u64, end: u64) -> bool {
        offset >= end.min(self.wp) || offset >= self.mem_start()
    }

    /// Drops every chunk (reset); returns the memory bytes released.
    pub(crate) fn drop_chunks(&mut self) -> u64 {
        self.chunks.drain(..).map(|c| c.cap).sum()
    }

    /// Whether chunk `i` is clean (wholly on the device) and may be dropped.
    /// A clean tail can go too: its end is the write pointer, block aligned (a partial block
    /// is never on the device), so the next write starts a fresh chunk there.
    fn evictable(&self, i: usize) -> bool {
        let c = &self.chunks[i];
        c.end() <= self.device_wp
    }

    /// Drops clean chunks from the front until `want_bytes` are released; returns the
    /// memory bytes released.
    pub(crate) fn evict_clean(&mut self, want_bytes: u64) -> u64 {
        let mut freed = 0;
        while freed < want_bytes && !self.chunks.is_empty() && self.evictable(0) {
            freed += self.chunks.pop_front().expect("non-empty").cap;
        }
        freed
    }

    /// Bytes of clean chunks that could be evicted.
    pub(crate) fn clean_bytes(&self) -> u64 {
        (0..self.chunks.len())
            .take_while(|&i| self.evictable(i))
            .map(|i| self.chunks[i].cap)
            .sum()
    }

    /// Memory bytes held.
    pub(crate) fn memory_bytes(&self) -> u64 {
        self.chunks.iter().map(|c| c.cap).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(cap: u64) -> (u64, DmaBuf) {
        (cap, DmaBuf::with_capacity(cap as usize))
    }

    #[test]
    fn copy_in_spans_chunks_and_copy_out_returns_it() {
        let mut z = ZoneBuf::from_device(0, ZoneState::Empty, 0);
        let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        z.copy_in(&data[..100], vec![chunk(4096)]);
        assert_eq!(z.tail_room(), 3996);
        z.copy_in(&data[100..], vec![chunk(4096), chunk(4096)]);
        assert_eq!(z.wp, 10_000);
        assert_eq!(z.chunks.len(), 3);
        let mut out = Vec::new();
        z.copy_out(0, 10_100, &mut out).unwrap();
        assert_eq!(out.len(), 10_100);
        assert!(out[..10_000] == data[..]);
        assert!(
            out[10_000..].iter().all(|&b| b == 0),
            "past wp reads as zeros"
        );
    }

    #[test]
    fn copy_out_refuses_ranges_only_on_the_device() {
        let mut z = ZoneBuf::from_device(0, ZoneState::Closed, 8192);
        z.copy_in(&[1; 10], vec![chunk(4096)]);
        let mut out = Vec::new();
        assert!(z.copy_out(8190, 4, &mut out).is_none());
        assert!(out.is_empty(), "nothing appended when refused");
        assert!(z.copy_out(8192, 4, &mut out).is_some());
        assert_eq!(out, vec![1; 4]);
        assert!(!z.in_memory(4096, 8200));
        assert!(z.in_memory(8192, 8200));
    }

    #[test]
    fn eviction_takes_only_clean_chunks_from_the_front() {
        let mut z = ZoneBuf::from_device(0, ZoneState::Empty, 0);
        z.copy_in(&[7; 5000], vec![chunk(4096), chunk(4096)]);
        assert_eq!(z.clean_bytes(), 0);
        z.device_wp = 4096;
        assert_eq!(z.clean_bytes(), 4096);
        assert_eq!(z.evict_clean(u64::MAX), 4096);
        assert_eq!(z.chunks.len(), 1);
        assert_eq!(z.evict_clean(u64::MAX), 0, "the dirty tail stays");
        // Reads of the evicted range now need the device.
        assert!(!z.in_memory(0, 10));
        assert!(z.in_memory(4096, 5000));
    }
}
