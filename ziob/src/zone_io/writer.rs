//! [`ZoneWriter`]: appends to one zone as a `futures::io::AsyncWrite`.

use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::io::AsyncWrite;
use futures::FutureExt;

use super::io_error;
use crate::client::Client;
use crate::error::Result;

/// Default bytes a [`ZoneWriter`] gathers before it appends them: 256 KiB.
pub const ZONE_WRITER_BUFFER_BYTES_DEFAULT: usize = 256 << 10;

enum Pending {
    Idle,
    /// Appending the gathered bytes.
    Append(BoxFuture<'static, Result<u64>>),
    /// Flushing the zone (after the append).
    Flush(BoxFuture<'static, Result<()>>),
}

/// Appends to one zone: writes are gathered in memory and appended in pieces of up to
/// [`ZONE_WRITER_BUFFER_BYTES_DEFAULT`] bytes; `poll_flush` appends what is gathered and
/// flushes the zone (durable when it completes); `poll_close` does the same.
///
/// Writing past the zone's capacity fails with `ErrorKind::StorageFull` (the bytes of that
/// append are not in the zone). Other appenders of the same zone interleave with it at
/// append boundaries.
///
/// # Cancel safety
/// Dropping the writer drops the bytes not yet appended (call `close` or `flush` first); an
/// append already started happens whole or not at all.
pub struct ZoneWriter {
    client: Client,
    zone: u32,
    gathered: BytesMut,
    buffer_bytes: usize,
    pending: Pending,
    written: u64,
}

impl ZoneWriter {
    /// A writer appending to `zone`.
    pub fn new(client: Client, zone: u32) -> ZoneWriter {
        ZoneWriter::with_buffer(client, zone, ZONE_WRITER_BUFFER_BYTES_DEFAULT)
    }

    /// A writer gathering up to `buffer_bytes` (at least 1) before it appends.
    pub fn with_buffer(client: Client, zone: u32, buffer_bytes: usize) -> ZoneWriter {
        ZoneWriter {
            client,
            zone,
            gathered: BytesMut::new(),
            buffer_bytes: buffer_bytes.max(1),
            pending: Pending::Idle,
            written: 0,
        }
    }

    /// The zone.
    pub fn zone(&self) -> u32 {
        self.zone
    }

    /// Bytes this writer handed to appends so far (not counting gathered ones).
    pub fn appended_bytes(&self) -> u64 {
        self.written
    }

    /// Drives the pending append or flush (if any) to its end.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let res = match &mut self.pending {
            Pending::Idle => return Poll::Ready(Ok(())),
            Pending::Append(f) => ready!(f.poll_unpin(cx)).map(|_| ()),
            Pending::Flush(f) => ready!(f.poll_unpin(cx)),
        };
        self.pending = Pending::Idle;
        Poll::Ready(res.map_err(io_error))
    }

    /// Starts appending the gathered bytes.
    fn start_append(&mut self) {
        let data: Bytes = self.gathered.split().freeze();
        self.written += data.len() as u64;
        self.pending = Pending::Append(self.client.append(self.zone, data).boxed());
    }
}

impl AsyncWrite for ZoneWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        while this.gathered.len() >= this.buffer_bytes {
            ready!(this.poll_pending(cx))?;
            this.start_append();
        }
        let n = buf.len().min(this.buffer_bytes - this.gathered.len());
        this.gathered.extend_from_slice(&buf[..n]);
        if this.gathered.len() >= this.buffer_bytes && matches!(this.pending, Pending::Idle) {
            // Start the append now so it overlaps with the caller's next writes.
            this.start_append();
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            match &mut this.pending {
                Pending::Flush(f) => {
                    let res = ready!(f.poll_unpin(cx));
                    this.pending = Pending::Idle;
                    return Poll::Ready(res.map_err(io_error));
                }
                Pending::Append(_) => ready!(this.poll_pending(cx))?,
                Pending::Idle if !this.gathered.is_empty() => this.start_append(),
                Pending::Idle => {
                    this.pending = Pending::Flush(this.client.flush(this.zone).boxed());
                }
            }
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.poll_flush(cx)
    }
}
