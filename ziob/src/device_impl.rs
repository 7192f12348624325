//! A [`Ziob`] instance is itself a [`ZonedDevice`]: the same contract, with the buffer in
//! the data path. That is how the conformance suite runs "through the buffer", and how code
//! written against the device trait gets the buffer for free.

use std::io;

use ziob_backends::{
    DeviceError, Geometry, IoOp, Result, ZoneAction, ZoneInfo, ZoneTarget, ZonedDevice,
};
use ziob_runtime::DmaBuf;

use crate::error::ZiobError;
use crate::handle::Ziob;

fn to_device(e: ZiobError) -> DeviceError {
    match e {
        ZiobError::Device(d) => d,
        other => DeviceError::Io {
            context: "ziob".into(),
            source: io::Error::other(other.to_string()),
        },
    }
}

fn check_aligned(g: &Geometry, op: IoOp, zone: u32, offset: u64, len: u64) -> Result<()> {
    g.check_aligned(op, zone, offset, len)?;
    g.check_zone(zone)
}

impl<D: ZonedDevice> ZonedDevice for Ziob<D> {
    fn geometry(&self) -> &Geometry {
        self.view_geometry()
    }

    fn name(&self) -> &str {
        self.view_name()
    }

    async fn report_zones(&self, first: u32, count: u32) -> Result<Vec<ZoneInfo>> {
        self.report(first, count).await.map_err(to_device)
    }

    async fn read(
        &self,
        zone: u32,
        offset_bytes: u64,
        len: usize,
        buf: DmaBuf,
    ) -> (Result<()>, DmaBuf) {
        if let Err(e) = check_aligned(self.geometry(), IoOp::Read, zone, offset_bytes, len as u64) {
            return (Err(e), buf);
        }
        if buf.capacity() < len {
            let cap = buf.capacity();
            return (
                Err(DeviceError::InvalidArgument(format!(
                    "read of {len} bytes into a buffer of capacity {cap}"
                ))),
                buf,
            );
        }
        match Ziob::read(self, zone, offset_bytes, len).await {
            Ok(data) => {
                let mut buf = buf;
                buf.clear();
                buf.extend_from_slice(&data);
                (Ok(()), buf)
            }
            Err(e) => (Err(to_device(e)), buf),
        }
    }

    async fn write(&self, zone: u32, offset_bytes: u64, buf: DmaBuf) -> (Result<()>, DmaBuf) {
        if let Err(e) = check_aligned(
            self.geometry(),
            IoOp::Write,
            zone,
            offset_bytes,
            buf.len() as u64,
        ) {
            return (Err(e), buf);
        }
        match self.write_at_returning(zone, offset_bytes, buf).await {
            (res, Some(buf)) => (res.map_err(to_device), buf),
            (res, None) => (res.map_err(to_device), DmaBuf::with_capacity(0)),
        }
    }

    async fn append(&self, zone: u32, buf: DmaBuf) -> (Result<u64>, DmaBuf) {
        let g = self.geometry();
        if let Err(e) = g
            .check_append(zone, buf.len() as u64)
            .and_then(|()| g.check_zone(zone))
        {
            return (Err(e), buf);
        }
        match self.append_returning(zone, buf).await {
            (res, Some(buf)) => (res.map_err(to_device), buf),
            (res, None) => (res.map_err(to_device), DmaBuf::with_capacity(0)),
        }
    }

    async fn zone_action(&self, action: ZoneAction, target: ZoneTarget) -> Result<()> {
        Ziob::zone_action(self, action, target)
            .await
            .map_err(to_device)
    }

    async fn flush(&self) -> Result<()> {
        self.sync().await.map_err(to_device)
    }
}
