//! Seeded simulation over `mem:` with device faults and simulated power loss: many tasks on
//! both cores append, write, read, flush, sync, reset, finish and close concurrently, some
//! futures are dropped mid-flight, and after every power cut what a completed flush/sync
//! covered must read back exactly. See `docs/TESTING.md` for the knobs and how to replay.

mod sim;

use sim::settings::Backend;

/// Seeds a default run covers (about 21 ms each: ~40 s on a 2-core debug build).
const DEFAULT_SEEDS: u64 = 2000;

#[test]
fn seeded_simulation_over_mem() {
    sim::runner::run_seeds(Backend::Mem, "sim_mem", DEFAULT_SEEDS);
}
