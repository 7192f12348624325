//! Runs one seed: epochs of concurrent work on a fresh runtime, each ended by a power cut
//! (mid-work, after the work, or after a `close`), each followed by a recovery check on the
//! next runtime. A watchdog turns a hang into a failure.

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use ziob::backends::{EmuDevice, Fault, LatencyModel, MemDevice};
use ziob::{AnyDevice, Runtime, Ziob};

use super::checker;
use super::model::{Model, ZoneModel};
use super::ops::plan_worker;
use super::rng::Rng;
use super::settings::{Backend, EpochEnd, Settings, CORES};
use super::worker::{lock, Event, Worker};
use super::zone_locks::ZoneLocks;

/// What one seed did.
#[derive(Debug, Default, Clone, Copy)]
pub struct SeedStats {
    /// Epochs run.
    pub epochs: u64,
    /// Operations finished.
    pub ops: u64,
    /// Operation futures dropped early.
    pub dropped: u64,
    /// Bytes acknowledged.
    pub acked_bytes: u64,
    /// Bytes checked after power cuts.
    pub verified_bytes: u64,
    /// Power cuts in the middle of the work.
    pub cuts_mid_work: u64,
    /// Epochs that ended with `close`.
    pub closes: u64,
}

impl SeedStats {
    /// Adds `o` to `self`.
    pub fn add(&mut self, o: &SeedStats) {
        self.epochs += o.epochs;
        self.ops += o.ops;
        self.dropped += o.dropped;
        self.acked_bytes += o.acked_bytes;
        self.verified_bytes += o.verified_bytes;
        self.cuts_mid_work += o.cuts_mid_work;
        self.closes += o.closes;
    }
}

/// The device of a seed, across its power cuts.
enum Device {
    Mem(MemDevice),
    Emu {
        path: PathBuf,
        _dir: tempfile::TempDir,
    },
}

impl Device {
    fn new(s: &Settings) -> Result<Device, String> {
        Ok(match s.backend {
            Backend::Mem => Device::Mem(
                MemDevice::new("mem:sim", &s.geometry).map_err(|e| format!("mem device: {e}"))?,
            ),
            Backend::Emu => {
                let dir = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
                Device::Emu {
                    path: dir.path().join("sim.zns"),
                    _dir: dir,
                }
            }
        })
    }

    /// After the runtime was dropped: `mem:` loses what was not flushed; `emu:` continues
    /// on a copy of the file as it is now (what the crash left on disk), so a task the
    /// runtime leaked at shutdown can neither hold the file nor write to it any more.
    fn power_cut(&mut self, epoch: usize) -> Result<(), String> {
        match self {
            Device::Mem(m) => {
                m.clear_faults();
                m.crash();
            }
            Device::Emu { path, _dir: dir } => {
                let next = dir.path().join(format!("sim-{}.zns", epoch + 1));
                std::fs::copy(&*path, &next).map_err(|e| format!("copy the device file: {e}"))?;
                let _ = std::fs::remove_file(&*path);
                *path = next;
            }
        }
        Ok(())
    }

    /// Opens the device on the current core (creating the emu file in the first epoch).
    async fn open(
        mem: Option<MemDevice>,
        path: Option<PathBuf>,
        s: &Settings,
        first: bool,
    ) -> Result<AnyDevice, String> {
        if let Some(m) = mem {
            return Ok(AnyDevice::Mem(m));
        }
        let path = path.expect("emu has a path");
        if first {
            drop(
                EmuDevice::create(&path, &s.geometry)
                    .await
                    .map_err(|e| format!("create: {e}"))?,
            );
        }
        let latency = LatencyModel {
            latency: Some(Duration::from_micros(s.emu_latency_us)),
            bandwidth_bytes_per_sec: s.emu_bandwidth_bytes_per_sec,
        };
        Ok(AnyDevice::Emu(
            EmuDevice::open(&path, latency)
                .await
                .map_err(|e| format!("reopen: {e}"))?,
        ))
    }
}

