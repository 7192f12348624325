//! Group commit of device cache flushes: callers that arrive while a device flush is in
//! progress share the next one.
//!
//! Rule: a caller needs a device flush that *starts* after it called (its data was on the
//! device by then), so it takes the number of the next flush to start as its ticket and
//! waits until that flush — or a later one, which covers it too — has completed; it gets
//! that flush's result. One flush runs at a time per shard, in a task of its own (a caller
//! dropped mid-wait stops nothing and strands nobody); when it ends and somebody holds a
//! later ticket, the next one starts at once. So N concurrent flushes cost at most two
//! device flushes: the one running when they came and the one they share.

use std::cell::RefCell;
use std::rc::Rc;

use tracing::Instrument;

use ziob_backends::{DeviceError, ZonedDevice};

use super::zone::ZoneOp;
use super::Shard;
use crate::error::{Result, ZiobError};
use crate::metrics::OpKind;
use crate::metrics::OpTimer;

/// A shard's device flushes: started, wanted and completed, by number (1, 2, ...).
pub(crate) struct FlushGroup {
    /// Device flushes started.
    started: u64,
    /// The highest flush number a caller waits for.
    wanted: u64,
    /// A flush task is running.
    running: bool,
    /// The number of the last completed flush and its error, if it failed.
    done: (u64, Option<DeviceError>),
}

impl FlushGroup {
    pub(crate) fn new() -> FlushGroup {
        FlushGroup {
            started: 0,
            wanted: 0,
            running: false,
            done: (0, None),
        }
    }
}

/// Shorthand for the shard's flush group cell.
pub(crate) type FlushGroupCell = RefCell<FlushGroup>;

impl<D: ZonedDevice> Shard<D> {
    /// Flushes the device's write cache: waits for a device flush that started after this
    /// call, sharing it with every caller that arrived while the previous one ran.
    ///
    /// Cancel safety: dropping the call stops nothing (the flush runs in its own task) and
    /// promises nothing.
    pub(crate) async fn device_flush(self: &Rc<Self>) -> Result<()> {
        let ticket = {
            let mut g = self.flush_group.borrow_mut();
            // The next flush to start: one running now began before this call.
            let ticket = g.started + 1;
            g.wanted = g.wanted.max(ticket);
            let start = !g.running;
            g.running = true;
            drop(g);
            if start {
                ziob_runtime::spawn(self.clone().flush_task()).detach();
            }
            ticket
        };
        self.wait_until(|s| s.flush_group.borrow().done.0 >= ticket)
            .await;
        match &self.flush_group.borrow().done.1 {
            None => Ok(()),
            Some(e) => Err(share_error(e)),
        }
    }

    /// Runs device flushes while somebody waits for one not yet started.
    async fn flush_task(self: Rc<Self>) {
        loop {
            let n = {
                let mut g = self.flush_group.borrow_mut();
                if g.started >= g.wanted {
                    g.running = false;
                    return;
                }
                g.started += 1;
                g.started
            };
            // What the device has now (completed write-backs) is durable once it succeeds —
            // except in a zone being reset: the reset may complete after this flush began,
            // and a flush covers only what completed before it. Only zones with something
            // to credit are noted (usually the few being written: no allocation otherwise).
            let covered: Vec<(usize, u64, u64)> = self
                .zones
                .borrow()
                .iter()
                .enumerate()
                .filter(|(_, z)| z.op != ZoneOp::Resetting && z.durable_wp != Some(z.device_wp))
                .map(|(i, z)| (i, z.generation, z.device_wp))
                .collect();
            let timer = OpTimer::start(&self.stats, OpKind::DeviceFlush);
            let res = self
                .device
                .flush()
                .instrument(tracing::debug_span!("device_flush", core = self.core, n))
                .await
                .err();
            drop(timer);
            if res.is_none() {
                let mut zones = self.zones.borrow_mut();
                for (i, generation, wp) in covered {
                    let z = &mut zones[i];
                    if z.generation == generation {
                        let covered = wp.min(z.device_wp);
                        z.durable_wp = Some(z.durable_wp.map_or(covered, |d| d.max(covered)));
                    }
                }
            }
            self.stats.borrow_mut().s.device_flushes += 1;
            self.flush_group.borrow_mut().done = (n, res);
            self.notify();
        }
    }
}

/// The error of a shared device flush, for each of its callers: the device's own error
/// where it can be copied (an I/O error keeps its OS error code and kind), else an I/O error
/// of the same text.
fn share_error(e: &DeviceError) -> ZiobError {
    let io = |source: &std::io::Error| match source.raw_os_error() {
        Some(code) => std::io::Error::from_raw_os_error(code),
        None => std::io::Error::new(source.kind(), source.to_string()),
    };
    match e {
        DeviceError::Io { context, source } => DeviceError::Io {
            context: context.clone(),
            source: io(source),
        },
        other => DeviceError::Io {
            context: "device flush".into(),
            source: std::io::Error::other(other.to_string()),
        },
    }
    .into()
}
