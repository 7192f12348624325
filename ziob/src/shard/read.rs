//! Reads: from chunks where the buffer holds the range, from the device below it.

use std::rc::Rc;

use ziob_backends::{DeviceError, IoOp, ZoneState, ZonedDevice};
use ziob_runtime::{DmaBuf, WINDOW_ALIGN_BYTES};

use super::guards::ReaderGuard;
use super::Shard;
use crate::error::Result;
use crate::metrics::OpKind;
use crate::metrics::OpTimer;

/// Where a read puts its bytes, filled front to back: a [`DmaBuf`] ([`Ziob::read`]) or a
/// `Vec<u8>` that becomes a `Bytes` without a copy ([`Client::read`]). Nothing is zeroed
/// first only to be overwritten.
///
/// [`Ziob::read`]: crate::Ziob::read
/// [`Client::read`]: crate::Client::read
pub(crate) trait ReadOut: Sized {
    /// An empty output with room for `len` bytes.
    fn with_capacity(len: usize) -> Self;
    /// Appends `data`.
    fn put(&mut self, data: &[u8]);
    /// Appends `n` zero bytes.
    fn put_zeros(&mut self, n: usize);
    /// The output holding what a device read of exactly the range gave.
    fn from_device(buf: DmaBuf) -> Self;
    /// The output holding bytes `start..start + len` of what a device read gave.
    fn from_device_part(buf: DmaBuf, start: usize, len: usize) -> Self;
}

impl ReadOut for DmaBuf {
    fn with_capacity(len: usize) -> Self {
        DmaBuf::with_capacity(len)
    }
    fn put(&mut self, data: &[u8]) {
        self.extend_from_slice(data);
    }
    fn put_zeros(&mut self, n: usize) {
        if n > 0 {
            self.resize(self.len() + n, 0);
        }
    }
    fn from_device(buf: DmaBuf) -> Self {
        buf
    }
    fn from_device_part(mut buf: DmaBuf, start: usize, len: usize) -> Self {
        let at = buf.window_start() + start;
        if !at.is_multiple_of(WINDOW_ALIGN_BYTES) {
            return DmaBuf::from_slice(&buf[start..start + len]);
        }
        // The device's buffer itself: no second buffer, no copy.
        buf.set_window(at, at + len);
        buf
    }
}

impl ReadOut for Vec<u8> {
    fn with_capacity(len: usize) -> Self {
        Vec::with_capacity(len)
    }
    fn put(&mut self, data: &[u8]) {
        self.extend_from_slice(data);
    }
    fn put_zeros(&mut self, n: usize) {
        self.resize(self.len() + n, 0);
    }
    fn from_device(buf: DmaBuf) -> Self {
        buf.to_vec()
    }
    fn from_device_part(buf: DmaBuf, start: usize, len: usize) -> Self {
        buf[start..start + len].to_vec()
    }
}