/// Runs seed `s`; `Err` carries the failure report (without the settings).
pub fn run_seed(s: &Settings, watchdog: Duration) -> Result<SeedStats, String> {
    let mut device = Device::new(s)?;
    let mut zones = vec![ZoneModel::default(); s.geometry.zone_count as usize];
    let mut next_op_id = 1;
    let mut stats = SeedStats::default();
    let rng = Rng::new(s.seed).fork(0xE90C);
    let mut previous_epoch = String::new();
    // One epoch per planned end, then one more that only checks recovery.
    for epoch in 0..=s.ends.len() {
        let end = s.ends.get(epoch).copied();
        let model = Arc::new(Mutex::new(Model::new(
            std::mem::take(&mut zones),
            s.geometry.zone_capacity_bytes,
            next_op_id,
        )));
        // Device faults hit the work only, never the recovery check (injected after it).
        let faults = matches!(device, Device::Mem(_)) && end.is_some() && s.faults_per_epoch > 0;
        let result = run_epoch(s, &device, epoch, end, &model, faults, &rng, watchdog);
        device.power_cut(epoch)?;
        // A task the runtime leaked at shutdown (woken after its core stopped) may still
        // hold the model: take its contents instead of the last reference.
        let model = std::mem::replace(
            &mut *lock(&model),
            Model::new(Vec::new(), s.geometry.zone_capacity_bytes, 0),
        );
        stats.epochs += 1;
        stats.ops += model.completed;
        stats.dropped += model.dropped;
        stats.acked_bytes += model.acked_bytes;
        match result {
            Ok(verified) => stats.verified_bytes += verified,
            Err(e) if e.starts_with("recovery check") => {
                return Err(format!(
                    "after epoch {} ({:?}): {e}\n  (the epoch before the cut:)\n{previous_epoch}",
                    epoch - 1,
                    s.ends[epoch - 1]
                ))
            }
            Err(e) => return Err(format!("epoch {epoch} ({end:?}): {e}")),
        }
        match end {
            Some(EpochEnd::CutAfterOps(_)) => stats.cuts_mid_work += 1,
            Some(EpochEnd::Close { .. }) => stats.closes += 1,
            _ => {}
        }
        previous_epoch = model.diagnosis();
        next_op_id = model.next_op_id();
        zones = model.into_zones();
    }
    Ok(stats)
}

/// One epoch on a fresh runtime: open, check what the last cut left, run the workers until
/// the planned end, then drop the runtime (every task dies where it is). Returns the bytes
/// the recovery check verified.
#[allow(clippy::too_many_arguments)]
fn run_epoch(
    s: &Settings,
    device: &Device,
    epoch: usize,
    end: Option<EpochEnd>,
    model: &Arc<Mutex<Model>>,
    faults: bool,
    rng: &Rng,
    watchdog: Duration,
) -> Result<u64, String> {
    let rt = Runtime::builder()
        .cores(CORES)
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let (tx, rx) = mpsc::channel::<Event>();
    let (verified_tx, verified_rx) = mpsc::channel::<u64>();
    let (debug_tx, debug_rx) = futures::channel::mpsc::unbounded::<mpsc::Sender<String>>();
    let workers = if end.is_some() { s.workers } else { 0 };
    let plans: Vec<_> = (0..workers)
        .map(|w| plan_worker(&mut rng.fork((epoch * 64 + w) as u64), s))
        .collect();
    let (cut_after, close) = match end {
        Some(EpochEnd::CutAfterOps(n)) => (Some(n), None),
        Some(EpochEnd::Close { worker, at_op }) => (None, Some((worker, at_op))),
        _ => (None, None),
    };
    let (mem, path) = match device {
        Device::Mem(m) => (Some(m.clone()), None),
        Device::Emu { path, .. } => (None, Some(path.clone())),
    };
    let task_settings = s.clone();
    let fault_rng = rng.fork(0xFA17 + epoch as u64);
    let task_model = model.clone();
    let spawned = rt.handle().spawn_on(0, move || async move {
        let s = task_settings;
        let fail = |msg: String| {
            let _ = tx.send(Event::Failed(msg));
        };
        let dev = match Device::open(mem.clone(), path, &s, epoch == 0).await {
            Ok(d) => d,
            Err(e) => return fail(e),
        };
        let ziob = match Ziob::with_device(dev, s.config.clone()).await {
            Ok(z) => z,
            Err(e) => return fail(format!("open: {e}")),
        };
        if epoch > 0 {
            match recover(&ziob, &task_model, &s).await {
                Ok(v) => {
                    let _ = verified_tx.send(v);
                }
                Err(e) => return fail(format!("recovery check: {e}")),
            }
        }
        if let (true, Some(m)) = (faults, &mem) {
            let mut r = fault_rng;
            let base = m.op_count();
            for _ in 0..s.faults_per_epoch {
                m.inject(Fault::FailOp {
                    op_index: base + r.range(0, 80),
                });
            }
        }
        let _ = tx.send(Event::Opened);
        let locks = ZoneLocks::new(s.geometry.zone_count as usize);
        for (index, plan) in plans.into_iter().enumerate() {
            let w = Worker {
                index,
                ziob: ziob.clone(),
                model: task_model.clone(),
                locks: locks.clone(),
                events: tx.clone(),
                faults,
                cut_after,
                close_at: close.filter(|c| c.0 == index).map(|c| c.1),
            };
            let core = index % CORES;
            if core == 0 {
                ziob::runtime::spawn(w.run(plan)).detach();
            } else if let Err(e) = ziob::runtime::spawn_on(core, move || w.run(plan)) {
                return fail(format!("spawn_on({core}): {e}"));
            }
        }
        // Stay to answer the watchdog's request for the buffer's state.
        let mut debug_rx = debug_rx;
        while let Some(reply) = debug_rx.next().await {
            let state = match ziob.debug_state().await {
                Ok(st) => st,
                Err(e) => format!("debug_state: {e}"),
            };
            let _ = reply.send(state);
        }
    });
    if let Err(e) = spawned {
        return Err(format!("spawn_on(0): {e}"));
    }
    let outcome = wait(&rx, workers, watchdog);
    let outcome = match outcome {
        Ok(()) => Ok(verified_rx.try_recv().unwrap_or(0)),
        Err(msg) => {
            let mut report = msg;
            let (reply_tx, reply_rx) = mpsc::channel();
            if debug_tx.unbounded_send(reply_tx).is_ok() {
                if let Ok(state) = reply_rx.recv_timeout(Duration::from_secs(3)) {
                    report += &format!("\n  buffer state:\n{state}");
                }
            }
            report += &format!("\n{}", lock(model).diagnosis());
            Err(report)
        }
    };
    lock(model).cutting = true;
    drop(debug_tx);
    shut_down(rt)?;
    outcome
}

