//! `log-server`: an HTTP service on tokio + axum that stores named logs of records, either in
//! ZIOB's `ZoneLog` through a `ziob::Client` or, as the load test's peer, in plain files with
//! `fdatasync` group commit. Routes, formats and durability: `docs/LOG-SERVER.md`.
//!
//! Layers, each only using the ones below: `server` (graceful shutdown) → `api` (routes,
//! validation, metrics) → `store` (the [`LogStore`] trait and its implementations) → `name`,
//! `position`.

pub mod api;
pub mod name;
pub mod position;
pub mod server;
pub mod store;

pub use api::ApiOptions;
pub use name::LogName;
pub use position::Position;
pub use server::{serve, ServeError};
pub use store::{Durability, LogStore, StoreError};
