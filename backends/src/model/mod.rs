//! The zoned device model: the zone vocabulary (`zone`), geometry, the state machine
//! (`state`), errors and device specs. Dependencies point one way: `zone` ← `error` ←
//! `geometry` ← `state`.

pub mod error;
pub mod geometry;
pub mod spec;
pub mod state;
pub mod zone;
