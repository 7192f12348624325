//! [`ZoneReader`]: reads one zone as `futures::io::AsyncRead + AsyncSeek`.

use std::io::SeekFrom;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::io::{AsyncRead, AsyncSeek};
use futures::FutureExt;

use super::io_error;
use crate::client::Client;
use crate::error::{Result, ZiobError};

/// Bytes read from the zone at once: 128 KiB.
const READ_AHEAD_BYTES: u64 = 128 << 10;

/// Reads bytes `[0, len)` of one zone, where `len` is the zone's write pointer when the
/// reader was opened (or what [`ZoneReader::with_len`] says), in reads of 128 KiB; seeking
/// is free (it only moves the position).
pub struct ZoneReader {
    client: Client,
    zone: u32,
    len: u64,
    pos: u64,
    /// Bytes of the zone from `chunk_start`.
    chunk: Bytes,
    chunk_start: u64,
    pending: Option<(u64, BoxFuture<'static, Result<Bytes>>)>,
}

impl ZoneReader {
    /// A reader of `zone` up to its current write pointer (from a zone report).
    pub async fn open(client: Client, zone: u32) -> Result<ZoneReader> {
        let info = client.report(zone, 1).await?;
        let len = info
            .first()
            .map(|i| i.write_pointer_bytes)
            .ok_or_else(|| ZiobError::Config(format!("zone {zone} was not reported")))?;
        Ok(ZoneReader::with_len(client, zone, len))
    }

    /// A reader of bytes `[0, len)` of `zone`.
    pub fn with_len(client: Client, zone: u32, len: u64) -> ZoneReader {
        ZoneReader {
            client,
            zone,
            len,
            pos: 0,
            chunk: Bytes::new(),
            chunk_start: 0,
            pending: None,
        }
    }

    /// Bytes this reader reads.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the reader has no bytes at all.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl AsyncRead for ZoneReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        loop {
            if this.pos >= this.len || buf.is_empty() {
                return Poll::Ready(Ok(0));
            }
            let chunk_end = this.chunk_start + this.chunk.len() as u64;
            if this.pos >= this.chunk_start && this.pos < chunk_end {
                let at = (this.pos - this.chunk_start) as usize;
                let n = buf.len().min(this.chunk.len() - at);
                buf[..n].copy_from_slice(&this.chunk[at..at + n]);
                this.pos += n as u64;
                return Poll::Ready(Ok(n));
            }
            if this.pending.as_ref().is_none_or(|(at, _)| *at != this.pos) {
                let len = READ_AHEAD_BYTES.min(this.len - this.pos) as usize;
                let read = this.client.read(this.zone, this.pos, len).boxed();
                this.pending = Some((this.pos, read));
            }
            let (at, fut) = this.pending.as_mut().expect("a read is pending");
            let at = *at;
            let res = ready!(fut.poll_unpin(cx));
            this.pending = None;
            this.chunk = res.map_err(io_error)?;
            this.chunk_start = at;
            if this.chunk.is_empty() {
                return Poll::Ready(Ok(0));
            }
        }
    }
}

impl AsyncSeek for ZoneReader {
    fn poll_seek(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        pos: SeekFrom,
    ) -> Poll<std::io::Result<u64>> {
        let this = self.get_mut();
        let target = match pos {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => this.len.checked_add_signed(d),
            SeekFrom::Current(d) => this.pos.checked_add_signed(d),
        };
        match target {
            Some(p) => {
                this.pos = p;
                Poll::Ready(Ok(p))
            }
            None => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "seek to a negative or overflowing position",
            ))),
        }
    }
}
