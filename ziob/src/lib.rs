//! # ZIOB: async zoned storage with a zone write buffer
//!
//! `ziob` is the crate applications depend on. It puts a host-memory **zone write buffer**
//! in front of a zoned device ([`ZonedDevice`]): appends land in memory and get their
//! offset at once, reads of recent data are served from memory, and each zone's data is
//! written back to the device in large sequential runs.
//!
//! ## Shards and cores
//! The buffer is split into one shard per runtime core. Zone `z` belongs to core
//! `z % cores` ([`placement`]); a request for a zone owned by another core is sent there by
//! message passing, so callers never need to know the owner. Reads of what only the device
//! holds are the exception: the owner publishes those ranges, and any thread reads them from
//! the device itself (threads that are no core of the runtime also what was written back
//! while the owner's memory still holds it; see `on_device.rs` and `docs/CLIENT.md`).
//!
//! ## Write-back
//! Data is staged in chunks that fit it: a zone's first chunk is what its first write needs
//! in whole blocks, and each next chunk doubles the last up to one write-back unit
//! ([`ZiobConfig::writeback_unit_bytes`], 512 KiB by default), so thousands of zones with a
//! few bytes each fit the budget. A zone's data goes to the device in order — one write at a time per
//! zone, or up to [`ZonedDevice::ordered_writes_in_flight`] for devices that keep per-zone
//! order — several zones at once, when a chunk fills, when the zone reaches its capacity,
//! on [`Ziob::flush`] / [`Ziob::sync`] / finish, when memory runs short (least recently
//! written zone first) and after an idle time ([`ZiobConfig::idle_writeback`]). Write-back
//! uses device writes at the write pointer: the buffer has already fixed every offset, so
//! Zone Append would add nothing. Written-back chunks stay in memory as a read cache until
//! memory is needed.
//!
//! A write-back does not take the chunk away: the device writes a read-only view of the
//! issued blocks ([`DmaBuf::share`]) while appends keep landing in the same chunk past them
//! and reads of any buffered byte are served from memory. No append or read waits for a
//! device I/O unless the memory budget is exhausted.
//!
//! ## Group commit
//! [`Ziob::flush`], [`Ziob::sync`] and finish end with a flush of the device's write cache
//! (a zone flush on a device with durable writes may instead write its zone back with Force
//! Unit Access: [`ShardStats::device_durable_writes`]). Calls that arrive while such a flush
//! is in progress on the zone's core share the next one (it starts after all their data is
//! on the device, so it covers them), so many tasks flushing at once cost a few device
//! flushes, not one each ([`ShardStats::device_flushes`] counts them). If a shared device
//! flush fails, every call that waited for it fails. To make several zones durable with one
//! device flush, write each back with [`Ziob::write_back`] (no cache flush) and then call
//! [`Ziob::flush_device`] once: a device cache flush covers every write the device completed
//! before it, from any core (the zone file layer's sync does this). A finish flushes the
//! cache before its device finish too, so it never outlives the data it closes.
//!
//! ## Open and active zones
//! Applications may write to any number of zones. The device only sees zones being written
//! back: each core holds an equal share of the device's Max Open / Max Active Resources; a
//! device zone is opened by its write-back, stays open while more data follows, and is closed
//! when another zone needs the open resource (or becomes Full at capacity, or is finished).
//! A zone whose write-back needs an active resource while all of the core's are taken keeps
//! its data in memory until one frees (a zone fills, is finished or reset). When the budget is
//! full of such data and nothing can be written back, the write fails with
//! [`ZiobError::BufferFull`]: that is the buffer's own limit.
//!
//! ## Memory
//! Each shard has a hard budget ([`ZiobConfig::shard_budget_bytes`]). A writer that needs
//! memory first drops clean (written-back) chunks, then starts write-back and waits: writers
//! wait, they never fail for memory alone and the budget is never exceeded. When only
//! partial blocks are left to write, pressure write-back pads the partial last block of the
//! least recently written idle zones with zeros and writes it out; such a zone's next append
//! starts at the next block boundary, exactly as after [`Ziob::flush`].
//!
//! Chunks come from the core's buffer pool. When the runtime has registered buffers
//! ([`runtime::Builder::fixed_buffers`], slots at least one write-back unit large), chunks
//! take a free slot first, so write-back to io_uring backends (`emu`, `zbd`) is a
//! `WRITE_FIXED` without per-write page pinning; when the slots run out, chunks come from
//! the pool as usual. With an SPDK device open, the pool's memory is SPDK's DMA memory and
//! write-back goes to the device without a copy (registered slots, heap memory, are then not
//! used).
//!
//! ## Write-back errors
//! The exact rules when writing a zone's data to the device fails:
//! 1. **Resynchronise.** Once nothing of the zone is in flight, the buffer reads the zone
//!    back (Report Zones, up to 3 attempts) and takes the device's state and write pointer
//!    as what the device has; the rest stays buffered.
//! 2. **Retry what is transient.** A failure of kind [`ErrorKind::Io`] (the medium or the
//!    host) or [`ErrorKind::Aborted`] (a write dropped because an earlier one failed) is
//!    retried from the device's write pointer after 1, 2, then 4 ms: up to 3 retries in a
//!    row per zone (a completed write-back starts the count again). A retry that succeeds
//!    leaves no trace but [`ShardStats::writeback_retries`]; nobody sees an error.
//! 3. **Keep the error with that zone only.** Any other kind, a fourth failure in a row,
//!    or a zone that could not be read back is kept by the zone as
//!    [`ZiobError::Writeback`]. Appends, writes and flushes of that zone return it; nothing
//!    of the zone is written back any more. Other zones are not affected.
//! 4. **`sync` and `close`** write back and flush every other zone as usual, then return
//!    [`ZiobError::ZonesFailed`] listing (across all cores) the failed zones that hold data
//!    the device does not have — on every call, as long as that holds. Any other error
//!    (e.g. the device cache flush failing) is returned instead. `close` closes the
//!    instance either way.
//! 5. **Reads** of a failed zone keep working: buffered data from memory, the rest from
//!    the device.
//! 6. **Finish** of a failed zone finishes the device zone where the device's data ends:
//!    that durable part stays, the buffered data the device does not have is dropped, the
//!    zone is Full and its error gone (the call returns `Ok` after the device cache flush;
//!    the loss was reported by the calls above). If the device refuses the finish, nothing
//!    changes.
//! 7. **Reset** drops the zone's data and ends its error.
//!
//! ## Cancellation and closing
//! Every call may be dropped at any await point, from any core: a dropped call never leaves
//! a zone held, memory charged or the instance stuck, and what it did does not depend on
//! which core made it. Appends and writes happen whole or not at all; reads change nothing;
//! a dropped flush or sync promises nothing durable; zone actions and [`Ziob::close`], once
//! started, run to the end (see [`Ziob`]'s "Cancel safety" and each method). [`Ziob::close`]
//! first refuses new calls, waits for the ones admitted, then syncs: every append
//! acknowledged before it is durable when it returns `Ok`.
//!
//! ## Zone logs and byte streams
//! [`zonelog`]: durable, checksummed record logs over zones ([`LogSpace`], [`ZoneLog`],
//! [`Position`]) with streams, tailing, truncation and crash recovery, for WALs and Raft
//! logs; [`zone_io`]: one zone as `futures::io` `AsyncWrite` / `AsyncRead`. Both work
//! through a [`Client`], so they are `Send` and usable from tokio.
//!
//! ## Example
//! ```
//! use ziob::{DmaBuf, Runtime, Ziob, ZiobConfig};
//! let rt = Runtime::builder().cores(2).build().unwrap();
//! rt.block_on(|| async {
//!     let z = Ziob::open("mem:zones=8,zone_size=1M", ZiobConfig::default()).await.unwrap();
//!     let zone = z.zone(3); // owned by core 1; this task runs on core 0
//!     let off = zone.append(DmaBuf::from_slice(b"hello, zones")).await.unwrap();
//!     assert_eq!(off, 0);
//!     let data = zone.read(0, 12).await.unwrap(); // served from memory
//!     assert_eq!(&data[..], b"hello, zones");
//!     zone.flush().await.unwrap(); // on the device, padded to a block
//!     assert_eq!(zone.append(DmaBuf::from_slice(b"!")).await.unwrap(), 4096);
//!     z.close().await.unwrap();
//! })
//! .unwrap();
//! ```
#![warn(missing_docs)]

mod client;
mod config;
mod device_impl;
mod error;
mod handle;
/// A `tracing` subscriber to stderr for the binaries (`RUST_LOG`, default `warn`).
pub mod logging;
mod logical;
pub mod metrics;
mod on_device;
pub mod placement;
mod shard;
pub mod zone_io;
pub mod zonelog;

pub use client::{BlockingClient, Client};
pub use config::{
    ZiobConfig, IDLE_WRITEBACK_DEFAULT, SHARD_BUDGET_BYTES_DEFAULT, WRITEBACK_UNIT_BYTES_DEFAULT,
};
pub use error::{Result, ZiobError};
pub use handle::{Ziob, Zone};
pub use metrics::ShardStats;
pub use metrics::{MetricsSnapshot, OpKind};
pub use zone_io::{ZoneReader, ZoneWriter};
pub use zonelog::{LogSpace, LogSpaceOptions, Position, ZoneLog};

pub use ziob_backends as backends;
pub use ziob_backends::{
    open_device, AnyDevice, DeviceError, ErrorKind, Geometry, ZoneAction, ZoneInfo, ZoneState,
    ZoneTarget, ZonedDevice,
};
pub use ziob_runtime as runtime;
pub use ziob_runtime::{DmaBuf, Runtime};
