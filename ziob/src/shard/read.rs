//! Reads: from chunks where the buffer holds the range, from the device below it.

use std::rc::Rc;

use ziob_backends::{DeviceError, IoOp, ZoneState, ZonedDevice};
use ziob_runtime::DmaBuf;

use super::guards::ReaderGuard;
use super::Shard;
use crate::error::Result;
use crate::metrics::OpKind;
use crate::metrics::OpTimer;

impl<D: ZonedDevice> Shard<D> {
    /// Reads `len` bytes at `offset` of `zone`: from memory where the buffer holds the data
    /// (also while a write-back of it is in flight: the device only reads a view), from the
    /// device below it; bytes past the logical write pointer read as zeros.
    ///
    /// Cancel safety: changes nothing but a count of device reads in flight, which a guard
    /// takes back if the call is dropped.
    pub(crate) async fn read(
        self: &Rc<Self>,
        zone: u32,
        offset: u64,
        len: usize,
    ) -> Result<DmaBuf> {
        let _timer = OpTimer::start(&self.stats, OpKind::Read);
        self.check_zone(zone)?;
        let bs = self.bs();
        // Checked first: past it `offset + len` cannot overflow (it is within the zone).
        self.geometry.check_read_end(zone, offset, len as u64)?;
        let end = offset + len as u64;
        if !self.buffered {
            let (res, buf) = self
                .device
                .read(zone, offset, len, DmaBuf::with_capacity(len))
                .await;
            res?;
            self.stats.borrow_mut().s.read_bytes += len as u64;
            return Ok(buf);
        }
        let i = self.local(zone);
        loop {
            self.wait_until(|s| !s.zones.borrow()[i].exclusive()).await;
            let mut out = DmaBuf::zeroed(len);
            let (mem_start, state) = {
                let zones = self.zones.borrow();
                let z = &zones[i];
                if z.in_memory(offset, end) {
                    z.copy_out(offset, &mut out).expect("checked in memory");
                    drop(zones);
                    let mut st = self.stats.borrow_mut();
                    st.s.read_hits += 1;
                    st.s.read_bytes += len as u64;
                    drop(st);
                    return Ok(out);
                }
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
            // [offset, dev_end) from the device, the rest from memory.
            let dev_end = end.min(mem_start);
            let a = offset / bs * bs;
            let b = dev_end.div_ceil(bs) * bs;
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
            out[..n].copy_from_slice(&dev[(offset - a) as usize..(offset - a) as usize + n]);
            if dev_end < end {
                let zones = self.zones.borrow();
                if zones[i].copy_out(dev_end, &mut out[n..]).is_none() {
                    continue; // chunks moved meanwhile (evicted or held): read again
                }
            }
            let mut st = self.stats.borrow_mut();
            st.s.read_misses += 1;
            st.s.read_bytes += len as u64;
            drop(st);
            return Ok(out);
        }
    }
}
