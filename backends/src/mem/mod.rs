//! `mem`: zones in RAM, for tests, with deterministic fault injection.
//!
//! Everything happens under the device's one lock (the modelled controller): an op checks
//! the zone table, copies its data and commits in one step. The device has a volatile write
//! cache: [`MemDevice::crash`] loses every write not covered by a flush or by a later zone
//! management command (which, as on emu, makes the whole device durable before completing;
//! [`MemDevice::set_zone_actions_flush`] makes it persist only its zones' state).
//! Durable writes ([`ZonedDevice::write_durable`]) survive it only where the zone's data
//! before them was durable already.

use std::sync::{Arc, Mutex, MutexGuard};

use ziob_runtime::DmaBuf;

use crate::device::{check_read_buf, fill_read_buf, ZonedDevice};
use crate::model::error::{DeviceError, Result};
use crate::model::geometry::Geometry;
use crate::model::state::{PersistedZone, ZoneAction, ZoneInfo, ZoneTable, ZoneTarget};
use crate::model::zone::ZoneState;

/// A fault to inject into a [`MemDevice`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The op with this index (0-based, counting reads, writes, appends, zone actions and
    /// flushes since the device was made) fails with EIO and has no effect.
    FailOp {
        /// Index of the op to fail.
        op_index: u64,
    },
    /// The cache flush with this index (0-based, counting the flushes since the device was
    /// made that a [`Fault::FailOp`] did not fail) fails with EIO and has no effect: for
    /// searches that aim at the moment between a write and the flush meant to make it
    /// durable.
    FailFlush {
        /// Index of the flush to fail.
        flush_index: u64,
    },
    /// The zone becomes Read Only now (device-initiated).
    ZoneReadOnly {
        /// Zone index.
        zone: u32,
    },
    /// The zone becomes Offline now (device-initiated).
    ZoneOffline {
        /// Zone index.
        zone: u32,
    },
}

struct MemState {
    table: ZoneTable,
    /// Per zone, the bytes written since the last reset (length = data end).
    data: Vec<Vec<u8>>,
    /// The zones as of the last flush or zone management command.
    durable: Vec<PersistedZone>,
    ops: u64,
    failing_ops: Vec<u64>,
    /// Flushes so far.
    flushes: u64,
    /// Zone management commands make the whole device durable (else only their zones).
    actions_flush: bool,
    failing_flushes: Vec<u64>,
}

struct MemInner {
    name: String,
    geometry: Geometry,
    state: Mutex<MemState>,
}

/// Whether `index` is among the `planned` fault indexes; if so it is taken out (it fires once).
fn take_planned(planned: &mut Vec<u64>, index: u64) -> bool {
    match planned.iter().position(|&i| i == index) {
        Some(pos) => {
            planned.swap_remove(pos);
            true
        }
        None => false,
    }
}

/// Whether zones persisted at different times make a table the device can come back to:
/// valid, and with no more active zones (open ones come back Closed) than it allows.
fn active_fits(geometry: &Geometry, zones: &[PersistedZone]) -> bool {
    let active = zones.iter().filter(|z| z.state.is_active()).count();
    ZoneTable::restore(geometry, zones).is_ok()
        && geometry
            .max_active_zones
            .is_none_or(|max| active <= max as usize)
}

/// A RAM-backed zoned device. Clones share the device.
#[derive(Clone)]
pub struct MemDevice {
    inner: Arc<MemInner>,
}

