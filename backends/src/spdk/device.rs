//! [`SpdkDevice`]: the [`ZonedDevice`] over an attached namespace.

use std::ffi::{c_int, c_void};
use std::rc::Rc;
use std::sync::Arc;

use ziob_runtime::{DmaBuf, IoBuf, IoBufMut};

use super::allocator::{install_allocator_on_every_core, spdk_allocator, TransferCounters};
use super::command::{on_complete, run_cmd, Held, SubmitFn};
use super::env::{attach, version, Attached};
use super::ffi;
use super::options::SpdkOptions;
use super::qpair::{core_q, CoreQ};
use crate::device::{check_read_buf, fill_read_buf, ZonedDevice};
use crate::model::error::{DeviceError, IoOp, Result};
use crate::model::geometry::Geometry;
use crate::model::state::{capacity_crossing_refusal, ZoneAction, ZoneInfo, ZoneTarget};
use crate::nvme::status::{self as nvme_status, IoContext, NvmeStatus};
use crate::nvme::zone;

/// Largest zone report buffer per command.
const REPORT_BUF_MAX_BYTES: usize = 64 * 1024;

#[derive(Clone)]
struct Inner {
    name: String,
    geometry: Geometry,
    ctl: Arc<Attached>,
    zone_size_blocks: u64,
    max_xfer_bytes: u64,
    /// The `bounce` option: copy every transfer, even from SPDK memory.
    bounce: bool,
}

/// An NVMe ZNS namespace driven by SPDK (see the module docs).
#[derive(Clone)]
pub struct SpdkDevice {
    inner: Arc<Inner>,
}

impl SpdkDevice {
    /// Opens `spdk:ADDR[,options]` (`rest` is what follows `spdk:`). Must run on a runtime
    /// core; the first open of the process initialises SPDK (seconds under emulation).
    pub async fn open(spec: &str, rest: &str) -> Result<SpdkDevice> {
        let invalid = |reason: String| DeviceError::InvalidSpec {
            spec: spec.to_string(),
            reason,
        };
        let o = SpdkOptions::parse(rest).map_err(invalid)?;
        let ctl = attach(&o)
            .map_err(|e| DeviceError::io(format!("{spec}: attach"), std::io::Error::other(e)))?;
        let g = ctl.geo;
        if g.is_zoned == 0 {
            return Err(invalid(format!(
                "namespace {} is not a zoned (ZNS) namespace",
                o.nsid
            )));
        }
        let bs = u64::from(g.block_size);
        let zone_count = u32::try_from(g.zone_count)
            .map_err(|_| invalid(format!("{} zones is too many", g.zone_count)))?;
        let mut geometry = Geometry {
            block_size_bytes: bs,
            zone_size_bytes: g.zone_size_blocks * bs,
            zone_capacity_bytes: g.zone_size_blocks * bs,
            zone_count,
            max_open_zones: (g.max_open != 0).then_some(g.max_open),
            max_active_zones: (g.max_active != 0).then_some(g.max_active),
            max_append_bytes: u64::from(g.max_append_bytes),
            volatile_write_cache: g.vwc != 0,
        };
        let mut dev = Inner {
            name: spec.to_string(),
            geometry,
            ctl,
            zone_size_blocks: g.zone_size_blocks,
            max_xfer_bytes: u64::from(g.max_xfer_bytes.max(g.block_size)),
            bounce: o.bounce,
        };
        // Zone capacity is per zone in ZNS; ZIOB's geometry has one: zone 0's.
        let dev0 = SpdkDevice {
            inner: Arc::new(dev.clone()),
        };
        let z0 = dev0.report_raw(0, 1).await?;
        let cap = z0
            .first()
            .map_or(geometry.zone_size_bytes, |z| z.capacity_bytes);
        geometry.zone_capacity_bytes = cap;
        geometry.max_append_bytes = geometry.max_append_bytes.min(cap) / bs * bs;
        geometry.validate()?;
        dev.geometry = geometry;
        // Only for a device that opened: a failed open leaves the runtime's memory alone.
        if !o.bounce {
            install_allocator_on_every_core().await?;
        }
        tracing::info!(spec, ?geometry, spdk = %version(), "spdk device open");
        Ok(SpdkDevice {
            inner: Arc::new(dev),
        })
    }

