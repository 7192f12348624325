//! The [`ZonedDevice`] trait every backend implements.

use std::mem::MaybeUninit;

use ziob_runtime::DmaBuf;

use crate::model::error::{DeviceError, Result};
use crate::model::geometry::Geometry;
use crate::model::zone::{ZoneAction, ZoneInfo, ZoneTarget};

/// A zoned block device with NVMe ZNS semantics.
///
/// Handles are cheap to clone and may be sent to every core; each call runs its I/O on the
/// core that awaits it (the futures are not `Send`). Zones are addressed by index (0-based);
/// offsets are bytes from the zone start and, like lengths, multiples of the block size
/// (reads: of [`ZonedDevice::read_granularity_bytes`]).
/// Callers issue one op at a time per zone (zones are owned by one core); a backend never
/// corrupts its state if that contract is broken, but the data order is then undefined.
///
/// **Cancel safety** (the emulating backends `mem`, `emu` and `nil`; the real-device backends
/// document their own). Any future may be dropped at any await without corrupting the
/// device's state or leaving a zone stuck. A `write` or `append` dropped after its first poll
/// may or may not be carried out (the caller learns neither whether nor where), but never leaves a
/// write pointer over data that was not written: `emu` carries it out in the background (it
/// had its place from the first poll), `mem` and `nil` complete at the first poll. A dropped
/// `zone_action` or `flush` may or may not have taken effect; reads and reports change
/// nothing.
#[expect(
    async_fn_in_trait,
    reason = "device futures are deliberately !Send: they run on the calling core"
)]
pub trait ZonedDevice: Clone + Send + Sync + 'static {
    /// The device's geometry and limits.
    fn geometry(&self) -> &Geometry;

    /// The spec the device was opened with, e.g. `emu:/tmp/dev.zns`.
    fn name(&self) -> &str;

    /// Report Zones: up to `count` zones from zone `first` (fewer at the device end; an
    /// out-of-range `first` is an error).
    async fn report_zones(&self, first: u32, count: u32) -> Result<Vec<ZoneInfo>>;

    /// Reads `len` bytes at `offset_bytes` of `zone` into `buf` (whose capacity must be at
    /// least `len`); on success `buf.len() == len`. The range must end within the zone size;
    /// bytes at or past the data written since the last reset (the write pointer, or where a
    /// finished zone's data ended) read as zeros.
    async fn read(
        &self,
        zone: u32,
        offset_bytes: u64,
        len: usize,
        buf: DmaBuf,
    ) -> (Result<()>, DmaBuf);

    /// [`read`](Self::read) done at once on the calling thread, for a device that can read
    /// without waiting: a RAM device, or one reading through the host's page cache when the
    /// bytes are cached there (`emu` with `direct=0`). The same ranges and bytes as `read`.
    /// `None` when it cannot without waiting — then use `read`, which also reports errors
    /// (a `read_now` that fails may answer `None` too). The default: always `None`.
    fn read_now(&self, zone: u32, offset_bytes: u64, len: usize) -> Option<Result<Vec<u8>>> {
        let _ = (zone, offset_bytes, len);
        None
    }

    /// [`read_now`](Self::read_now) into the caller's memory: `out.len()` bytes at
    /// `offset_bytes`, given back as `out` initialised. `None` as for `read_now` (nothing
    /// promised of `out` then). A device that reads at once overrides it to skip the buffer
    /// `read_now` returns; the default copies from that buffer.
    fn read_now_into<'a>(
        &self,
        zone: u32,
        offset_bytes: u64,
        out: &'a mut [MaybeUninit<u8>],
    ) -> Option<Result<&'a mut [u8]>> {
        match self.read_now(zone, offset_bytes, out.len())? {
            Ok(data) => Some(Ok(out.write_copy_of_slice(&data))),
            Err(e) => Some(Err(e)),
        }
    }

    /// Writes all of `buf` at `offset_bytes` of `zone`, which must be the write pointer.
    /// A write that does not fit below the zone capacity is refused whole.
    async fn write(&self, zone: u32, offset_bytes: u64, buf: DmaBuf) -> (Result<()>, DmaBuf);

    /// Zone Append: writes all of `buf` at the write pointer of `zone` and returns the offset
    /// (bytes from the zone start) where it landed.
    async fn append(&self, zone: u32, buf: DmaBuf) -> (Result<u64>, DmaBuf);

    /// Zone Management Send: open, close, finish, reset or offline one zone or all.
    /// Completes only once the new state is durable. On `emu` a reset or finish first waits
    /// until the zone has no write in flight; writes issued to the zone meanwhile wait for it
    /// and are then accepted in issue order.
    async fn zone_action(&self, action: ZoneAction, target: ZoneTarget) -> Result<()>;

    /// Makes every write completed before the call durable (flush of the volatile cache).
    async fn flush(&self) -> Result<()>;

    /// [`write`](Self::write) whose bytes are durable when it completes. It promises
    /// nothing about other writes, not even earlier ones of the same zone: a caller that
    /// needs a zone's data durable from its start must know the data before `offset_bytes`
    /// durable already (by an earlier durable write or flush). The default writes, then
    /// [`flush`](Self::flush)es (which does make everything durable).
    async fn write_durable(
        &self,
        zone: u32,
        offset_bytes: u64,
        buf: DmaBuf,
    ) -> (Result<()>, DmaBuf) {
        let (res, buf) = self.write(zone, offset_bytes, buf).await;
        match res {
            Ok(()) => (self.flush().await, buf),
            Err(e) => (Err(e), buf),
        }
    }

    /// Whether [`write_durable`](Self::write_durable) is one device command (NVMe Force
    /// Unit Access, `RWF_DSYNC` on a block device), so that a durable write costs about what
    /// a write does and no cache flush. The default: false (the write-then-flush default).
    fn has_durable_writes(&self) -> bool {
        false
    }

    /// How many writes of one zone may be in flight at once when they are issued in
    /// write-pointer order (1 = one at a time, always correct). A device may answer more only
    /// if it accepts each write at the moment it is issued, in issue order, whatever order the
    /// writes complete in. "Issued" is the first poll of the future [`ZonedDevice::write`]
    /// returns: the ZIOB buffer polls each write-back once before issuing the next, and
    /// pipelines them up to this depth. A wrapper that awaits something before forwarding a
    /// write must answer 1.
    fn ordered_writes_in_flight(&self) -> u32 {
        1
    }

    /// Offsets and lengths of [`read`](Self::read) must be multiples of this many bytes:
    /// the block size (the default), or 1 for a device that reads through the host's page
    /// cache (`emu` with `direct=0`), where reading just the bytes wanted copies no more.
    fn read_granularity_bytes(&self) -> u64 {
        self.geometry().block_size_bytes
    }

    /// Report Zones for the whole device.
    async fn report_all(&self) -> Result<Vec<ZoneInfo>> {
        self.report_zones(0, u32::MAX).await
    }
}

/// Checks that a read buffer can hold `len` bytes.
pub(crate) fn check_read_buf(buf: &DmaBuf, len: usize) -> Result<()> {
    if buf.capacity() < len {
        return Err(DeviceError::InvalidArgument(format!(
            "read of {len} bytes into a buffer of capacity {}",
            buf.capacity()
        )));
    }
    Ok(())
}

/// Fills `buf` with `len` bytes: `data` (at most `len` bytes) followed by zeros.
pub(crate) fn fill_read_buf(buf: &mut DmaBuf, data: &[u8], len: usize) {
    debug_assert!(data.len() <= len);
    buf.clear();
    buf.extend_from_slice(data);
    buf.resize(len, 0);
}
