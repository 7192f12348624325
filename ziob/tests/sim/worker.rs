//! One worker task: runs its planned operations against the instance and records every
//! result in the model; the first wrong answer ends the seed.

use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard};

use ziob::{AnyDevice, DmaBuf, Ziob, ZoneAction, ZoneTarget};

use super::cancel;
use super::checker;
use super::data::op_bytes;
use super::model::Model;
use super::ops::{Cancel, OpKind, PlannedOp};
use super::zone_locks::ZoneLocks;

/// What a task tells the driver.
#[derive(Debug)]
pub enum Event {
    /// The instance is open (and the recovery check, if any, passed).
    Opened,
    /// A worker finished its plan.
    WorkerDone,
    /// The planned number of operations completed: cut the power now.
    CutPoint,
    /// A wrong answer, a panic or a lost task.
    Failed(String),
}

/// Everything a worker needs.
pub struct Worker {
    /// Worker number.
    pub index: usize,
    /// The instance under test.
    pub ziob: Ziob<AnyDevice>,
    /// The shared model.
    pub model: Arc<Mutex<Model>>,
    /// The harness's zone locks.
    pub locks: Arc<ZoneLocks>,
    /// Where to report.
    pub events: Sender<Event>,
    /// Whether device faults are injected this epoch.
    pub faults: bool,
    /// Cut the power once this many operations completed.
    pub cut_after: Option<u64>,
    /// Close the instance before this operation of the plan.
    pub close_at: Option<usize>,
}

/// Reports a worker that ended without finishing (a panic unwinding through it), unless the
/// epoch is being cut.
struct LostGuard {
    index: usize,
    model: Arc<Mutex<Model>>,
    events: Sender<Event>,
    armed: bool,
}

impl Drop for LostGuard {
    fn drop(&mut self) {
        if self.armed && !lock(&self.model).cutting {
            let _ = self.events.send(Event::Failed(format!(
                "worker {} ended in the middle of an operation (a panic?)",
                self.index
            )));
        }
    }
}