    fn geo(&self) -> &Geometry {
        &self.inner.geometry
    }

    fn core(&self) -> Result<Rc<CoreQ>> {
        core_q(&self.inner.ctl)
    }

    fn slba(&self, zone: u32) -> u64 {
        u64::from(zone) * self.inner.zone_size_blocks
    }

    /// What Report Zones descriptors are checked against.
    fn report_layout(&self) -> zone::ReportLayout {
        zone::ReportLayout {
            zone_size_blocks: self.inner.zone_size_blocks,
            zone_count: self.inner.geometry.zone_count,
            block_size_bytes: self.inner.geometry.block_size_bytes,
        }
    }

    async fn zone_now(&self, zone: u32) -> Option<ZoneInfo> {
        self.report_raw(zone, 1)
            .await
            .ok()
            .and_then(|v| v.into_iter().next())
    }

    /// Report Zones without the range check of the trait (used at open, before the geometry
    /// is final).
    async fn report_raw(&self, first: u32, count: u32) -> Result<Vec<ZoneInfo>> {
        let core = self.core()?;
        let end = first
            .saturating_add(count)
            .min(self.inner.geometry.zone_count);
        let per_cmd_max = ((REPORT_BUF_MAX_BYTES.min(self.inner.max_xfer_bytes as usize)
            - zone::REPORT_HEADER_BYTES)
            / zone::ZONE_DESCRIPTOR_BYTES)
            .max(1);
        let mut out = Vec::with_capacity(end.saturating_sub(first) as usize);
        let mut next = first;
        while next < end {
            let n = ((end - next) as usize).min(per_cmd_max);
            let len = zone::report_len_bytes(n, 0);
            let buf = core.get_buf(len)?;
            let data = buf.ptr.cast();
            let slba = self.slba(next);
            let (r, held) = run_cmd(
                &core,
                Some(Held::Bounce(buf)),
                data,
                "report zones",
                &|h, qp, b, arg| {
                    // SAFETY: valid handles; `b` is a DMA buffer of at least `len` bytes.
                    unsafe {
                        ffi::ziob_spdk_report_zones(h, qp, b, len as u32, slba, on_complete, arg)
                    }
                },
            )
            .await;
            let buf = held
                .and_then(Held::into_chunk)
                .expect("a command gives back its buffer");
            let st = match r {
                Ok((st, _)) => st,
                Err(e) => {
                    core.put_buf(buf);
                    return Err(e);
                }
            };
            if st != 0 {
                core.put_buf(buf);
                return Err(typed(st, "spdk: report zones", |_| None));
            }
            let parsed = decode_report(
                &self.inner.name,
                buf.slice(len),
                &self.report_layout(),
                next,
                n,
            );
            core.put_buf(buf);
            let zones = parsed?;
            next += zones.len() as u32;
            out.extend(zones);
        }
        Ok(out)
    }

