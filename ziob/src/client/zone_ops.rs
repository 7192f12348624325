//! Operations on one zone, each sent to the zone's owning core.

use std::future::Future;

use bytes::Bytes;
use ziob_backends::{ZoneAction, ZoneTarget, ZonedDevice};
use ziob_runtime::DmaBuf;

use super::Client;
use crate::error::Result;

/// Reads up to this size are read into a fresh `Vec` that becomes the `Bytes` (a device read
/// buffer goes back to the core's pool); larger ones hand the read buffer itself over.
const READ_COPY_MAX_BYTES: usize = 64 * 1024;

/// A read buffer handed over as the owner of a [`Bytes`].
struct ReadBuf(DmaBuf);

impl AsRef<[u8]> for ReadBuf {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl<D: ZonedDevice> Client<D> {
    /// Appends `data` to `zone`; returns the offset it was given (see
    /// [`Ziob::append`](crate::Ziob::append)). The buffered path copies `data` straight into the zone's
    /// memory: no aligned buffer per record.
    ///
    /// # Cancel safety
    /// If dropped, the data was appended whole or not at all, and the offset is not reported.
    pub fn append(
        &self,
        zone: u32,
        data: Bytes,
    ) -> impl Future<Output = Result<u64>> + Send + 'static {
        self.on_owner("append", zone, move |s| async move {
            s.append(zone, data).await.0
        })
    }

