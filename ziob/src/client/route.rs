//! One hop to a core: runs a closure with the shard of the core that owns a zone (or with
//! every shard), through [`ziob_runtime::Handle::call`], and maps runtime errors.

use std::future::Future;
use std::rc::Rc;

use tracing::Instrument;
use ziob_backends::ZonedDevice;

use super::Client;
use crate::error::{Result, ZiobError};
use crate::shard::Shard;

/// The result of a call that went through [`ziob_runtime::Handle::call`]: a core shut down
/// with its runtime is [`ZiobError::RuntimeStopped`].
pub(super) fn flatten<T>(res: ziob_runtime::Result<Result<T>>) -> Result<T> {
    match res {
        Ok(Err(ZiobError::Runtime(e))) | Err(e) => Err(ZiobError::from_runtime(e)),
        Ok(r) => r,
    }
}

impl<D: ZonedDevice> Client<D> {
    /// Runs `f` with the shard of `core`, on that core, as an admitted call, inside a
    /// debug-level `tracing` span `client` (fields `op`, `core`) on both sides (a `read`
    /// served inline, see [`Client::read`], has none).
    pub(super) fn on_core<F, Fut, T>(
        &self,
        op: &'static str,
        core: usize,
        f: F,
    ) -> impl Future<Output = Result<T>> + Send + 'static
    where
        F: FnOnce(Rc<Shard<D>>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T>> + 'static,
        T: Send + 'static,
    {
        let ziob = self.ziob.clone();
        let span = tracing::debug_span!("client", op, core);
        let on_core_span = span.clone();
        let call = self.ziob.runtime_handle().call(core, move || {
            async move { ziob.on_local(f).await }.instrument(on_core_span)
        });
        async move { flatten(call.await) }.instrument(span)
    }

    /// Runs `f` with the shard owning `zone`, on its core.
    pub(super) fn on_owner<F, Fut, T>(
        &self,
        op: &'static str,
        zone: u32,
        f: F,
    ) -> impl Future<Output = Result<T>> + Send + 'static
    where
        F: FnOnce(Rc<Shard<D>>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T>> + 'static,
        T: Send + 'static,
    {
        self.on_core(op, self.owner_core(zone), f)
    }

    /// Runs `f` with every shard, on its core, all at once; results in core order.
    pub(super) fn on_every_core<F, Fut, T>(
        &self,
        op: &'static str,
        f: F,
    ) -> impl Future<Output = Result<Vec<T>>> + Send + 'static
    where
        F: FnOnce(Rc<Shard<D>>) -> Fut + Send + Clone + 'static,
        Fut: Future<Output = Result<T>> + 'static,
        T: Send + 'static,
    {
        let calls: Vec<_> = (0..self.cores())
            .map(|core| self.on_core(op, core, f.clone()))
            .collect();
        async move { futures::future::join_all(calls).await.into_iter().collect() }
    }
}
