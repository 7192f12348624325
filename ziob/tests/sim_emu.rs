//! Seeded simulation over `emu:` (a temporary file with a latency model, so several
//! write-backs per zone are in flight): many tasks on both cores append, write, read, flush,
//! sync, reset, finish and close concurrently, some futures are dropped mid-flight, and a
//! power cut drops the whole runtime and reopens the file; what a completed flush/sync
//! covered must read back exactly. See `docs/TESTING.md` for the knobs and how to replay.

mod sim;

use sim::settings::Backend;

/// Seeds a default run covers (about 105 ms each: ~40 s on a 2-core debug build).
const DEFAULT_SEEDS: u64 = 400;

#[test]
fn seeded_simulation_over_emu() {
    sim::runner::run_seeds(Backend::Emu, "sim_emu", DEFAULT_SEEDS);
}
