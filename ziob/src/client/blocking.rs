//! [`BlockingClient`]: the [`Client`]'s operations as plain blocking calls.

use std::future::Future;

use bytes::Bytes;
use ziob_backends::{Geometry, ZoneAction, ZoneInfo, ZoneTarget, ZonedDevice};
use ziob_runtime::DmaBuf;

use super::Client;
use crate::error::{Result, ZiobError};
use crate::metrics::ShardStats;

/// The [`Client`]'s operations as blocking calls, for plain threads and FFI callers (e.g. a
/// storage engine's own threads). Each call blocks the calling thread until the owning core
/// answers; it may be made from any thread that is not a ZIOB core (on a core it would wait
/// for the very core it blocks, so it fails at once with [`ZiobError::BlockingOnCore`]).
/// Avoid it on the worker threads of an async executor: use the [`Client`] there.
///
/// Errors, durability and backpressure are those of the [`Client`] methods of the same name.
/// A blocking call cannot be cancelled: it returns when the operation is done.
#[derive(Clone, Debug)]
pub struct BlockingClient<D: ZonedDevice = ziob_backends::AnyDevice> {
    client: Client<D>,
}

/// Blocks on `fut` unless this thread is a ZIOB core.
fn wait<T>(op: &'static str, fut: impl Future<Output = Result<T>>) -> Result<T> {
    if ziob_runtime::on_core() {
        return Err(ZiobError::BlockingOnCore { op });
    }
    futures::executor::block_on(fut)
}

impl<D: ZonedDevice> BlockingClient<D> {
    pub(super) fn new(client: Client<D>) -> BlockingClient<D> {
        BlockingClient { client }
    }

    /// The async client this wraps.
    pub fn client(&self) -> &Client<D> {
        &self.client
    }

    /// See [`Client::geometry`].
    pub fn geometry(&self) -> Geometry {
        self.client.geometry()
    }

    /// See [`Client::cores`].
    pub fn cores(&self) -> usize {
        self.client.cores()
    }

    /// See [`Client::append`].
    pub fn append(&self, zone: u32, data: Bytes) -> Result<u64> {
        wait("append", self.client.append(zone, data))
    }

    /// See [`Client::append_slice`].
    pub fn append_slice(&self, zone: u32, data: &[u8]) -> Result<u64> {
        wait("append_slice", self.client.append_slice(zone, data))
    }

    /// See [`Client::append_dma`].
    pub fn append_dma(&self, zone: u32, data: DmaBuf) -> Result<u64> {
        wait("append_dma", self.client.append_dma(zone, data))
    }

    /// See [`Client::write_at`].
    pub fn write_at(&self, zone: u32, offset: u64, data: Bytes) -> Result<()> {
        wait("write_at", self.client.write_at(zone, offset, data))
    }

    /// See [`Client::write_at_dma`].
    pub fn write_at_dma(&self, zone: u32, offset: u64, data: DmaBuf) -> Result<()> {
        wait("write_at_dma", self.client.write_at_dma(zone, offset, data))
    }

    /// See [`Client::write_at_slice`].
    pub fn write_at_slice(&self, zone: u32, offset: u64, data: &[u8]) -> Result<()> {
        wait(
            "write_at_slice",
            self.client.write_at_slice(zone, offset, data),
        )
    }

    /// See [`Client::read`].
    pub fn read(&self, zone: u32, offset: u64, len: usize) -> Result<Bytes> {
        wait("read", self.client.read(zone, offset, len))
    }

    /// See [`Client::read_into`].
    pub fn read_into(&self, zone: u32, offset: u64, buf: &mut [u8]) -> Result<()> {
        wait("read_into", self.client.read_into(zone, offset, buf))
    }

    /// See [`Client::flush`].
    pub fn flush(&self, zone: u32) -> Result<()> {
        wait("flush", self.client.flush(zone))
    }

    /// See [`Client::write_back`].
    pub fn write_back(&self, zone: u32) -> Result<()> {
        wait("write_back", self.client.write_back(zone))
    }

    /// See [`Client::flush_device`].
    pub fn flush_device(&self) -> Result<()> {
        wait("flush_device", self.client.flush_device())
    }

    /// See [`Client::sync`].
    pub fn sync(&self) -> Result<()> {
        wait("sync", self.client.sync())
    }

    /// See [`Client::reset`].
    pub fn reset(&self, zone: u32) -> Result<()> {
        wait("reset", self.client.reset(zone))
    }

    /// See [`Client::finish`].
    pub fn finish(&self, zone: u32) -> Result<()> {
        wait("finish", self.client.finish(zone))
    }

    /// See [`Client::zone_action`].
    pub fn zone_action(&self, action: ZoneAction, target: ZoneTarget) -> Result<()> {
        wait("zone_action", self.client.zone_action(action, target))
    }

    /// See [`Client::report`].
    pub fn report(&self, first: u32, count: u32) -> Result<Vec<ZoneInfo>> {
        wait("report", self.client.report(first, count))
    }

    /// See [`Client::stats`].
    pub fn stats(&self) -> Result<Vec<ShardStats>> {
        wait("stats", self.client.stats())
    }

    /// See [`Client::metrics`].
    pub fn metrics(&self) -> Result<crate::MetricsSnapshot> {
        wait("metrics", self.client.metrics())
    }

    /// See [`Client::close`].
    pub fn close(&self) -> Result<()> {
        wait("close", self.client.close())
    }
}
