//! `log-server`: serves named logs over HTTP (routes: docs/LOG-SERVER.md).
//!
//! ```text
//! cargo run --release -p log-server -- [--dev emu:/var/tmp/log-server.zns]
//!     [--listen 127.0.0.1:8080] [--store ziob|file] [--dir /var/tmp/log-server-files]
//! ```
//! Ctrl-C or SIGTERM stops it gracefully: no new connections, requests in flight finish,
//! then every acknowledged record is made durable.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, ValueEnum};
use log_server::store::file::FileStore;
use log_server::store::zone::{create_emu_if_missing, ZoneStore};
use log_server::{serve, ApiOptions, LogStore};
use ziob::ZiobConfig;

/// Which storage the routes use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum StoreKind {
    /// ZIOB's ZoneLog on `--dev`.
    Ziob,
    /// One plain file per log in `--dir`, fdatasync group commit.
    File,
}

/// An HTTP log service over ZIOB's ZoneLog (or plain files, for comparison).
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Zoned device (`--store ziob`); a missing emu file is created with `--create-*`.
    #[arg(long, default_value = "emu:/var/tmp/log-server.zns")]
    dev: String,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Storage behind the routes.
    #[arg(long, value_enum, default_value_t = StoreKind::Ziob)]
    store: StoreKind,
    /// Directory of the file store (`--store file`).
    #[arg(long, default_value = "/var/tmp/log-server-files")]
    dir: PathBuf,
    /// Largest record (request body) in bytes.
    #[arg(long, default_value_t = ApiOptions::default().record_bytes_max)]
    record_bytes_max: usize,
    /// Zones of a newly created emu device.
    #[arg(long, default_value_t = 64)]
    create_zones: u32,
    /// Zone size of a newly created emu device (bytes, or with a K/M/G suffix).
    #[arg(long, default_value = "64M", value_parser = parse_size)]
    create_zone_size: u64,
    /// ZIOB cores (threads next to tokio's).
    #[arg(long, default_value_t = 1)]
    ziob_cores: usize,
    /// Tokio worker threads.
    #[arg(long, default_value_t = 2)]
    tokio_threads: usize,
}

fn parse_size(s: &str) -> Result<u64, String> {
    ziob::backends::parse_size_bytes(s).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    ziob::logging::init();
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("log-server: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<(), String> {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.tokio_threads.max(1))
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    match args.store {
        StoreKind::File => {
            let store = tokio
                .block_on(FileStore::open(&args.dir))
                .map_err(|e| e.to_string())?;
            tracing::info!(dir = %args.dir.display(), "file store open");
            tokio.block_on(serve_until_signal(Arc::new(store), &args))
        }
        StoreKind::Ziob => {
            // ZIOB's cores run next to tokio's workers; the store reaches them through a
            // `ziob::Client`.
            let ziob_rt = ziob::backends::runtime_builder_for(&args.dev)
                .cores(args.ziob_cores.max(1))
                .build()
                .map_err(|e| format!("ZIOB runtime: {e}"))?;
            let geometry = ziob::Geometry::new(args.create_zones, args.create_zone_size);
            let store = tokio.block_on(async {
                if create_emu_if_missing(&ziob_rt.handle(), &args.dev, geometry).await? {
                    tracing::info!(dev = %args.dev, zones = args.create_zones, zone_size = args.create_zone_size, "created the emu device");
                }
                ZoneStore::open(ziob_rt.handle(), &args.dev, ZiobConfig::default()).await
            });
            let store = store.map_err(|e| e.to_string())?;
            tracing::info!(dev = %args.dev, "zone store open");
            let served = tokio.block_on(serve_until_signal(Arc::new(store), &args));
            // The store was closed (synced) by `serve`; tokio goes first, then ZIOB's cores.
            drop(tokio);
            drop(ziob_rt);
            served
        }
    }
}

/// Serves until Ctrl-C or SIGTERM, then shuts down gracefully.
async fn serve_until_signal<S: LogStore>(store: Arc<S>, args: &Args) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("listen on {}: {e}", args.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    // The load test and the integration test wait for this line.
    println!(
        "log-server: listening on http://{addr} (store {})",
        store.kind()
    );
    let options = ApiOptions {
        record_bytes_max: args.record_bytes_max,
        ..ApiOptions::default()
    };
    serve(store, listener, options, stop_signal())
        .await
        .map_err(|e| e.to_string())
}

/// Completes on Ctrl-C (SIGINT) or SIGTERM.
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT"),
        _ = term.recv() => tracing::info!("SIGTERM"),
    }
}
