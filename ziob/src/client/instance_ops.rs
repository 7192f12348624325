//! Operations on the whole instance: sync, report, stats and close go to every core at once;
//! [`Client::with_ziob`] runs any code on a core.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};

use ziob_backends::{ZoneInfo, ZonedDevice};

use super::{route, Client};
use crate::error::{Result, ZiobError};
use crate::handle::Ziob;
use crate::metrics::ShardStats;

/// Where the next [`Client::with_ziob`] runs (round robin over the cores).
static NEXT_CORE: AtomicUsize = AtomicUsize::new(0);

impl<D: ZonedDevice> Client<D> {
    /// Flushes every zone on every core (see [`Ziob::sync`]): zones holding a kept write-back
    /// error and data the device does not have are listed in [`ZiobError::ZonesFailed`];
    /// every other zone is synced all the same.
    ///
    /// # Cancel safety
    /// As [`Client::flush`], for every zone.
    pub fn sync(&self) -> impl Future<Output = Result<()>> + Send + 'static {
        let all = self.on_every_core("sync", |s| async move { Ok(s.sync().await) });
        async move { ZiobError::merge_sync(all.await?) }
    }

    /// Report Zones as the buffer shows them: `count` zones from `first` (see
    /// [`Ziob::report`]).
    ///
    /// # Cancel safety
    /// Changes nothing; dropping it is always safe.
    pub fn report(
        &self,
        first: u32,
        count: u32,
    ) -> impl Future<Output = Result<Vec<ZoneInfo>>> + Send + 'static {
        let checked = self.ziob.geometry().check_zone(first);
        let all = self.on_every_core(
            "report",
            move |s| async move { s.report(first, count).await },
        );
        async move {
            checked?;
            let mut zones: Vec<ZoneInfo> = all.await?.into_iter().flatten().collect();
            zones.sort_by_key(|z| z.index);
            Ok(zones)
        }
    }

    /// Statistics of every shard, in core order.
    ///
    /// # Cancel safety
    /// Changes nothing; dropping it is always safe.
    pub fn stats(&self) -> impl Future<Output = Result<Vec<ShardStats>>> + Send + 'static {
        self.on_every_core("stats", |s| async move { Ok(s.stats()) })
    }

    /// Latency histograms and counters of every shard, merged (see [`Ziob::metrics`]); publish
    /// them with [`MetricsSnapshot::publish`](crate::MetricsSnapshot::publish).
    ///
    /// # Cancel safety
    /// Changes nothing; dropping it is always safe.
    pub fn metrics(&self) -> impl Future<Output = Result<crate::MetricsSnapshot>> + Send + 'static {
        let cores = self.on_every_core("metrics", |s| async move { Ok(s.metrics()) });
        async move { Ok(crate::MetricsSnapshot::from_cores(cores.await?)) }
    }

    /// Closes the instance for every handle (see [`Ziob::close`]): new calls fail with
    /// [`ZiobError::Closed`], the calls admitted finish, then every shard syncs and stops.
    /// Every append acknowledged before is durable once this returns `Ok`.
    ///
    /// # Cancel safety
    /// Once started, each shard's close runs to the end even if this call is dropped; the
    /// instance is closed either way, and a dropped close does not report the sync's result.
    pub fn close(&self) -> impl Future<Output = Result<()>> + Send + 'static {
        let ziob = self.ziob.clone();
        let call = self.ziob.runtime_handle().call(0, move || ziob.close());
        async move { route::flatten(call.await) }
    }

    /// Runs the future `f` makes with a [`Ziob`] handle of this instance on a ZIOB core
    /// (the cores take turns), for anything the client has no method for. `f`'s future need
    /// not be `Send`; `T` must be.
    ///
    /// # Cancel safety
    /// Dropping the returned future drops `f`'s future on its core at its next await point;
    /// what that left done is up to that future.
    pub fn with_ziob<F, Fut, T>(&self, f: F) -> impl Future<Output = Result<T>> + Send + 'static
    where
        F: FnOnce(Ziob<D>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T>> + 'static,
        T: Send + 'static,
    {
        let core = NEXT_CORE.fetch_add(1, Ordering::Relaxed) % self.cores();
        let ziob = self.ziob.clone();
        let call = self.ziob.runtime_handle().call(core, move || f(ziob));
        async move { route::flatten(call.await) }
    }
}
