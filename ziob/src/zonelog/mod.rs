//! Zone logs: durable, framed record logs over zones, for WALs, Raft logs and commit logs.
//!
//! A [`LogSpace`] owns a range of zones and holds named [`ZoneLog`]s. A log appends
//! records (length + CRC-32C framing) to one zone at a time; when a record does not fit, the
//! log finishes the zone and moves to a fresh one from the space's free-zone allocator.
//! Every zone a log uses starts with a zone header (magic, version, log name, the zone's
//! sequence number in the log, CRC-32C), so opening a space finds every log by reading the
//! first block of each non-empty zone; there is no metadata zone. The byte layout is in
//! `docs/format.md` ("Zone log").
//!
//! Everything works through a [`Client`](crate::Client): the types are `Send + Sync` and
//! their futures are `Send`, so they are used from tokio (or any executor) directly.
//!
//! - Positions ([`Position`]) are `zone sequence << 32 | byte offset in the zone`: they grow
//!   in log order, print as `SEQ-OFFSET`, and the position after a record
//!   ([`Position::after`]) is where reading goes on.
//! - [`ZoneLog::append`] / [`append_batch`](ZoneLog::append_batch) copy into the zone write
//!   buffer and return at once; [`ZoneLog::sync`] makes everything appended before it
//!   durable (a zone flush, group-committed). Appends from many tasks at once get distinct
//!   positions in the order the buffer took them.
//! - [`ZoneLog::read`], [`read_from`](ZoneLog::read_from), [`stream`](ZoneLog::stream)
//!   (ends at the current end) and [`tail`](ZoneLog::tail) (waits for new records).
//! - [`ZoneLog::truncate_before`] resets the zones holding only older records.
//! - On open, each log's last zone is read through and cut at the first torn or corrupt
//!   record ([`SpaceRecovery`], a `tracing` warning); the log goes on in a fresh zone.
//!
//! [`ZoneWriter`](crate::zone_io::ZoneWriter) and [`ZoneReader`](crate::zone_io::ZoneReader)
//! give one zone as `futures::io` byte streams instead.

mod allocator;
mod chain;
mod layout;
mod log;
mod name;
mod position;
mod reader;
pub(crate) mod record;
mod recovery;
mod rollover;
mod scan;
mod space;
mod stream;
mod zone_header;

pub use log::ZoneLog;
pub use name::{validate_log_name, LOG_NAME_BYTES_MAX};
pub use position::{ParsePositionError, Position};
pub use record::{decode_at, encode_record, frame_len, Decoded, RECORD_HEADER_BYTES};
pub use recovery::{LogCut, LogRecovery, SpaceRecovery};
pub use space::{LogSpace, LogSpaceOptions, READ_WINDOW_BYTES_DEFAULT};