    /// One read, write or append of `len` bytes: a read fills `buf` from its window start,
    /// a write or append sends `buf[at..at + len]`. SPDK memory is used in place, anything
    /// else goes through a bounce buffer. Returns the command result (the append's LBA) and
    /// `buf`.
    async fn data_cmd(
        &self,
        op: IoOp,
        zone: u32,
        offset_bytes: u64,
        len: usize,
        mut buf: DmaBuf,
        at: usize,
    ) -> (Result<u64>, DmaBuf) {
        let core = match self.core() {
            Ok(c) => c,
            Err(e) => return (Err(e), buf),
        };
        let (held, data, bounced_from) = if !self.inner.bounce && buf.allocated_by(spdk_allocator())
        {
            let data: *mut c_void = if op == IoOp::Read {
                buf.stable_mut_ptr().cast()
            } else {
                assert!(at + len <= buf.len());
                // SAFETY: at + len <= buf.len(), so the pointer stays inside the buffer.
                unsafe { buf.stable_ptr().add(at) }.cast_mut().cast()
            };
            TransferCounters::add(|c| &c.zero_copy_cmds, 1);
            (Held::Caller(buf), data, None)
        } else {
            let mut chunk = match core.get_buf(len) {
                Ok(c) => c,
                Err(e) => return (Err(e), buf),
            };
            if op != IoOp::Read {
                chunk.slice_mut(len).copy_from_slice(&buf[at..at + len]);
            }
            TransferCounters::add(|c| &c.bounced_cmds, 1);
            TransferCounters::add(|c| &c.bounced_bytes, len as u64);
            let data = chunk.ptr.cast();
            (Held::Bounce(chunk), data, Some(buf))
        };
        let bs = self.geo().block_size_bytes;
        let blocks = (len as u64 / bs) as u32;
        let lba = self.slba(zone) + offset_bytes / bs;
        let zslba = self.slba(zone);
        let submit = |h, qp, b, arg| -> c_int {
            // SAFETY: valid handles; `b` points to `len` bytes of SPDK DMA memory owned by
            // the command's slot until its completion.
            unsafe {
                match op {
                    IoOp::Read => ffi::ziob_spdk_read(h, qp, b, lba, blocks, on_complete, arg),
                    IoOp::Write => ffi::ziob_spdk_write(h, qp, b, lba, blocks, on_complete, arg),
                    IoOp::Append => {
                        ffi::ziob_spdk_append(h, qp, b, zslba, blocks, on_complete, arg)
                    }
                }
            }
        };
        let (r, held) = run_cmd(&core, Some(held), data, op.as_str(), &submit).await;
        let read_ok = op == IoOp::Read && matches!(r, Ok((0, _)));
        let buf = match (bounced_from, held) {
            (Some(mut b), Some(Held::Bounce(chunk))) => {
                if read_ok {
                    fill_read_buf(&mut b, chunk.slice(len), len);
                }
                core.put_buf(chunk);
                b
            }
            (None, Some(Held::Caller(mut b))) => {
                if read_ok {
                    // SAFETY: the device wrote `len` bytes from the window start (a
                    // successful read transfers all of them; len <= capacity was checked).
                    unsafe { b.set_init(len) };
                }
                b
            }
            _ => unreachable!("a command gives back the buffer it was given"),
        };
        let (st, result) = match r {
            Ok(x) => x,
            Err(e) => return (Err(e), buf),
        };
        if st != 0 {
            let now = self.zone_now(zone).await;
            let ctx = IoContext {
                op,
                zone,
                offset_bytes,
                len_bytes: len as u64,
            };
            let what = format!("{}: {op}", self.inner.name);
            let e = typed(st, &what, |s| {
                nvme_status::io_error(self.geo(), s, ctx, now.as_ref())
            });
            return (Err(e), buf);
        }
        (Ok(result), buf)
    }

    fn check_read(&self, zone: u32, offset_bytes: u64, len: usize, buf: &DmaBuf) -> Result<()> {
        let g = self.geo();
        g.check_zone(zone)?;
        check_read_buf(buf, len)?;
        g.check_aligned(IoOp::Read, zone, offset_bytes, len as u64)?;
        g.check_read_end(zone, offset_bytes, len as u64)
    }

