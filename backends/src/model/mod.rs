//! The zoned device model: geometry, zone states and transitions, errors and device specs.

pub mod error;
pub mod geometry;
pub mod spec;
pub mod state;