impl<D: ZonedDevice> Shard<D> {
    /// Reads `len` bytes at `offset` of `zone`: from memory where the buffer holds the data
    /// (also while a write-back of it is in flight: the device only reads a view), from the
    /// device below it; bytes past the logical write pointer read as zeros.
    ///
    /// Cancel safety: changes nothing but a count of device reads in flight, which a guard
    /// takes back if the call is dropped.
    pub(crate) async fn read<O: ReadOut>(
        self: &Rc<Self>,
        zone: u32,
        offset: u64,
        len: usize,
    ) -> Result<O> {
        let _timer = OpTimer::start(&self.stats, OpKind::Read);
        self.check_read(zone, offset, len)?;
        let bs = self.bs();
        let end = offset + len as u64;
        if !self.buffered {
            let (res, buf) = self
                .device
                .read(zone, offset, len, DmaBuf::with_capacity(len))
                .await;
            res?;
            self.stats.borrow_mut().s.read_bytes += len as u64;
            return Ok(O::from_device(buf));
        }
        let i = self.local(zone);
        loop {
            self.wait_until(|s| !s.zones.borrow()[i].exclusive()).await;
            if let Some(out) = self.copy_from_memory(i, offset, len) {
                return Ok(out);
            }
            let (mem_start, state) = {
                let z = &self.zones.borrow()[i];
                (z.mem_start(), z.state)
            };
            if state == ZoneState::Offline {
                return Err(DeviceError::Offline {
                    op: IoOp::Read,
                    zone,
                    offset_blocks: offset / bs,
                }
                .into());
            }
            // [offset, dev_end) from the device, the rest from memory; the device reads
            // whole blocks, or just those bytes when it reads through the page cache.
            let dev_end = end.min(mem_start);
            let g = self.device.read_granularity_bytes().max(1);
            let a = offset / g * g;
            let b = dev_end.div_ceil(g) * g;
            let reading = ReaderGuard::new(self, i);
            let device_timer = OpTimer::start(&self.stats, OpKind::DeviceRead);
            let (res, dev) = self
                .device
                .read(
                    zone,
                    a,
                    (b - a) as usize,
                    DmaBuf::with_capacity((b - a) as usize),
                )
                .await;
            drop(device_timer);
            drop(reading);
            res?;
            let n = (dev_end - offset) as usize;
            let out = if dev_end == end {
                O::from_device_part(dev, (offset - a) as usize, n)
            } else {
                let mut out = O::with_capacity(len);
                out.put(&dev[(offset - a) as usize..(offset - a) as usize + n]);
                let zones = self.zones.borrow();
                if zones[i].copy_out(dev_end, len - n, &mut out).is_none() {
                    continue; // chunks moved meanwhile (evicted or held): read again
                }
                out
            };
            let mut st = self.stats.borrow_mut();
            st.s.read_misses += 1;
            st.s.read_bytes += len as u64;
            drop(st);
            return Ok(out);
        }
    }

    /// [`read`](Self::read) without waiting, when it needs no wait and no device: the
    /// range is in the buffer's memory (or past the write pointer) and no reset or finish
    /// holds the zone. `None` when it would have to wait or read the device, or `zone` is
    /// another core's (the caller then reads with [`read`](Self::read) on the owner); a
    /// range outside the zone is an error as there.
    pub(crate) fn read_now<O: ReadOut>(
        &self,
        zone: u32,
        offset: u64,
        len: usize,
    ) -> Option<Result<O>> {
        if !self.buffered || zone as usize % self.cores != self.core {
            return None;
        }
        let timer = OpTimer::start(&self.stats, OpKind::Read);
        if let Err(e) = self.check_read(zone, offset, len) {
            return Some(Err(e));
        }
        let i = self.local(zone);
        if self.zones.borrow()[i].exclusive() {
            timer.discard();
            return None;
        }
        let out = self.copy_from_memory(i, offset, len);
        if out.is_none() {
            timer.discard();
        }
        out.map(Ok)
    }

    /// Checks that `[offset, offset + len)` is a range of zone `zone` (after it, `offset +
    /// len` cannot overflow).
    fn check_read(&self, zone: u32, offset: u64, len: usize) -> Result<()> {
        self.check_zone(zone)?;
        self.geometry.check_read_end(zone, offset, len as u64)?;
        Ok(())
    }

    /// `[offset, offset + len)` of local zone `i` from memory (counted as a hit), or `None`
    /// if part of it is on the device only.
    fn copy_from_memory<O: ReadOut>(&self, i: usize, offset: u64, len: usize) -> Option<O> {
        let zones = self.zones.borrow();
        let z = &zones[i];
        if !z.in_memory(offset, offset + len as u64) {
            return None;
        }
        let mut out = O::with_capacity(len);
        z.copy_out(offset, len, &mut out)
            .expect("checked in memory");
        drop(zones);
        let mut st = self.stats.borrow_mut();
        st.s.read_hits += 1;
        st.s.read_bytes += len as u64;
        Some(out)
    }
}