    async fn check_write(&self, zone: u32, offset_bytes: u64, len: u64) -> Result<()> {
        let g = self.geo();
        g.check_zone(zone)?;
        g.check_aligned(IoOp::Write, zone, offset_bytes, len)?;
        // A write above the max transfer size goes out as several commands; one crossing
        // the capacity would then be applied in part. Refuse it whole here.
        if len > self.inner.max_xfer_bytes && offset_bytes + len > g.zone_capacity_bytes {
            // Refuse it as one command would be refused, in the device's order of checks.
            return Err(match self.zone_now(zone).await {
                Some(z) => capacity_crossing_refusal(
                    g,
                    zone,
                    z.state,
                    z.write_pointer_bytes,
                    offset_bytes,
                    len,
                ),
                None => g.capacity_error(IoOp::Write, zone, offset_bytes, len),
            });
        }
        Ok(())
    }

    fn check_append(&self, zone: u32, len: u64) -> Result<()> {
        let g = self.geo();
        g.check_zone(zone)?;
        g.check_append(zone, len)
    }

    /// A command without data (zone management, flush).
    async fn no_data_cmd(&self, what: &str, submit: &SubmitFn<'_>) -> Result<u32> {
        let core = self.core()?;
        let (r, _) = run_cmd(&core, None, std::ptr::null_mut(), what, submit).await;
        r.map(|(st, _)| st)
    }
}

/// Decodes the Report Zones data of one command asked from zone `first` for at most `n`
/// zones, with every check of [`zone::parse_report_zones`] (the device's bytes are not
/// trusted): a damaged report is [`DeviceError::Corrupt`] naming the device.
fn decode_report(
    name: &str,
    data: &[u8],
    layout: &zone::ReportLayout,
    first: u32,
    n: usize,
) -> Result<Vec<ZoneInfo>> {
    zone::parse_report_zones(data, 0, layout, first, n).map_err(|e| DeviceError::Corrupt {
        path: name.to_string(),
        detail: e.to_string(),
    })
}

/// The typed error for completion status `st` (the passthrough encoding, shared with the
/// `nvme:` backend's mapping), or an I/O error naming the status when it has no ZNS meaning.
fn typed(st: u32, what: &str, map: impl FnOnce(NvmeStatus) -> Option<DeviceError>) -> DeviceError {
    let s = NvmeStatus::from_result(st as i32);
    s.and_then(map).unwrap_or_else(|| {
        DeviceError::io(
            what.to_string(),
            std::io::Error::other(match s {
                Some(s) => s.to_string(),
                None => format!("NVMe status {st:#x}"),
            }),
        )
    })
}

impl ZonedDevice for SpdkDevice {
    fn geometry(&self) -> &Geometry {
        self.geo()
    }

    fn name(&self) -> &str {
        &self.inner.name
    }

    async fn report_zones(&self, first: u32, count: u32) -> Result<Vec<ZoneInfo>> {
        self.geo().check_zone(first)?;
        self.report_raw(first, count).await
    }

    async fn read(
        &self,
        zone: u32,
        offset_bytes: u64,
        len: usize,
        buf: DmaBuf,
    ) -> (Result<()>, DmaBuf) {
        if let Err(e) = self.check_read(zone, offset_bytes, len, &buf) {
            return (Err(e), buf);
        }
        let (r, buf) = self
            .data_cmd(IoOp::Read, zone, offset_bytes, len, buf, 0)
            .await;
        (r.map(|_| ()), buf)
    }

    async fn write(&self, zone: u32, offset_bytes: u64, buf: DmaBuf) -> (Result<()>, DmaBuf) {
        if let Err(e) = self.check_write(zone, offset_bytes, buf.len() as u64).await {
            return (Err(e), buf);
        }
        // Above the max transfer size, issue the pieces one after the other ourselves:
        // SPDK would submit its child commands all at once, and when the first is refused
        // (e.g. Too Many Active Zones) the later ones fail with Zone Invalid Write and the
        // parent reports one of those. Sequential pieces report the first refusal.
        let step = self.inner.max_xfer_bytes as usize;
        let mut buf = buf;
        let mut at = 0usize;
        while at < buf.len() {
            let n = step.min(buf.len() - at);
            let (r, b) = self
                .data_cmd(IoOp::Write, zone, offset_bytes + at as u64, n, buf, at)
                .await;
            buf = b;
            if let Err(e) = r {
                return (Err(e), buf);
            }
            at += n;
        }
        (Ok(()), buf)
    }

