//! Diagnostics of the binaries: a [`tracing`] subscriber that prints to stderr.
//!
//! The library only emits events (a damaged emu zone table it fell back from, failed
//! write-backs, a task that panicked, ...); a program decides where they go. The `ziob` CLI
//! and the benchmark binaries call [`init`](crate::logging::init) first thing, so those warnings are seen.

use std::io::IsTerminal;

use tracing_subscriber::filter::{EnvFilter, LevelFilter};

/// The environment variable that selects what is printed, in
/// [`EnvFilter`] syntax (`debug`, `ziob=info,ziob_backends=debug`, ...).
pub const FILTER_ENV: &str = "RUST_LOG";

/// Installs a subscriber that prints events to stderr, filtered by `RUST_LOG` (default:
/// `warn`, so warnings and errors are shown). Colours only when stderr is a terminal.
///
/// Idempotent: when a global subscriber is already set (a second call, or the program set
/// its own), this does nothing. Unparsable `RUST_LOG` directives are skipped, the rest apply.
pub fn init() {
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::WARN.into())
        .with_env_var(FILTER_ENV)
        .from_env_lossy();
    let _already_set = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
