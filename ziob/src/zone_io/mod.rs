//! One zone as a byte stream: [`ZoneWriter`] (`futures::io::AsyncWrite`, appends) and
//! [`ZoneReader`] (`futures::io::AsyncRead + AsyncSeek`), both over a
//! [`Client`](crate::Client), so they work on any executor (tokio through
//! `tokio_util::compat`).
//!
//! ```
//! use futures::io::{AsyncReadExt, AsyncWriteExt};
//! use ziob::zone_io::{ZoneReader, ZoneWriter};
//! use ziob::{Client, Runtime, ZiobConfig};
//! let rt = Runtime::builder().cores(1).build().unwrap();
//! futures::executor::block_on(async {
//!     let spec = "mem:zones=4,zone_size=1M";
//!     let client = Client::open(rt.handle(), spec, ZiobConfig::default()).await.unwrap();
//!     let mut w = ZoneWriter::new(client.clone(), 2);
//!     w.write_all(b"hello, zone").await.unwrap();
//!     w.close().await.unwrap(); // appended and flushed
//!     let mut r = ZoneReader::open(client.clone(), 2).await.unwrap();
//!     let mut s = String::new();
//!     r.read_to_string(&mut s).await.unwrap();
//!     assert_eq!(s, "hello, zone");
//!     client.close().await.unwrap();
//! });
//! ```

mod reader;
mod writer;

pub use reader::ZoneReader;
pub use writer::{ZoneWriter, ZONE_WRITER_BUFFER_BYTES_DEFAULT};

use crate::error::ZiobError;
use ziob_backends::DeviceError;

/// A ZIOB error as an `io::Error`: a zone out of room is `StorageFull`, the rest `Other`
/// (the `ZiobError` is the source).
pub(crate) fn io_error(e: ZiobError) -> std::io::Error {
    let kind = match &e {
        ZiobError::Device(DeviceError::ZoneFull { .. } | DeviceError::BoundaryError { .. }) => {
            std::io::ErrorKind::StorageFull
        }
        _ => std::io::ErrorKind::Other,
    };
    std::io::Error::new(kind, e)
}