    /// [`Client::append`] of a copy of `data` (taken before this returns).
    ///
    /// # Cancel safety
    /// As [`Client::append`].
    pub fn append_slice(
        &self,
        zone: u32,
        data: &[u8],
    ) -> impl Future<Output = Result<u64>> + Send + 'static {
        self.append(zone, Bytes::copy_from_slice(data))
    }

    /// [`Client::append`] of an owned DMA buffer, handed to the shard (and, pass-through, to
    /// the device) without a copy.
    ///
    /// # Cancel safety
    /// As [`Client::append`].
    pub fn append_dma(
        &self,
        zone: u32,
        data: DmaBuf,
    ) -> impl Future<Output = Result<u64>> + Send + 'static {
        self.on_owner("append", zone, move |s| async move {
            s.append(zone, data).await.0
        })
    }

    /// Writes `data` at `offset` of `zone`, which must be the zone's write pointer (see
    /// [`Ziob::write_at`](crate::Ziob::write_at)).
    ///
    /// # Cancel safety
    /// As [`Client::append`]: written whole or not at all.
    pub fn write_at(
        &self,
        zone: u32,
        offset: u64,
        data: Bytes,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        self.on_owner("write_at", zone, move |s| async move {
            s.write_at(zone, offset, data).await.0
        })
    }

    /// [`Client::write_at`] of an owned DMA buffer, handed to the shard (and, pass-through, to
    /// the device) without a copy.
    ///
    /// # Cancel safety
    /// As [`Client::append`].
    pub fn write_at_dma(
        &self,
        zone: u32,
        offset: u64,
        data: DmaBuf,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        self.on_owner("write_at", zone, move |s| async move {
            s.write_at(zone, offset, data).await.0
        })
    }

    /// [`Client::write_at`] of a copy of `data` (taken before this returns).
    ///
    /// # Cancel safety
    /// As [`Client::append`].
    pub fn write_at_slice(
        &self,
        zone: u32,
        offset: u64,
        data: &[u8],
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        self.write_at(zone, offset, Bytes::copy_from_slice(data))
    }

    /// Reads `len` bytes at `offset` of `zone` (see [`Ziob::read`](crate::Ziob::read)).
    ///
    /// Polled on the core owning `zone`, a read of at most 64 KiB that the buffer holds in
    /// memory is served there at once (no hop through the core's mailbox, no task; it
    /// counts against the polling task's cooperative budget instead). A range that only the
    /// device holds any more (written back and no longer in the owner's memory; polled on a
    /// thread that is no core of the runtime, any range written back) needs no hop: on a
    /// device that reads without waiting (`mem`; `emu` through the page cache) it
    /// is read at once on the polling thread, any thread (at most 1 MiB); otherwise, polled
    /// on a core of the runtime that is not the owner, by a task on that core. A zone reset
    /// meanwhile sends the read to the owner (docs/CLIENT.md).
    ///
    /// # Cancel safety
    /// A read changes nothing; dropping it is always safe.
    pub fn read(
        &self,
        zone: u32,
        offset: u64,
        len: usize,
    ) -> impl Future<Output = Result<Bytes>> + Send + 'static {
        let client = self.clone();
        async move {
            let ziob = &client.ziob;
            if len <= READ_COPY_MAX_BYTES {
                if let Some(res) = ziob.read_now(zone, offset, len) {
                    ziob_runtime::consume_budget().await;
                    return res.map(Bytes::from);
                }
            }
            if let Some(data) = ziob.read_direct_now(zone, offset, len) {
                ziob_runtime::consume_budget().await;
                return Ok(Bytes::from(data));
            }
            if let Some(here) = ziob.direct_read_core(zone, offset, len) {
                let z = ziob.clone();
                let direct = ziob.runtime_handle().call(here, move || async move {
                    let (buf, at) = z.read_direct(zone, offset, len).await?;
                    Some(if len <= READ_COPY_MAX_BYTES {
                        Bytes::copy_from_slice(&buf[at..at + len])
                    } else {
                        Bytes::from_owner(ReadBuf(buf)).slice(at..at + len)
                    })
                });
                if let Ok(Some(bytes)) = direct.await {
                    return Ok(bytes);
                }
            }
            client.read_on_owner(zone, offset, len).await
        }
    }

    /// [`Client::read`] done at once on the calling thread, into `out` (`out.len()` bytes at
    /// `offset`, given back initialised), when it needs no wait: the owner's memory holds the
    /// range and this is the owner's core, or the device reads without waiting (a page
    /// cache, RAM; see [`Client::read`]). `None` when it would wait — then read with
    /// [`Client::read`] — and nothing is promised of `out`. For a plain thread's hot path
    /// (RocksDB's reads through the plugin): no future, no buffer of its own.
    pub fn read_now_into<'a>(
        &self,
        zone: u32,
        offset: u64,
        out: &'a mut [std::mem::MaybeUninit<u8>],
    ) -> Option<Result<&'a mut [u8]>> {
        let ziob = &self.ziob;
        let len = out.len();
        if len <= READ_COPY_MAX_BYTES {
            if let Some(res) = ziob.read_now(zone, offset, len) {
                return Some(res.map(|data| out.write_copy_of_slice(&data)));
            }
        }
        ziob.read_direct_now_into(zone, offset, out).map(Ok)
    }

    /// [`Client::read`] by the owner of `zone`, on its core.
    fn read_on_owner(
        &self,
        zone: u32,
        offset: u64,
        len: usize,
    ) -> impl Future<Output = Result<Bytes>> + Send + 'static {
        self.on_owner("read", zone, move |s| async move {
            Ok(if len <= READ_COPY_MAX_BYTES {
                Bytes::from(s.read::<Vec<u8>>(zone, offset, len).await?)
            } else {
                Bytes::from_owner(ReadBuf(s.read::<DmaBuf>(zone, offset, len).await?))
            })
        })
    }

    /// Reads `buf.len()` bytes at `offset` of `zone` into `buf`.
    ///
    /// # Cancel safety
    /// A read changes nothing; if dropped, `buf` may or may not have been filled (it is only
    /// written, whole, after the data arrived).
    pub async fn read_into(&self, zone: u32, offset: u64, buf: &mut [u8]) -> Result<()> {
        let len = buf.len();
        let data = self
            .on_owner("read", zone, move |s| async move {
                s.read::<DmaBuf>(zone, offset, len).await
            })
            .await?;
        buf.copy_from_slice(&data);
        Ok(())
    }

    /// Writes `zone`'s buffered data to the device and makes it durable (see
    /// [`Ziob::flush`](crate::Ziob::flush)).
    ///
    /// # Cancel safety
    /// A dropped flush may have padded the partial block and started write-back (which goes
    /// on); it promises nothing durable.
    pub fn flush(&self, zone: u32) -> impl Future<Output = Result<()>> + Send + 'static {
        self.on_owner(
            "flush",
            zone,
            move |s| async move { s.flush_zone(zone).await },
        )
    }

    /// Writes `zone`'s buffered data to the device without flushing the device's cache;
    /// durable after a later [`Client::flush_device`] (see
    /// [`Ziob::write_back`](crate::Ziob::write_back)).
    ///
    /// # Cancel safety
    /// As [`Client::flush`].
    pub fn write_back(&self, zone: u32) -> impl Future<Output = Result<()>> + Send + 'static {
        self.on_owner("write_back", zone, move |s| async move {
            s.write_back(zone).await
        })
    }

    /// Flushes the device's cache once: every write the device completed before the call
    /// (every zone's write-backs among them) is durable when it returns (see
    /// [`Ziob::flush_device`](crate::Ziob::flush_device)).
    ///
    /// # Cancel safety
    /// A dropped call promises nothing; a device flush it started runs to its end.
    pub fn flush_device(&self) -> impl Future<Output = Result<()>> + Send + 'static {
        self.on_core(
            "flush_device",
            0,
            move |s| async move { s.device_flush().await },
        )
    }

    /// Resets `zone` (discards its data). See [`Client::zone_action`].
    ///
    /// # Cancel safety
    /// As [`Client::zone_action`].
    pub fn reset(&self, zone: u32) -> impl Future<Output = Result<()>> + Send + 'static {
        self.zone_action(ZoneAction::Reset, ZoneTarget::One(zone))
    }

    /// Finishes `zone`: writes its data back, makes it Full and flushes the device cache (a
    /// completed finish is durable). See [`Client::zone_action`].
    ///
    /// # Cancel safety
    /// As [`Client::zone_action`].
    pub fn finish(&self, zone: u32) -> impl Future<Output = Result<()>> + Send + 'static {
        self.zone_action(ZoneAction::Finish, ZoneTarget::One(zone))
    }

    /// Applies a zone management action to one zone (on its core) or all (on every core at
    /// once); see [`Ziob::zone_action`](crate::Ziob::zone_action).
    ///
    /// # Cancel safety
    /// Once the call reached a zone's core, the action runs to the end as a task of its own
    /// even if the call is dropped. A dropped call cannot tell whether it got there: after
    /// dropping a reset, treat the zone's contents as unknown.
    pub fn zone_action(
        &self,
        action: ZoneAction,
        target: ZoneTarget,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let call: std::pin::Pin<Box<dyn Future<Output = Result<()>> + Send>> = match target {
            ZoneTarget::One(zone) => {
                Box::pin(self.on_owner("zone_action", zone, move |s| async move {
                    s.action(zone, action).await
                }))
            }
            ZoneTarget::All => {
                let all = self.on_every_core("zone_action", move |s| async move {
                    s.action_all(action).await
                });
                Box::pin(async move { all.await.map(|_| ()) })
            }
        };
        call
    }
}