    async fn append(&self, zone: u32, buf: DmaBuf) -> (Result<u64>, DmaBuf) {
        if let Err(e) = self.check_append(zone, buf.len() as u64) {
            return (Err(e), buf);
        }
        let len = buf.len();
        let (r, buf) = self.data_cmd(IoOp::Append, zone, 0, len, buf, 0).await;
        let bs = self.geo().block_size_bytes;
        (r.map(|lba| (lba - self.slba(zone)) * bs), buf)
    }

    async fn zone_action(&self, action: ZoneAction, target: ZoneTarget) -> Result<()> {
        let (zone, all) = match target {
            ZoneTarget::One(z) => {
                self.geo().check_zone(z)?;
                (z, false)
            }
            ZoneTarget::All => (0, true),
        };
        let code = match action {
            ZoneAction::Open => ffi::ZM_OPEN,
            ZoneAction::Close => ffi::ZM_CLOSE,
            ZoneAction::Finish => ffi::ZM_FINISH,
            ZoneAction::Reset => ffi::ZM_RESET,
            ZoneAction::Offline => ffi::ZM_OFFLINE,
        };
        let slba = self.slba(zone);
        let st = self
            .no_data_cmd("zone management send", &|h, qp, _, arg| {
                // SAFETY: valid handles; no data buffer.
                unsafe {
                    ffi::ziob_spdk_zone_mgmt(h, qp, code, slba, c_int::from(all), on_complete, arg)
                }
            })
            .await?;
        if st != 0 {
            let now = if all { None } else { self.zone_now(zone).await };
            let what = format!("{}: {action} zone", self.inner.name);
            return Err(typed(st, &what, |s| {
                nvme_status::action_error(self.geo(), s, action, zone, now.map(|z| z.state))
            }));
        }
        Ok(())
    }

