//! Peer runtimes measured in the same run (feature `peers`): each in the same shape as the
//! ZIOB runner — one core, QD local tasks, each looping on a 4 KiB read at a random aligned
//! offset — and counted by the same [`Meter`](crate::meter::Meter). The NOP workload runs on
//! the peers that expose `IORING_OP_NOP`: tokio-uring (`tokio_uring::no_op`) and glommio
//! (`glommio::nop::NopSubmitter`, behind glommio's `bench` feature); monoio 0.2.4 has no NOP
//! op, so it is not measured there (see [`Runner::unsupported_reason`]).

mod glommio_rt;
mod monoio_rt;
mod tokio_uring_rt;

use std::future::Future;

use crate::meter::{Meter, Sample};
use crate::rng::XorShift;
use crate::spec::{RunSpec, Runner, BLOCK_SIZE_BYTES};

/// Ring entries the peers are built with (as for ZIOB: at least 256, at least 2 × QD).
fn ring_entries(qd: usize) -> u32 {
    256u32.max((qd as u32 * 2).next_power_of_two())
}

/// Checks a read's byte count.
fn check_read(res: std::io::Result<usize>, off: u64) -> Result<(), String> {
    match res {
        Ok(n) if n as u64 == BLOCK_SIZE_BYTES => Ok(()),
        Ok(n) => Err(format!("short read of {n} bytes at {off}")),
        Err(e) => Err(format!("read at {off}: {e}")),
    }
}

/// One peer task: reads of 4 KiB at random aligned offsets below `blocks` blocks, seeded by
/// `task`, until the meter says stop. `read(buf, offset)` is the peer's read, handing `buf`
/// back (a peer without caller-owned buffers passes `()`).
async fn read_loop<B, F, Fut>(
    task: usize,
    blocks: u64,
    meter: &Meter,
    mut buf: B,
    mut read: F,
) -> Result<(), String>
where
    F: FnMut(B, u64) -> Fut,
    Fut: Future<Output = (std::io::Result<usize>, B)>,
{
    let mut rng = XorShift::new(task as u64);
    loop {
        let off = rng.block_index(blocks) * BLOCK_SIZE_BYTES;
        let (res, b) = read(buf, off).await;
        buf = b;
        check_read(res, off)?;
        if !meter.tick() {
            return Ok(());
        }
    }
}

/// One peer task of the NOP workload: `nop()` round trips until the meter says stop.
async fn nop_loop<F, Fut>(meter: &Meter, mut nop: F) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = std::io::Result<()>>,
{
    loop {
        nop().await.map_err(|e| format!("nop: {e}"))?;
        if !meter.tick() {
            return Ok(());
        }
    }
}

/// Runs `spec` on the peer `runner`.
pub fn run(spec: &RunSpec, runner: Runner) -> Result<Sample, String> {
    if let Some(why) = runner.unsupported_reason(spec.workload) {
        return Err(format!("{runner}: no {} workload ({why})", spec.workload));
    }
    match runner {
        Runner::TokioUring => tokio_uring_rt::run(spec),
        Runner::Monoio => monoio_rt::run(spec),
        Runner::Glommio => glommio_rt::run(spec),
        other => Err(format!("{other} is not a peer runtime")),
    }
}