/// Locks the model (a panic elsewhere does not make it unusable).
pub fn lock(m: &Mutex<Model>) -> MutexGuard<'_, Model> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Worker {
    /// Runs `plan`; reports [`Event::WorkerDone`] or [`Event::Failed`].
    pub async fn run(self, plan: Vec<PlannedOp>) {
        let mut guard = LostGuard {
            index: self.index,
            model: self.model.clone(),
            events: self.events.clone(),
            armed: true,
        };
        let close = PlannedOp {
            kind: OpKind::Close,
            cancel: Cancel::Never,
        };
        for i in 0..=plan.len() {
            let mut todo = Vec::new();
            if self.close_at == Some(i) {
                todo.push(close);
            }
            if let Some(op) = plan.get(i) {
                todo.push(*op);
            }
            if lock(&self.model).cutting {
                // The power cut is under way: a worker starts nothing more (what it would
                // start now would meet cores already gone), as the cut's own ops stop.
                guard.armed = false;
                return;
            }
            for op in todo {
                if let Err(msg) = self.execute(op).await {
                    guard.armed = false;
                    let _ = self
                        .events
                        .send(Event::Failed(format!("worker {}: {msg}", self.index)));
                    return;
                }
            }
        }
        guard.armed = false;
        let _ = self.events.send(Event::WorkerDone);
    }

    fn model(&self) -> MutexGuard<'_, Model> {
        lock(&self.model)
    }

    async fn execute(&self, op: PlannedOp) -> Result<(), String> {
        let (token, started) = self.model().begin(format!("w{} {op}", self.index));
        let outcome = self.dispatch(op, started).await;
        let completed = {
            let mut m = self.model();
            let text = match &outcome {
                Ok(text) => text.clone(),
                Err(e) => format!("FAILED: {e}"),
            };
            m.end(token, &text);
            m.completed
        };
        if self.cut_after == Some(completed) {
            let _ = self.events.send(Event::CutPoint);
        }
        outcome.map(|_| ())
    }

    /// Judges an error the API returned.
    fn judge(&self, e: &ziob::ZiobError, kind: &OpKind) -> Result<String, String> {
        let (closing, zone_wild) = {
            let m = self.model();
            let wild = match *kind {
                OpKind::Append { zone, .. } | OpKind::WriteAtWp { zone, .. } => {
                    m.zones[zone as usize].wild.is_some()
                }
                _ => false,
            };
            (m.closing, wild)
        };
        checker::allowed_error(e, kind, self.faults, closing, zone_wild)?;
        Ok(format!("error {e}"))
    }

    fn dropped(&self) -> Result<String, String> {
        self.model().dropped += 1;
        Ok("dropped".into())
    }

    async fn dispatch(&self, op: PlannedOp, started: u64) -> Result<String, String> {
        let z = &self.ziob;
        let kind = op.kind;
        match kind {
            OpKind::Append { zone, len } | OpKind::WriteAtWp { zone, len } => {
                let _held = self.locks.shared(zone).await;
                let at = match kind {
                    OpKind::WriteAtWp { .. } => match z.report(zone, 1).await {
                        Ok(r) => Some(r[0].write_pointer_bytes),
                        Err(e) => return self.judge(&e, &kind),
                    },
                    _ => None,
                };
                let id = self.model().issue(zone, len as u64);
                let data = DmaBuf::from_slice(&op_bytes(id, len));
                let res = match at {
                    Some(at) => cancel::run(z.write_at(zone, at, data), op.cancel)
                        .await
                        .map(|r| r.map(|()| at)),
                    None => cancel::run(z.append(zone, data), op.cancel).await,
                };
                match res {
                    None => self.dropped(),
                    Some(Ok(off)) => {
                        self.model().ack(zone, id, off, len as u64)?;
                        Ok(format!("ok at {off} (op {id})"))
                    }
                    Some(Err(e)) => self.judge(&e, &kind),
                }
            }
            OpKind::Read { zone, offset, len } => {
                let _held = self.locks.shared(zone).await;
                match cancel::run(z.read(zone, offset, len), op.cancel).await {
                    None => self.dropped(),
                    Some(Ok(buf)) => {
                        if buf.len() != len {
                            return Err(format!("{kind:?} returned {} bytes", buf.len()));
                        }
                        checker::check_live_read(&self.model(), zone, started, offset, &buf)?;
                        Ok("ok, checked".into())
                    }
                    Some(Err(e)) => self.judge(&e, &kind),
                }
            }
            OpKind::Flush { zone } => {
                let _held = self.locks.shared(zone).await;
                let started = self.model().begin_marker();
                match cancel::run(z.flush(zone), op.cancel).await {
                    None => self.dropped(),
                    Some(Ok(())) => {
                        self.model().flush_ok(zone, started, "flush");
                        Ok("ok".into())
                    }
                    Some(Err(e)) => self.judge(&e, &kind),
                }
            }
            OpKind::Sync => {
                let _held = self.locks.shared_all().await;
                let started = self.model().begin_marker();
                match cancel::run(z.sync(), op.cancel).await {
                    None => self.dropped(),
                    Some(Ok(())) => {
                        let mut m = self.model();
                        for zone in 0..m.zones.len() as u32 {
                            m.flush_ok(zone, started, "sync");
                        }
                        Ok("ok".into())
                    }
                    Some(Err(e)) => self.judge(&e, &kind),
                }
            }
            OpKind::Reset { zone } | OpKind::Finish { zone } => {
                let _held = self.locks.exclusive(zone).await;
                let action = match kind {
                    OpKind::Reset { .. } => ZoneAction::Reset,
                    _ => ZoneAction::Finish,
                };
                let started = {
                    let mut m = self.model();
                    m.zones[zone as usize].reset_in_flight = action == ZoneAction::Reset;
                    m.begin_marker()
                };
                let res =
                    cancel::run(z.zone_action(action, ZoneTarget::One(zone)), op.cancel).await;
                {
                    let mut m = self.model();
                    if m.cutting
                        && matches!(
                            res,
                            Some(Err(ziob::ZiobError::Runtime(_)
                                | ziob::ZiobError::RuntimeStopped { .. }))
                        )
                    {
                        // The power cut is under way and a core the action needed is gone:
                        // its error (`CoreGone`) says nothing of whether the device carried
                        // it out, so a reset stays in flight, as for a task the cut killed
                        // (the recovery check allows either outcome).
                        return Ok("error during the power cut: outcome unknown".into());
                    }
                    m.zones[zone as usize].reset_in_flight = false;
                }
                match res {
                    None => {
                        self.model().make_wild(
                            zone,
                            format!("a dropped {action:?} (worker {})", self.index),
                        );
                        self.dropped()
                    }
                    Some(Ok(())) => {
                        let mut m = self.model();
                        match action {
                            ZoneAction::Reset => m.reset_ok(zone),
                            _ => m.finish_ok(zone, started),
                        }
                        Ok("ok".into())
                    }
                    Some(Err(e)) => self.judge(&e, &kind),
                }
            }
            OpKind::Open { zone } | OpKind::CloseZone { zone } => {
                let _held = self.locks.shared(zone).await;
                let action = match kind {
                    OpKind::Open { .. } => ZoneAction::Open,
                    _ => ZoneAction::Close,
                };
                match cancel::run(z.zone_action(action, ZoneTarget::One(zone)), op.cancel).await {
                    None => self.dropped(),
                    Some(Ok(())) => Ok("ok".into()),
                    Some(Err(e)) => self.judge(&e, &kind),
                }
            }
            OpKind::Report => {
                let _held = self.locks.shared_all().await;
                let started = self.model().begin_marker();
                let zones = z.geometry().zone_count;
                match cancel::run(z.report(0, zones), op.cancel).await {
                    None => self.dropped(),
                    Some(Ok(infos)) => {
                        checker::check_report(&self.model(), &infos, started)?;
                        Ok("ok, checked".into())
                    }
                    Some(Err(e)) => self.judge(&e, &kind),
                }
            }
            OpKind::Close => {
                let _held = self.locks.shared_all().await;
                let started = {
                    let mut m = self.model();
                    m.closing = true;
                    m.begin_marker()
                };
                match z.clone().close().await {
                    Ok(()) => {
                        let mut m = self.model();
                        let now = m.begin_marker();
                        m.close_ok = Some((started, now));
                        Ok("ok".into())
                    }
                    Err(e) => self.judge(&e, &kind),
                }
            }
        }
    }
}
