//! The seeded simulation harness shared by `sim_mem.rs` and `sim_emu.rs` (see
//! `docs/TESTING.md`). One seed decides everything the harness chooses: the geometry and
//! configuration, every worker's operations and sizes, which operation futures are dropped
//! and when, which device ops fail, and where each power cut falls. The interleaving of the
//! two runtime cores is real (threads), so a seed replays the same plan, not the same
//! schedule.
//!
//! Modules, one job each: `rng` (the seeded generator), `data` (self-identifying payloads),
//! `settings` (seed → geometry, configuration, plan sizes), `ops` (the operation generator),
//! `cancel` (poll-budget and timer wrappers that drop futures), `model` (the reference model
//! of acknowledged and durable bytes), `checker` (what an answer may be), `zone_locks` (the
//! harness's own per-zone ordering), `worker` (runs one worker's plan against the model), `driver` (epochs, power cuts, recovery checks, the
//! watchdog) and `runner` (environment knobs, seed loop, failure report).

pub mod cancel;
pub mod checker;
pub mod data;
pub mod driver;
pub mod model;
pub mod ops;
pub mod rng;
pub mod runner;
pub mod settings;
pub mod worker;
pub mod zone_locks;