/// Waits for the epoch's end: every worker done, or the cut point, or a failure; a hang
/// past the watchdog is a failure.
fn wait(rx: &Receiver<Event>, workers: usize, watchdog: Duration) -> Result<(), String> {
    let deadline = Instant::now() + watchdog;
    let mut opened = false;
    let mut done = 0;
    loop {
        if opened && done == workers {
            return Ok(());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Event::Opened) => opened = true,
            Ok(Event::WorkerDone) => done += 1,
            Ok(Event::CutPoint) => return Ok(()),
            Ok(Event::Failed(msg)) => return Err(msg),
            Err(RecvTimeoutError::Timeout) => {
                return Err(format!(
                    "HANG: the epoch did not finish within the {watchdog:?} watchdog ({done} of {workers} workers done, opened: {opened})"
                ))
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err("every task of the epoch is gone without reporting (a panic?)".into())
            }
        }
    }
}

/// Drops the runtime (the power cut: every task dies where it is) on a helper thread, so a
/// core that does not stop is reported instead of hanging the test.
fn shut_down(rt: Runtime) -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        drop(rt);
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .map_err(|_| "HANG: the runtime did not shut down within 10 s (a stuck core)".to_string())
}

/// The recovery check after a power cut: every zone read whole through the reopened buffer
/// and checked against the previous epoch's model; then the model restarts from what was
/// found. Returns the bytes verified.
async fn recover(
    ziob: &Ziob<AnyDevice>,
    model: &Mutex<Model>,
    s: &Settings,
) -> Result<u64, String> {
    let g = &s.geometry;
    let infos = ziob
        .report(0, g.zone_count)
        .await
        .map_err(|e| format!("report: {e}"))?;
    let mut verified = 0;
    for info in infos {
        let content = ziob
            .read(info.index, 0, g.zone_size_bytes as usize)
            .await
            .map_err(|e| format!("read zone {}: {e}", info.index))?;
        let mut m = lock(model);
        let z = &mut m.zones[info.index as usize];
        verified += checker::check_recovered(z, &info, &content, g.block_size_bytes)?;
        let data_end = if info.state == ziob::ZoneState::Full {
            g.zone_capacity_bytes
        } else {
            info.write_pointer_bytes
        };
        *z = ZoneModel::recovered(content[..data_end as usize].to_vec());
    }
    Ok(verified)
}
