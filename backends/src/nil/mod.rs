//! `nil`: completes every op at once and stores nothing, to measure ZIOB's own cost per op.
//!
//! It keeps the same [`ZoneTable`] as the other backends (states, write pointers, limits and
//! every error), so code above it behaves as on a real device. Writes never copy or keep data;
//! a read checks its range, then sets the buffer's length to the requested length, leaving
//! the buffer's existing bytes untouched (bytes past its previous length become zeros so no
//! uninitialised memory is exposed). Flush does nothing; nothing survives the process.

use std::sync::{Arc, Mutex, MutexGuard};

use ziob_runtime::DmaBuf;

use crate::device::{check_read_buf, ZonedDevice};
use crate::model::error::Result;
use crate::model::geometry::Geometry;
use crate::model::state::{ZoneAction, ZoneInfo, ZoneTable, ZoneTarget};

struct NilInner {
    name: String,
    geometry: Geometry,
    table: Mutex<ZoneTable>,
}

/// A zoned device that tracks zone state but moves no data. Clones share the device.
#[derive(Clone)]
pub struct NilDevice {
    inner: Arc<NilInner>,
}

impl NilDevice {
    /// A device of `geometry` with every zone Empty; `name` is the spec it reports.
    pub fn new(name: impl Into<String>, geometry: &Geometry) -> Result<NilDevice> {
        geometry.validate()?;
        Ok(NilDevice {
            inner: Arc::new(NilInner {
                name: name.into(),
                geometry: *geometry,
                table: Mutex::new(ZoneTable::new(geometry)),
            }),
        })
    }

    fn table(&self) -> MutexGuard<'_, ZoneTable> {
        self.inner.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn reserve(&self, zone: u32, offset: Option<u64>, len: u64) -> Result<u64> {
        let mut t = self.table();
        let r = match offset {
            Some(off) => t.begin_write(zone, off, len)?,
            None => t.begin_append(zone, len)?,
        };
        t.complete(r, true);
        Ok(r.offset_bytes)
    }
}

impl ZonedDevice for NilDevice {
    fn geometry(&self) -> &Geometry {
        &self.inner.geometry
    }

    fn name(&self) -> &str {
        &self.inner.name
    }

    async fn report_zones(&self, first: u32, count: u32) -> Result<Vec<ZoneInfo>> {
        self.table().report(first, count)
    }

    async fn read(
        &self,
        zone: u32,
        offset_bytes: u64,
        len: usize,
        mut buf: DmaBuf,
    ) -> (Result<()>, DmaBuf) {
        let res = check_read_buf(&buf, len)
            .and_then(|()| self.table().check_read(zone, offset_bytes, len as u64));
        if res.is_ok() {
            if buf.len() >= len {
                buf.truncate(len);
            } else {
                buf.resize(len, 0);
            }
        }
        (res.map(|_| ()), buf)
    }

    async fn write(&self, zone: u32, offset_bytes: u64, buf: DmaBuf) -> (Result<()>, DmaBuf) {
        (
            self.reserve(zone, Some(offset_bytes), buf.len() as u64)
                .map(|_| ()),
            buf,
        )
    }

    async fn append(&self, zone: u32, buf: DmaBuf) -> (Result<u64>, DmaBuf) {
        (self.reserve(zone, None, buf.len() as u64), buf)
    }

    async fn zone_action(&self, action: ZoneAction, target: ZoneTarget) -> Result<()> {
        self.table().apply(action, target)
    }

    async fn flush(&self) -> Result<()> {
        Ok(())
    }
}
