//! The same workloads through ZIOB: one core, QD tasks, each looping on one op.
//!
//! QD = N means N spawned tasks, each issuing its next op as soon as the previous one
//! completes — the shape applications have, and the shape every peer runtime is measured
//! in. For the yield workload each task yields with [`ziob_runtime::yield_now`], which goes
//! through the task's waker and the core's run queue as an op's completion does.
//!
//! The `fixed` variant gives each task a registered buffer (`DmaBuf::fixed`) and registers
//! the file with the core's ring; the plain variant uses pooled `DmaBuf`s on a plain
//! descriptor.

use std::rc::Rc;

use ziob_runtime::{fs::OpenOptions, DmaBuf, Runtime, SubmitPolicy};

use crate::meter::{Meter, Sample};
use crate::rng::XorShift;
use crate::spec::{Mode, RunSpec, Workload, BLOCK_SIZE_BYTES};

/// Smallest ring the benchmark asks for (entries).
const RING_ENTRIES_MIN: u32 = 256;

/// Counters the runtime reports for one run, next to the sample.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct ZiobExtra {
    /// Reads that used a registered buffer.
    pub fixed_taken: u64,
    /// `DmaBuf::fixed` requests served by a plain buffer.
    pub fixed_fallbacks: u64,
    /// Whether the file was registered with the ring.
    pub file_registered: bool,
}

/// Runs `spec` on a one-core runtime.
pub fn run(spec: &RunSpec, fixed: bool, eager: bool) -> Result<(Sample, ZiobExtra), String> {
    let qd = spec.qd;
    // `ziob` runners use the runtime's default policy (Adaptive); `-eager` forces Eager.
    let policy = if eager {
        SubmitPolicy::Eager
    } else {
        SubmitPolicy::Adaptive
    };
    let mut builder = Runtime::builder()
        .cores(1)
        .ring_entries(RING_ENTRIES_MIN.max((qd as u32 * 2).next_power_of_two()))
        .submit_policy(policy);
    if fixed && spec.workload == Workload::Randread {
        builder = builder.fixed_buffers(qd as u32, BLOCK_SIZE_BYTES as usize);
    }
    let rt = builder.build().map_err(|e| format!("runtime: {e}"))?;
    let spec = spec.clone();
    let out = rt
        .run_on(0, move || async move { run_on_core(spec, fixed).await })
        .map_err(|e| format!("run_on: {e}"))?;
    drop(rt);
    out
}

async fn run_on_core(spec: RunSpec, fixed: bool) -> Result<(Sample, ZiobExtra), String> {
    let mut extra = ZiobExtra::default();
    let file = match spec.workload {
        Workload::Nop | Workload::Yield => None,
        Workload::Randread => {
            let f = OpenOptions::new()
                .read(true)
                .direct(spec.mode == Mode::Direct)
                .open(&spec.path)
                .await
                .map_err(|e| format!("open {}: {e}", spec.path.display()))?;
            if fixed {
                extra.file_registered = f.register().map_err(|e| format!("register: {e}"))?;
            }
            Some(f)
        }
    };
    let meter = Rc::new(Meter::new(
        spec.warmup,
        spec.duration,
        Some(Box::new(|| ziob_runtime::core_stats().enters)),
    ));
    let blocks = spec.blocks_count();
    let workload = spec.workload;
    let mut tasks = Vec::with_capacity(spec.qd);
    for i in 0..spec.qd {
        let meter = meter.clone();
        let file = file.clone();
        let task = ziob_runtime::spawn(async move {
            match file {
                None if workload == Workload::Yield => loop {
                    ziob_runtime::yield_now().await;
                    if !meter.tick() {
                        return Ok::<(), String>(());
                    }
                },
                None => loop {
                    ziob_runtime::nop().await.map_err(|e| format!("nop: {e}"))?;
                    if !meter.tick() {
                        return Ok::<(), String>(());
                    }
                },
                Some(file) => {
                    let mut rng = XorShift::new(i as u64);
                    let mut buf = if fixed {
                        DmaBuf::fixed(BLOCK_SIZE_BYTES as usize)
                    } else {
                        DmaBuf::with_capacity(BLOCK_SIZE_BYTES as usize)
                    };
                    loop {
                        let off = rng.block_index(blocks) * BLOCK_SIZE_BYTES;
                        let (res, b) = file.read_at(buf, off).await;
                        buf = b;
                        match res {
                            Ok(n) if n as u64 == BLOCK_SIZE_BYTES => {}
                            Ok(n) => return Err(format!("short read of {n} bytes at {off}")),
                            Err(e) => return Err(format!("read at {off}: {e}")),
                        }
                        if !meter.tick() {
                            return Ok(());
                        }
                    }
                }
            }
        });
        tasks.push(task);
    }
    for t in tasks {
        t.await?;
    }
    let stats = ziob_runtime::buf::pool_stats();
    extra.fixed_taken = stats.fixed_taken;
    extra.fixed_fallbacks = stats.fixed_fallbacks;
    if let Some(f) = file {
        let _ = f.close().await;
    }
    Ok((meter.sample()?, extra))
}