impl MemDevice {
    /// A device of `geometry` with every zone Empty; `name` is the spec it reports.
    pub fn new(name: impl Into<String>, geometry: &Geometry) -> Result<MemDevice> {
        geometry.validate()?;
        let table = ZoneTable::new(geometry);
        let durable = table.snapshot();
        Ok(MemDevice {
            inner: Arc::new(MemInner {
                name: name.into(),
                geometry: *geometry,
                state: Mutex::new(MemState {
                    table,
                    data: vec![Vec::new(); geometry.zone_count as usize],
                    durable,
                    ops: 0,
                    failing_ops: Vec::new(),
                    flushes: 0,
                    actions_flush: true,
                    failing_flushes: Vec::new(),
                }),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, MemState> {
        // A panic while holding the lock leaves a consistent table (every change is checked
        // before it is made), so a poisoned lock is still usable.
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Injects a fault.
    pub fn inject(&self, fault: Fault) {
        let mut s = self.lock();
        match fault {
            Fault::FailOp { op_index } => s.failing_ops.push(op_index),
            Fault::FailFlush { flush_index } => s.failing_flushes.push(flush_index),
            Fault::ZoneReadOnly { zone } => s.table.make_read_only(zone),
            Fault::ZoneOffline { zone } => s.table.make_offline(zone),
        }
    }

    /// Removes every pending [`Fault::FailOp`] and [`Fault::FailFlush`] that has not fired
    /// yet (a simulation clears them before it checks what survived a power cut).
    pub fn clear_faults(&self) {
        let mut s = self.lock();
        s.failing_ops.clear();
        s.failing_flushes.clear();
    }

    /// Ops counted so far (the index the next op gets).
    pub fn op_count(&self) -> u64 {
        self.lock().ops
    }

    /// Whether a zone management command makes the whole device durable before it completes
    /// (`true`, the default, as `emu` does), or only its own zones' new state (`false`: a
    /// device whose zone commands leave the cache alone, so a finish or close may outlive
    /// the writes before it in a power loss, whose zone then reads zeros there).
    pub fn set_zone_actions_flush(&self, flush: bool) {
        self.lock().actions_flush = flush;
    }

    /// Cache flushes so far (the index the next flush gets).
    pub fn flush_count(&self) -> u64 {
        self.lock().flushes
    }

    /// Simulated power loss: every zone goes back to its state at the last flush or zone
    /// management command, or to the end of the last durable write that continued it
    /// (opened zones come back Closed), and data past that point is lost.
    pub fn crash(&self) {
        let mut s = self.lock();
        let durable = s.durable.clone();
        s.table = ZoneTable::restore(&self.inner.geometry, &durable)
            .expect("a snapshot of a valid table is valid");
        for (data, z) in s.data.iter_mut().zip(&durable) {
            data.truncate(z.written_bytes as usize);
        }
    }

    /// Simulated power loss of a cache that had written some of its data to the medium: each
    /// zone keeps its durable data and then the first `keep(zone, durable, written)` bytes
    /// from its start — clamped to `durable..=written` and rounded down to whole blocks —
    /// of what was written to it since (a zone's writes land in order, so it keeps a
    /// prefix); the rest is lost as in [`crash`](MemDevice::crash). Zones are torn
    /// independently: a write kept in one zone says nothing of an earlier write to another.
    pub fn crash_keeping(&self, mut keep: impl FnMut(u32, u64, u64) -> u64) {
        let g = self.inner.geometry;
        {
            let mut s = self.lock();
            let now = s.table.snapshot();
            let mut kept = s.durable.clone();
            for (z, (d, n)) in kept.iter_mut().zip(&now).enumerate() {
                // Zone actions make the device durable: since then, only writes. A zone the
                // device took read-only or offline since is left to `crash`'s rule.
                if n.written_bytes <= d.written_bytes
                    || matches!(n.state, ZoneState::ReadOnly | ZoneState::Offline)
                {
                    continue;
                }
                let k = keep(z as u32, d.written_bytes, n.written_bytes)
                    .clamp(d.written_bytes, n.written_bytes)
                    / g.block_size_bytes
                    * g.block_size_bytes;
                if k > d.written_bytes {
                    d.written_bytes = k;
                    // A zone finished durably stays Full (its data past `k` reads zeros).
                    d.state = if k == g.zone_capacity_bytes || d.state == ZoneState::Full {
                        ZoneState::Full
                    } else {
                        ZoneState::Closed
                    };
                }
            }
            // Zones now Full but kept in part come back Closed, so active again: more than
            // the device allows, and they are kept whole instead (as `write_now` does).
            if !active_fits(&g, &kept) {
                for (d, n) in kept.iter_mut().zip(&now) {
                    if n.state == ZoneState::Full && d.state == ZoneState::Closed {
                        *d = *n;
                    }
                }
            }
            s.durable = kept;
        }
        self.crash();
    }

    /// Counts an op; fails it if a [`Fault::FailOp`] targets it.
    fn count_op(&self, s: &mut MemState, what: &str) -> Result<()> {
        let index = s.ops;
        s.ops += 1;
        if take_planned(&mut s.failing_ops, index) {
            return Err(self.injected(&format!("{what} (injected fault at op {index})")));
        }
        Ok(())
    }

    /// The EIO error of an injected fault, `what` naming it.
    fn injected(&self, what: &str) -> DeviceError {
        DeviceError::io(
            format!("{}: {what}", self.inner.name),
            std::io::Error::from_raw_os_error(libc::EIO),
        )
    }

    /// A write (`offset` = `Some`) or append; with `durable`, a durable write (see
    /// [`ZonedDevice::write_durable`] below).
    fn write_now(&self, zone: u32, offset: Option<u64>, data: &[u8], durable: bool) -> Result<u64> {
        let mut s = self.lock();
        let what = if offset.is_some() { "write" } else { "append" };
        self.count_op(&mut s, what)?;
        let len = data.len() as u64;
        let r = match offset {
            Some(off) => s.table.begin_write(zone, off, len)?,
            None => s.table.begin_append(zone, len)?,
        };
        let zone_data = &mut s.data[zone as usize];
        zone_data.truncate(r.offset_bytes as usize);
        zone_data.extend_from_slice(data);
        s.table.complete(r, true);
        let z = zone as usize;
        if durable && s.durable[z].written_bytes == r.offset_bytes {
            let mut durable = s.durable.clone();
            durable[z] = s.table.snapshot_zone(zone);
            // Zones persisted at different times may together hold more active zones than
            // the device allows (another zone left the active set by volatile writes since):
            // then the whole device is taken as durable, as after a flush.
            s.durable = if active_fits(&self.inner.geometry, &durable) {
                durable
            } else {
                s.table.snapshot()
            };
        }
        Ok(r.offset_bytes)
    }
}

impl MemDevice {
    /// A read of `[offset_bytes, offset_bytes + len)` of `zone` (counted, checked): `fill` gets
    /// the bytes that hold data (those past them read as zeros).
    fn read_with<T>(
        &self,
        zone: u32,
        offset_bytes: u64,
        len: usize,
        fill: impl FnOnce(&[u8]) -> T,
    ) -> Result<T> {
        let mut s = self.lock();
        self.count_op(&mut s, "read")?;
        let data_end = s.table.check_read(zone, offset_bytes, len as u64)?;
        let data = &s.data[zone as usize];
        debug_assert_eq!(data.len() as u64, data_end);
        let start = (offset_bytes as usize).min(data.len());
        let end = (offset_bytes as usize + len).min(data.len());
        Ok(fill(&data[start..end]))
    }
}

impl ZonedDevice for MemDevice {
    fn geometry(&self) -> &Geometry {
        &self.inner.geometry
    }

    fn name(&self) -> &str {
        &self.inner.name
    }

    async fn report_zones(&self, first: u32, count: u32) -> Result<Vec<ZoneInfo>> {
        self.lock().table.report(first, count)
    }

    async fn read(
        &self,
        zone: u32,
        offset_bytes: u64,
        len: usize,
        mut buf: DmaBuf,
    ) -> (Result<()>, DmaBuf) {
        let res = check_read_buf(&buf, len).and_then(|()| {
            self.read_with(zone, offset_bytes, len, |data| {
                fill_read_buf(&mut buf, data, len)
            })
        });
        (res, buf)
    }

    /// RAM reads never wait.
    fn read_now(&self, zone: u32, offset_bytes: u64, len: usize) -> Option<Result<Vec<u8>>> {
        Some(self.read_with(zone, offset_bytes, len, |data| {
            let mut out = Vec::with_capacity(len);
            out.extend_from_slice(data);
            out.resize(len, 0);
            out
        }))
    }

    async fn write(&self, zone: u32, offset_bytes: u64, buf: DmaBuf) -> (Result<()>, DmaBuf) {
        (
            self.write_now(zone, Some(offset_bytes), &buf, false)
                .map(|_| ()),
            buf,
        )
    }

    async fn append(&self, zone: u32, buf: DmaBuf) -> (Result<u64>, DmaBuf) {
        (self.write_now(zone, None, &buf, false), buf)
    }

    async fn zone_action(&self, action: ZoneAction, target: ZoneTarget) -> Result<()> {
        let mut s = self.lock();
        self.count_op(&mut s, "zone action")?;
        let before = (!s.actions_flush).then(|| s.table.snapshot());
        s.table.apply(action, target)?;
        let MemState { table, data, .. } = &mut *s;
        for (zone_data, z) in data.iter_mut().zip(table.snapshot()) {
            zone_data.truncate(z.written_bytes as usize);
        }
        match before {
            None => s.durable = s.table.snapshot(),
            Some(before) => {
                // Only the zones the command changed: their new state, with no more data
                // than was durable already (a finish kept over writes its zone's cache
                // lost); an open or closed zone with nothing durable is Empty.
                let now = s.table.snapshot();
                let mut durable = s.durable.clone();
                for ((d, n), b) in durable.iter_mut().zip(&now).zip(&before) {
                    if n == b {
                        continue;
                    }
                    let written = d.written_bytes.min(n.written_bytes);
                    let state = match n.state {
                        st if st.is_active() && written == 0 => ZoneState::Empty,
                        st if st.is_active() => ZoneState::Closed,
                        st => st,
                    };
                    *d = PersistedZone {
                        state,
                        written_bytes: written,
                    };
                }
                s.durable = if active_fits(&self.inner.geometry, &durable) {
                    durable
                } else {
                    now
                };
            }
        }
        Ok(())
    }

    async fn flush(&self) -> Result<()> {
        let mut s = self.lock();
        self.count_op(&mut s, "flush")?;
        let index = s.flushes;
        s.flushes += 1;
        if take_planned(&mut s.failing_flushes, index) {
            return Err(self.injected(&format!("flush (injected fault at flush {index})")));
        }
        s.durable = s.table.snapshot();
        Ok(())
    }

    /// One op, like a write with Force Unit Access on a drive that keeps nothing else: the
    /// write survives [`MemDevice::crash`] only if the zone's data before it was durable
    /// already (else, pessimistically, nothing of it does — so a caller that counts on a
    /// durable write over a volatile prefix loses data in tests).
    async fn write_durable(
        &self,
        zone: u32,
        offset_bytes: u64,
        buf: DmaBuf,
    ) -> (Result<()>, DmaBuf) {
        let res = self
            .write_now(zone, Some(offset_bytes), &buf, true)
            .map(|_| ());
        (res, buf)
    }

    fn has_durable_writes(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests;
