//! Appends and writes: admission against the zone, memory reservation, copy into chunks,
//! large writes streamed in pieces, and the zero padding of a partial block (flush, finish).

use std::rc::Rc;
use std::time::Instant;

use ziob_backends::{DeviceError, IoOp, ZoneState, ZonedDevice};
use ziob_runtime::DmaBuf;

use super::guards::Reservation;
use super::zone::{ZoneBuf, ZoneOp};
use super::{run_to_completion, Shard};
use crate::error::Result;
use crate::logical;
use crate::metrics::OpKind;
use crate::metrics::OpTimer;

/// The data of an append or write: a DMA buffer (handed back with the result) or bytes (the
/// buffered path copies them straight into the zone's chunks, with no buffer per record).
pub(crate) trait Payload: std::ops::Deref<Target = [u8]> + Sized + 'static {
    /// A DMA buffer holding the data, for a pass-through write (the device needs one).
    fn into_dma(self) -> DmaBuf;
    /// What to hand back after a pass-through write of `buf`.
    fn back(buf: DmaBuf) -> Self;
    /// What to hand back when the data went with a task that ended without an answer.
    fn lost() -> Self;
}

impl Payload for DmaBuf {
    fn into_dma(self) -> DmaBuf {
        self
    }
    fn back(buf: DmaBuf) -> Self {
        buf
    }
    fn lost() -> Self {
        DmaBuf::with_capacity(0)
    }
}

impl Payload for bytes::Bytes {
    fn into_dma(self) -> DmaBuf {
        DmaBuf::from_slice(&self)
    }
    fn back(_: DmaBuf) -> Self {
        bytes::Bytes::new()
    }
    fn lost() -> Self {
        bytes::Bytes::new()
    }
}

/// What a write needs, decided by [`Shard::admit`].
struct Admission {
    /// Grow the tail chunk to this capacity first.
    grow_to: Option<u64>,
    /// Capacities of the new chunks after it.
    caps: Vec<u64>,
    /// Bytes of budget to charge: the growth plus the new chunks.
    need: u64,
}

impl<D: ZonedDevice> Shard<D> {
    /// Largest piece a write is taken in: half the budget in whole write-back units, so a
    /// write larger than the budget streams through it instead of failing.
    pub(super) fn max_piece_bytes(&self) -> u64 {
        (self.budget_bytes / 2 / self.unit_bytes).max(1) * self.unit_bytes
    }

    /// Appends `data` to `zone`; returns the offset it was given (bytes from the zone start).
    /// The buffer comes back with the result.
    ///
    /// Cancel safety: a write taken in one piece is committed in one step with no await
    /// after it, so a dropped call appended all or nothing. A streamed write (larger than
    /// [`Shard::max_piece_bytes`]) runs as its own task and completes even if dropped.
    pub(crate) async fn append<B: Payload>(
        self: &Rc<Self>,
        zone: u32,
        data: B,
    ) -> (Result<u64>, B) {
        let _timer = OpTimer::start(&self.stats, OpKind::Append);
        if let Err(e) = self.check_zone(zone) {
            return (Err(e), data);
        }
        if !self.buffered {
            let len = data.len() as u64;
            let (res, data) = self.device.append(zone, data.into_dma()).await;
            if res.is_ok() {
                self.count_pass_through(len, IoOp::Append);
            }
            return (res.map_err(Into::into), B::back(data));
        }
        self.write_whole(zone, None, data, IoOp::Append).await
    }

    /// Writes `data` at `offset_bytes` of `zone`, which must be the logical write pointer.
    /// The buffer comes back with the result. Cancel safety as [`Shard::append`].
    pub(crate) async fn write_at<B: Payload>(
        self: &Rc<Self>,
        zone: u32,
        offset: u64,
        data: B,
    ) -> (Result<()>, B) {
        let _timer = OpTimer::start(&self.stats, OpKind::WriteAt);
        if let Err(e) = self.check_zone(zone) {
            return (Err(e), data);
        }
        if !self.buffered {
            let len = data.len() as u64;
            let (res, data) = self.device.write(zone, offset, data.into_dma()).await;
            if res.is_ok() {
                self.count_pass_through(len, IoOp::Write);
            }
            return (res.map_err(Into::into), B::back(data));
        }
        let (res, data) = self
            .write_whole(zone, Some(offset), data, IoOp::Write)
            .await;
        (res.map(|_| ()), data)
    }

