//! [`ZiobError`]: errors of the buffer and its API.

use ziob_backends::{DeviceError, ErrorKind};

/// Result alias of the `ziob` crate.
pub type Result<T> = std::result::Result<T, ZiobError>;

/// An error returned by [`Ziob`](crate::Ziob) and [`Zone`](crate::Zone) operations.
#[derive(Debug, thiserror::Error)]
pub enum ZiobError {
    /// The device (or the buffer acting as the device) refused the operation, with the same
    /// typed error the device would return.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// An earlier write-back of this zone failed; its data is still readable from the buffer.
    /// The error stays until the zone is reset (which discards the buffered data).
    #[error("write-back of zone {zone} failed at byte {offset_bytes}: {message}; the zone's buffered data is still readable, reset the zone to clear the error")]
    Writeback {
        /// The zone.
        zone: u32,
        /// Where the failed write started, in bytes from the zone start.
        offset_bytes: u64,
        /// The device error's kind.
        kind: ErrorKind,
        /// The device error's message.
        message: String,
    },
    /// `sync` or `close` could not make some zones' data durable: each listed zone holds a
    /// kept write-back error ([`ZiobError::Writeback`]) and buffered data the device does
    /// not have. Every other zone's data was written back and the device cache flushed.
    /// Reported by every `sync` while such a zone holds such data (until it is finished or
    /// reset); `detail` has each zone's error.
    #[error("could not make the data of zone(s) {zones:?} durable (their write-back failed; the rest was synced): {detail}")]
    ZonesFailed {
        /// The failed zones, in ascending order.
        zones: Vec<u32>,
        /// Each failed zone's write-back error, `; `-separated.
        detail: String,
    },
    /// The shard's memory budget is taken by data that cannot be written back now (the
    /// buffer's own limit); `cause` says why, e.g. every active-zone resource of the core is
    /// held and the data belongs to zones that would need one.
    #[error("buffer full: zone {zone} needs {needed_bytes} bytes, but core {core}'s {budget_bytes}-byte budget has {used_bytes} bytes charged ({dirty_bytes} bytes not yet on the device) and none can be freed: {cause}; flush, finish or reset a zone")]
    BufferFull {
        /// The zone being written.
        zone: u32,
        /// Bytes the write needed.
        needed_bytes: u64,
        /// The shard budget.
        budget_bytes: u64,
        /// Bytes of the budget charged now.
        used_bytes: u64,
        /// Bytes buffered and not yet on the device (all zones of the core).
        dirty_bytes: u64,
        /// The core.
        core: usize,
        /// Why nothing can be written back, with the numbers behind it.
        cause: String,
    },
    /// A configuration that does not fit the device or the runtime.
    #[error("invalid ZIOB configuration: {0}")]
    Config(String),
    /// The runtime failed (a core is gone, or the call was made off-core).
    #[error(transparent)]
    Runtime(#[from] ziob_runtime::Error),
    /// The instance was closed.
    #[error("this ZIOB instance is closed")]
    Closed,
    /// The runtime the instance runs on was stopped (its cores shut down): the call was not
    /// run, or its answer was lost with the core (what a dropped call of the same method
    /// would have done, see its cancel safety). Given by the [`Client`](crate::Client).
    #[error("the ZIOB runtime was stopped (core {core} is not running); the call was refused or its result lost")]
    RuntimeStopped {
        /// The core that was to run the call.
        core: usize,
    },
    /// A blocking call ([`BlockingClient`](crate::BlockingClient)) was made on a ZIOB core
    /// thread, where it would wait for the core it blocks; use the async
    /// [`Client`](crate::Client) there.
    #[error("BlockingClient::{op} called on a ZIOB core thread: it would deadlock; await the async Client (or Ziob) method there instead")]
    BlockingOnCore {
        /// The method called.
        op: &'static str,
    },
    /// A zone log name that is not 1..=64 bytes of `[A-Za-z0-9._-]`.
    #[error("invalid log name {name:?}: {reason}")]
    InvalidLogName {
        /// The refused name (at most 80 characters of it).
        name: String,
        /// Why it is refused.
        reason: String,
    },
    /// No zone log of that name exists in the space (or it was removed).
    #[error("no zone log named {name:?}")]
    NoSuchLog {
        /// The name.
        name: String,
    },
    /// A record larger than a zone of the log can hold (records never span zones).
    #[error("record of {len_bytes} bytes is too large for log {log:?}: a record holds at most {max_bytes} bytes (zone capacity minus the zone header and the record frame)")]
    RecordTooLarge {
        /// The log.
        log: String,
        /// The record's length.
        len_bytes: u64,
        /// The largest record the log takes.
        max_bytes: u64,
    },
    /// A zone log needs a fresh zone and the space has none it may use: every zone of the
    /// space is used (truncate or remove logs to free zones), or the device's active-zone
    /// limit is reached. Nothing was appended.
    #[error("no space for log {log:?}: {detail}")]
    NoSpace {
        /// The log.
        log: String,
        /// Why no zone could be taken, with the numbers.
        detail: String,
    },
    /// A log position before the log's start: the records there were truncated.
    /// Positions are given in their raw form ([`Position::into_raw`](crate::zonelog::Position::into_raw)).
    #[error("position {}-{} of log {log:?} was truncated; the log starts at {}-{}", .position >> 32, .position & 0xffff_ffff, .start >> 32, .start & 0xffff_ffff)]
    Truncated {
        /// The log.
        log: String,
        /// The requested position (raw).
        position: u64,
        /// The log's first position (raw).
        start: u64,
    },
    /// A log position where no record starts (or past the log's end).
    #[error("no record at position {}-{} of log {log:?}: {detail}", .position >> 32, .position & 0xffff_ffff)]
    InvalidPosition {
        /// The log.
        log: String,
        /// The requested position (raw).
        position: u64,
        /// Why.
        detail: String,
    },
    /// Log data that fails its checks where a record should be (a damaged device).
    #[error("log {log:?} is damaged at position {}-{}: {detail}", .position >> 32, .position & 0xffff_ffff)]
    LogCorrupt {
        /// The log.
        log: String,
        /// Where (raw position).
        position: u64,
        /// What is wrong.
        detail: String,
    },
    /// An operation running as a task of its own on core `core` ended without a result: it
    /// panicked (a bug; see the log) or the core stopped.
    #[error("the operation's task on core {core} ended without a result (it panicked or the core stopped)")]
    Aborted {
        /// The core the task ran on.
        core: usize,
    },
}

impl ZiobError {
    /// The device error kind this error corresponds to, if any.
    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            ZiobError::Device(e) => Some(e.kind()),
            ZiobError::Writeback { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    /// This runtime error as seen by a caller off the runtime: a core shut down with its
    /// runtime is [`ZiobError::RuntimeStopped`].
    pub(crate) fn from_runtime(e: ziob_runtime::Error) -> ZiobError {
        match e {
            ziob_runtime::Error::CoreGone(core) => ZiobError::RuntimeStopped { core },
            other => ZiobError::Runtime(other),
        }
    }

    /// Merges the results of several shards' `sync`: the zones of every
    /// [`ZiobError::ZonesFailed`] are listed together; any other error wins (the first).
    pub(crate) fn merge_sync(results: impl IntoIterator<Item = Result<()>>) -> Result<()> {
        let mut other = None;
        let mut failed: Vec<u32> = Vec::new();
        let mut details: Vec<String> = Vec::new();
        for r in results {
            match r {
                Ok(()) => {}
                Err(ZiobError::ZonesFailed { zones, detail }) => {
                    failed.extend(zones);
                    details.push(detail);
                }
                Err(e) => {
                    other.get_or_insert(e);
                }
            }
        }
        if let Some(e) = other {
            return Err(e);
        }
        if failed.is_empty() {
            return Ok(());
        }
        failed.sort_unstable();
        Err(ZiobError::ZonesFailed {
            zones: failed,
            detail: details.join("; "),
        })
    }

    /// A copy of this error to hand to a second caller (sticky errors are reported to every
    /// caller that touches the zone).
    pub(crate) fn writeback(zone: u32, offset_bytes: u64, e: &DeviceError) -> ZiobError {
        ZiobError::Writeback {
            zone,
            offset_bytes,
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}

impl Clone for ZiobError {
    fn clone(&self) -> Self {
        match self {
            ZiobError::Writeback {
                zone,
                offset_bytes,
                kind,
                message,
            } => ZiobError::Writeback {
                zone: *zone,
                offset_bytes: *offset_bytes,
                kind: *kind,
                message: message.clone(),
            },
            ZiobError::ZonesFailed { zones, detail } => ZiobError::ZonesFailed {
                zones: zones.clone(),
                detail: detail.clone(),
            },
            other => ZiobError::Config(other.to_string()),
        }
    }
}
