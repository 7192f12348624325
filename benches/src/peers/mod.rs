//! Peer runtimes measured in the same run (feature `peers`): each in the same shape as the
//! ZIOB runner — QD local tasks, each looping on a 4 KiB read at a random aligned offset —
//! and counted by the same [`Meter`](crate::meter::Meter).

use crate::meter::Sample;
use crate::spec::{RunSpec, Runner};

/// Runs `spec` on the peer `runner`.
pub fn run(_spec: &RunSpec, runner: Runner) -> Result<Sample, String> {
    Err(format!("{runner}: not implemented yet"))
}