    /// Counts a pass-through write of `len` bytes as the buffered path counts what it
    /// accepts (`bytes_written`, and `append_bytes` for an append).
    fn count_pass_through(&self, len: u64, op: IoOp) {
        let mut st = self.stats.borrow_mut();
        st.s.bytes_written += len;
        if op == IoOp::Append {
            st.s.append_bytes += len;
        }
    }

    async fn write_whole<B: Payload>(
        self: &Rc<Self>,
        zone: u32,
        offset: Option<u64>,
        data: B,
        op: IoOp,
    ) -> (Result<u64>, B) {
        if data.len() as u64 > self.max_piece_bytes() {
            let this = self.clone();
            let call = self.hold_call();
            let done = run_to_completion(async move {
                let res = this.write_streamed(zone, offset, &data, op).await;
                drop(call);
                (res, data)
            })
            .await;
            // Without its task's answer the data buffer is gone with the task.
            return done.unwrap_or_else(|e| (Err(e), B::lost()));
        }
        let res = self.write_piece(zone, offset, &data, op, false).await;
        (res, data)
    }

    /// Checks a write against the zone as it is now; returns the memory it needs.
    /// Never waits for a write-back: the tail chunk takes appends while its first blocks are
    /// being written (the device writes a read-only view of them).
    ///
    /// Chunks fit the data: a zone's first chunk is what the write needs in whole blocks
    /// (one block for a tiny append); a tail chunk smaller than the write-back unit that
    /// cannot take the write grows (doubling, to at most the unit: its data is copied into
    /// the new memory); further chunks are whole units (the last one only what is left).
    fn admit(&self, zone: u32, offset: Option<u64>, len: u64, op: IoOp) -> Result<Admission> {
        let zones = self.zones.borrow();
        let z = &zones[self.local(zone)];
        let cap = self.geometry.zone_capacity_bytes;
        let bs = self.bs();
        if let Some(e) = &z.error {
            return Err(e.clone());
        }
        ziob_backends::check_write_target(&self.geometry, op, zone, z.state, z.wp, offset, len)?;
        if len == 0 {
            return Err(
                DeviceError::InvalidArgument(format!("{op} of 0 bytes to zone {zone}")).into(),
            );
        }
        let mut room = z.tail_room();
        let mut grow_to = None;
        if let Some(t) = z.chunks.back() {
            if room < len && t.end() == z.wp && t.cap < self.unit_bytes {
                let want = (t.filled + len).div_ceil(bs) * bs;
                let new_cap = want.max(2 * t.cap).min(self.unit_bytes).min(cap - t.start);
                if new_cap > t.cap {
                    grow_to = Some(new_cap);
                    room = new_cap - t.filled;
                }
            }
        }
        let mut rest = len.saturating_sub(room);
        let mut pos = z.wp + room.min(len);
        let mut caps = Vec::new();
        while rest > 0 {
            let c = (rest.div_ceil(bs) * bs).min(self.unit_bytes).min(cap - pos);
            caps.push(c);
            rest -= c.min(rest);
            pos += c;
        }
        let tail_cap = z.chunks.back().map_or(0, |t| t.cap);
        let need = grow_to.map_or(0, |g| g - tail_cap) + caps.iter().sum::<u64>();
        Ok(Admission {
            grow_to,
            caps,
            need,
        })
    }

    /// Memory for a chunk of `cap` bytes: a whole unit takes a registered slot if there is
    /// one (slots are unit-sized), anything smaller comes from the pool.
    fn chunk_memory(&self, cap: u64) -> DmaBuf {
        if cap == self.unit_bytes {
            DmaBuf::fixed(cap as usize)
        } else {
            DmaBuf::with_capacity(cap as usize)
        }
    }

