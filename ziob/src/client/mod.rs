//! [`Client`]: a `Send + Sync` handle to a ZIOB instance for code that does not run on a ZIOB
//! core — tokio tasks, plain threads, FFI callers.
//!
//! Every operation travels to the core that owns its zone ([`crate::placement::owner_core`])
//! in one hop through [`ziob_runtime::Handle::call`] and answers through a channel: the
//! futures are `Send + 'static` and work on any executor (on the caller's side they only read
//! which ZIOB core, if any, they are polled on; on the owning core a call skips the mailbox,
//! and a small read of data in buffer memory is served inline). A read of what only the
//! device holds needs no hop ([`Client::read`]). Operations on every zone (sync, report,
//! stats, `ZoneTarget::All`) go to every core at once. [`BlockingClient`] has the same operations as plain blocking calls.
//!
//! Modules by job: `route` (one hop to a core, error mapping), `zone_ops` (appends, writes,
//! reads, flush, zone actions), `instance_ops` (sync, report, stats, close, `with_ziob`),
//! `blocking` (the blocking form).

mod blocking;
mod instance_ops;
mod route;
mod zone_ops;

pub use blocking::BlockingClient;

use std::future::Future;

use ziob_backends::{AnyDevice, Geometry, ZonedDevice};

use crate::config::ZiobConfig;
use crate::error::Result;
use crate::handle::Ziob;

/// A handle to a ZIOB instance usable from any thread and any executor: `Clone + Send +
/// Sync`, and every operation's future is `Send + 'static` (except
/// [`read_into`](Client::read_into), which borrows the caller's buffer).
///
/// Get one from a running instance with [`Ziob::client`], or open an instance from outside
/// the runtime with [`Client::open`]. Each zone operation is sent straight to the core that
/// owns the zone and runs there exactly as the same [`Ziob`] call would (same durability,
/// backpressure and errors); the answer comes back through a channel.
///
/// ```
/// use ziob::{Client, Runtime, ZiobConfig};
/// let rt = Runtime::builder().cores(2).build().unwrap();
/// let open = Client::open(rt.handle(), "mem:zones=8,zone_size=1M", ZiobConfig::default());
/// // Any executor drives the futures; here a plain thread.
/// let client = futures::executor::block_on(open).unwrap();
/// futures::executor::block_on(async {
///     let off = client.append_slice(3, b"hello").await.unwrap();
///     assert_eq!(&client.read(3, off, 5).await.unwrap()[..], b"hello");
///     client.flush(3).await.unwrap();
///     client.close().await.unwrap();
/// });
/// ```
///
/// # Backpressure
/// As on the core: a shard whose memory budget is full makes the call wait until write-back
/// frees memory; it does not fail for that ([`ZiobError::BufferFull`](crate::ZiobError) only
/// when nothing can be written back).
///
/// # Shutdown and closing
/// When the runtime stops, calls in flight and later calls fail with
/// [`ZiobError::RuntimeStopped`](crate::ZiobError::RuntimeStopped) (or `Runtime(CoreDead)`
/// for a core that died); none hangs. When the last `Client` and [`Ziob`] handle of an
/// instance is dropped without [`close`](Client::close), the instance is closed in the
/// background (every shard syncs, then goes away; errors there are only logged). Call
/// [`close`](Client::close) to know that the data is durable.
///
/// # Cancel safety
/// Dropping a call's future drops the operation on its core at its next await point (or
/// before it starts); what was done then is exactly what the [`Ziob`] method says for a
/// dropped call:
///
/// | method | if the future is dropped |
/// |---|---|
/// | `append*`, `write_at*` | the data was written whole or not at all; the offset is not reported |
/// | `read`, `read_into`, `report`, `stats`, `metrics` | nothing changed |
/// | `flush`, `sync`, `write_back` | partial blocks may be padded and write-back started; nothing promised durable |
/// | `flush_device` | nothing promised durable; a device flush it started runs to its end |
/// | `reset`, `finish`, `zone_action` | if it reached the core it runs to the end; after a dropped reset treat the zone's contents as unknown |
/// | `close` | once started it runs to the end; the instance is closed either way |
/// | `with_ziob` | as the future `f` made |
/// | [`Client::open`] | shards already started stay idle until the runtime stops |
pub struct Client<D: ZonedDevice = AnyDevice> {
    ziob: Ziob<D>,
}

impl<D: ZonedDevice> Clone for Client<D> {
    fn clone(&self) -> Self {
        Client {
            ziob: self.ziob.clone(),
        }
    }
}

impl<D: ZonedDevice> std::fmt::Debug for Client<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("device", &self.ziob.view_name())
            .field("cores", &self.cores())
            .finish()
    }
}

impl Client<AnyDevice> {
    /// Opens the device named by `spec` (as [`Ziob::open`]) on the runtime of `handle`, from
    /// any thread: the instance is built on core 0 and its shards on every core (or on the
    /// first [`ZiobConfig::cores`]).
    ///
    /// # Cancel safety
    /// If dropped part-way, the shards already started hold no data and stay, idle, until
    /// the runtime stops (as [`Ziob::with_device`]).
    pub fn open(
        handle: ziob_runtime::Handle,
        spec: &str,
        config: ZiobConfig,
    ) -> impl Future<Output = Result<Client>> + Send + 'static {
        let spec = spec.to_string();
        let call = handle.call(0, move || async move {
            Ziob::open(&spec, config).await.map(|z| z.client())
        });
        async move { route::flatten(call.await) }
    }

    /// Builds an instance over an opened `device` (as [`Ziob::with_device`]) on the runtime
    /// of `handle`, from any thread: on core 0, its shards on every core (or on the first
    /// [`ZiobConfig::cores`]). For a device a test or tool opened itself, e.g. a
    /// [`MemDevice`](ziob_backends::MemDevice) with faults planned.
    ///
    /// # Cancel safety
    /// As [`Client::open`].
    pub fn with_device(
        handle: ziob_runtime::Handle,
        device: AnyDevice,
        config: ZiobConfig,
    ) -> impl Future<Output = Result<Client>> + Send + 'static {
        let call = handle.call(0, move || async move {
            Ziob::with_device(device, config).await.map(|z| z.client())
        });
        async move { route::flatten(call.await) }
    }
}

impl<D: ZonedDevice> Ziob<D> {
    /// A [`Client`] of this instance: `Send` futures, usable from any thread and executor.
    pub fn client(&self) -> Client<D> {
        Client::new(self.clone())
    }
}

impl<D: ZonedDevice> Client<D> {
    fn new(ziob: Ziob<D>) -> Client<D> {
        Client { ziob }
    }

    /// The device's geometry (see [`Ziob::geometry`]).
    pub fn geometry(&self) -> Geometry {
        *self.ziob.geometry()
    }

    /// The instance's settings (see [`Ziob::config`]).
    pub fn config(&self) -> &ZiobConfig {
        self.ziob.config()
    }

    /// Number of cores (and shards) the instance runs on.
    pub fn cores(&self) -> usize {
        self.ziob.cores()
    }

    /// The core that owns `zone`: where its operations run.
    pub fn owner_core(&self, zone: u32) -> usize {
        self.ziob.owner_core(zone)
    }

    /// The blocking form of this client, for plain threads and FFI callers.
    pub fn blocking(&self) -> BlockingClient<D> {
        BlockingClient::new(self.clone())
    }
}