    async fn flush(&self) -> Result<()> {
        let st = self
            .no_data_cmd("flush", &|h, qp, _, arg| {
                // SAFETY: valid handles; no data buffer.
                unsafe { ffi::ziob_spdk_flush(h, qp, on_complete, arg) }
            })
            .await?;
        if st != 0 {
            return Err(typed(st, &format!("{}: flush", self.inner.name), |_| None));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::error::ErrorKind;
    use crate::model::state::ZoneState;
    use proptest::prelude::*;

    const BS: u64 = 4096;

    /// A report of `zones` (state code, capacity, write pointer offset) from zone `first`.
    fn report(layout: &zone::ReportLayout, first: u32, zones: &[(u8, u64, u64)]) -> Vec<u8> {
        let mut b = vec![0u8; zone::report_len_bytes(zones.len(), 0)];
        b[..8].copy_from_slice(&(zones.len() as u64).to_le_bytes());
        for (i, &(zs, cap, wp)) in zones.iter().enumerate() {
            let zslba = (u64::from(first) + i as u64) * layout.zone_size_blocks;
            let d = &mut b[64 * (i + 1)..64 * (i + 2)];
            d[0] = zone::ZONE_TYPE_SEQ_WRITE_REQUIRED;
            d[1] = zs << 4;
            d[8..16].copy_from_slice(&cap.to_le_bytes());
            d[16..24].copy_from_slice(&zslba.to_le_bytes());
            d[24..32].copy_from_slice(&(zslba + wp).to_le_bytes());
        }
        b
    }

    fn put(b: &mut [u8], entry: usize, at: usize, v: u64) {
        let o = 64 * (entry + 1) + at;
        b[o..o + 8].copy_from_slice(&v.to_le_bytes());
    }

    proptest! {
        /// Random well-formed reports decode to what they say; the same report with one
        /// defect a device must not produce (a write pointer outside the zone, a start that
        /// is not a zone start or not the next zone, a capacity above the zone size, a header
        /// that announces more zones than the buffer holds, or none) is refused as Corrupt.
        #[test]
        fn damaged_reports_are_refused(
            zone_count in 2u32..64,
            first_pick in any::<u32>(),
            zones in prop::collection::vec((0u8..4, 0u64..=512), 1..8),
            defect in 0usize..7,
            entry_pick in any::<usize>(),
            delta in 1u64..1000,
        ) {
            let layout = zone::ReportLayout {
                zone_size_blocks: 1024,
                zone_count,
                block_size_bytes: BS,
            };
            let first = first_pick % zone_count;
            let n = zones.len().min((zone_count - first) as usize);
            let cap = 512;
            // states: Empty, implicitly/explicitly opened, Closed (their write pointers are
            // defined); Full as the last kind
            let codes = [0x1u8, 0x2, 0x3, 0x4];
            let zones: Vec<(u8, u64, u64)> = zones[..n]
                .iter()
                .map(|&(k, wp)| {
                    let code = codes[k as usize];
                    (code, cap, if code == 0x1 { 0 } else { wp })
                })
                .collect();
            let good = report(&layout, first, &zones);
            let out = decode_report("spdk:test", &good, &layout, first, n).unwrap();
            prop_assert_eq!(out.len(), n);
            for (i, (z, &(_, _, wp))) in out.iter().zip(&zones).enumerate() {
                prop_assert_eq!(z.index, first + i as u32);
                prop_assert_eq!(z.start_bytes, u64::from(z.index) * 1024 * BS);
                prop_assert_eq!(z.capacity_bytes, cap * BS);
                prop_assert_eq!(z.write_pointer_bytes, wp * BS);
            }

            let e = entry_pick % n;
            let zslba = u64::from(first + e as u32) * 1024;
            let mut bad = good.clone();
            match defect {
                // an open/closed zone's write pointer past its capacity
                0 => {
                    bad[64 * (e + 1) + 1] = 0x2 << 4;
                    put(&mut bad, e, 24, zslba + cap + delta);
                }
                // ... or before its start
                1 => {
                    bad[64 * (e + 1) + 1] = 0x4 << 4;
                    put(&mut bad, e, 24, zslba.wrapping_sub(delta));
                }
                // a start LBA inside a zone
                2 => put(&mut bad, e, 16, zslba + delta % 1023 + 1),
                // a whole zone, but not the one asked for
                3 => put(&mut bad, e, 16, u64::from((first + e as u32 + 1) % zone_count) * 1024),
                // a capacity above the zone size
                4 => put(&mut bad, e, 8, 1024 + delta),
                // a header announcing more zones than the buffer holds
                5 => bad[..8].copy_from_slice(&(n as u64 + delta).to_le_bytes()),
                // no zone at all
                _ => bad[..8].copy_from_slice(&0u64.to_le_bytes()),
            }
            let r = decode_report("spdk:test", &bad, &layout, first, n);
            prop_assert!(r.is_err(), "defect {defect} at entry {e} accepted: {r:?}");
            let err = r.unwrap_err();
            prop_assert_eq!(err.kind(), ErrorKind::Corrupt, "{}", err);
            prop_assert!(err.to_string().contains("spdk:test"), "{}", err);
        }
    }

    #[test]
    fn full_zone_write_pointer_is_its_capacity() {
        let layout = zone::ReportLayout {
            zone_size_blocks: 1024,
            zone_count: 4,
            block_size_bytes: BS,
        };
        // SPDK/QEMU may report a Full zone's write pointer as all ones
        let mut b = report(&layout, 2, &[(0xE, 600, 0)]);
        put(&mut b, 0, 24, u64::MAX);
        let z = decode_report("spdk:test", &b, &layout, 2, 1).unwrap();
        assert_eq!(
            (z[0].index, z[0].state, z[0].write_pointer_bytes),
            (2, ZoneState::Full, 600 * BS)
        );
    }
}