    /// A write larger than [`Shard::max_piece_bytes`]: checked whole first (refused whole if
    /// it cannot fit), then taken in pieces while the zone is held ([`ZoneOp::Streaming`]:
    /// other writers, flushes, finishes and resets wait), so it stays contiguous; memory is
    /// freed by write-back between pieces. If a piece fails (a write-back error, or the
    /// buffer's own limit) the pieces before it stay written.
    async fn write_streamed(
        self: &Rc<Self>,
        zone: u32,
        offset: Option<u64>,
        data: &[u8],
        op: IoOp,
    ) -> Result<u64> {
        let i = self.local(zone);
        self.wait_idle(i).await;
        // Checks state, position and capacity for the whole write (memory comes per piece).
        self.admit(zone, offset, data.len() as u64, op)?;
        let _hold = self.hold_zone(i, ZoneOp::Streaming);
        let start = self.zones.borrow()[i].wp;
        for piece in data.chunks(self.max_piece_bytes() as usize) {
            let at = self.zones.borrow()[i].wp;
            self.write_piece(zone, Some(at), piece, IoOp::Write, true)
                .await?;
            if op == IoOp::Append {
                self.stats.borrow_mut().s.append_bytes += piece.len() as u64;
            }
        }
        Ok(start)
    }

    /// One write of at most [`Shard::max_piece_bytes`]. `holder`: the caller streams a large
    /// write into this zone and already holds it.
    async fn write_piece(
        self: &Rc<Self>,
        zone: u32,
        offset: Option<u64>,
        data: &[u8],
        op: IoOp,
        holder: bool,
    ) -> Result<u64> {
        let i = self.local(zone);
        let len = data.len() as u64;
        let mut reserved = Reservation::charged(self, 0);
        loop {
            if !holder {
                self.wait_idle(i).await;
            }
            let adm = self.admit(zone, offset, len, op)?;
            let need = adm.need;
            if need > reserved.bytes() {
                reserved.merge(self.acquire_memory(zone, need - reserved.bytes()).await?);
                continue; // we may have waited: check the zone again
            }
            // Nothing awaited since `admit`: commit.
            let bufs = adm
                .caps
                .iter()
                .map(|&c| (c, self.chunk_memory(c)))
                .collect();
            let grown = adm.grow_to.map(|c| (c, self.chunk_memory(c)));
            reserved.commit(need);
            let seq = self.seq.get();
            self.seq.set(seq + 1);
            let mut zones = self.zones.borrow_mut();
            let z = &mut zones[i];
            let at = z.wp;
            if let Some((cap, buf)) = grown {
                z.grow_tail(cap, buf);
            }
            z.copy_in(data, bufs);
            let full = z.wp == self.geometry.zone_capacity_bytes;
            z.state = logical::after_write(z.state, full);
            z.last_write_seq = seq;
            z.last_write_at = Some(Instant::now());
            if full {
                z.target = z.wp;
            }
            drop(zones);
            let mut st = self.stats.borrow_mut();
            st.s.bytes_written += len;
            if op == IoOp::Append {
                st.s.append_bytes += len;
            }
            drop(st);
            self.kick(zone);
            return Ok(at);
        }
    }

    /// Waits until zone `i` can be padded now: no operation holds it (if `need_idle`).
    /// Padding never waits for a write-back (it writes past the issued range). Whoever calls
    /// it holds the zone or checks it is idle in the same step, then pads with
    /// [`Shard::pad_now`] without awaiting in between.
    pub(super) async fn wait_paddable(&self, i: usize, need_idle: bool) {
        if need_idle {
            self.wait_idle(i).await;
        }
    }

    /// Pads the zone's partial last block with zeros, now: the write pointer moves to the
    /// next block boundary. Decided and applied in one step on the zone as it is (callers
    /// awaited [`Shard::wait_paddable`] just before), so no write can land in between.
    pub(super) fn pad_now(&self, z: &mut ZoneBuf) {
        let bs = self.bs();
        if z.wp.is_multiple_of(bs) || z.state == ZoneState::Full {
            return;
        }
        let pad = bs - z.wp % bs;
        // A partial block lives in the tail chunk, whose capacity is a block multiple from a
        // block boundary; write-backs only ever hold whole blocks below it.
        assert!(z.tail_room() >= pad, "padding fits the tail chunk");
        z.copy_in(&vec![0u8; pad as usize], Vec::new());
        let full = z.wp == self.geometry.zone_capacity_bytes;
        z.state = logical::after_write(z.state, full);
    }
}
