//! Serving the routes with graceful shutdown.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::api::{self, ApiOptions};
use crate::store::{LogStore, StoreError};

/// Why [`serve`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Accepting or serving connections failed.
    #[error("serving HTTP failed: {0}")]
    Http(#[from] std::io::Error),
    /// Closing the store (the final sync) failed: acknowledged records may not be durable.
    #[error("closing the store failed: {0}")]
    Close(#[from] StoreError),
}

/// Serves the routes over `store` on `listener` until `shutdown` completes; then stops
/// accepting, ends the open tails, lets the requests in flight finish, and closes the store
/// (which makes every acknowledged record durable). Returns once all of that is done.
pub async fn serve<S: LogStore>(
    store: Arc<S>,
    listener: TcpListener,
    options: ApiOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let (stopping_tx, stopping) = watch::channel(false);
    let router = api::router(store.clone(), options, stopping);
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            tracing::info!("shutting down: finishing requests in flight");
            stopping_tx.send_replace(true);
        })
        .await;
    // Close even when serving failed: what was acknowledged must become durable.
    let closed = store.close().await;
    served?;
    closed?;
    tracing::info!("store closed");
    Ok(())
}
