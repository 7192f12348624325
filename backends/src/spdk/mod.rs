//! `spdk:` — an NVMe ZNS namespace driven by SPDK's userspace, polled-mode NVMe driver
//! (cargo feature `spdk`; needs an installed SPDK ≥ 25.09, see `docs/SPDK.md`).
//!
//! Spec: `spdk:ADDR[,nsid=N][,no_huge][,mem=SIZE][,qd=N][,bounce]` where `ADDR` is a PCI
//! address (`0000:00:04.0`) or an SPDK transport id string (`trtype:PCIe traddr:0000:00:04.0`).
//! `nsid` defaults to 1; `mem` is the SPDK/DPDK memory size (default 256M); `no_huge` runs
//! without hugepages (DPDK `--no-huge`, IOVA mode VA: only works with vfio and an IOMMU, not
//! with uio); `qd` is the I/O queue depth of each core's qpair; `bounce` copies every transfer
//! of this device through SPDK DMA buffers and does not install SPDK's allocator in the
//! runtime (to measure what zero copy saves).
//!
//! - The SPDK environment is initialised once per process, by the first `spdk:` open (later
//!   opens' `no_huge`/`mem` are ignored); each controller is attached once per process
//!   (`spdk_nvme_connect`) and shared by every handle and core.
//! - Each runtime core gets its own I/O qpair the first time it issues a command. While that
//!   core has commands in flight, a runtime poller calls `spdk_nvme_qpair_process_completions`
//!   every loop turn: the core busy-polls (100 % of a CPU) and never sleeps in the kernel.
//!   When the last command of the core completes, the poller is unregistered and the core may
//!   sleep again, so an idle SPDK device costs no CPU. Completion callbacks wake the waiting
//!   task exactly like an io_uring completion does.
//! - **Zero copy**: opening an `spdk:` device installs SPDK's DMA allocator
//!   (`spdk_dma_malloc`, hugepage memory the driver can translate to bus addresses) as the
//!   [`DmaAllocator`] of every runtime core, so the [`DmaBuf`]s taken afterwards — ZIOB's
//!   chunks, read buffers — are SPDK memory and go to the device in place. A buffer that is
//!   not (taken before the open, on the heap after SPDK memory ran out, or with `bounce`) is
//!   copied through a per-core pool of SPDK DMA buffers instead. [`transfer_stats`] counts
//!   both.
//! - NVMe status codes become the model's typed [`DeviceError`]s; the context a status does
//!   not carry (write pointer, zone state) comes from a report of the zone after the failure.

mod ffi;

use crate::nvme::status::{self as nvme_status, IoContext, NvmeStatus};

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

use ziob_runtime::{DmaAllocator, DmaBuf, IoBuf, IoBufMut, PollerGuard};

use crate::device::{check_read_buf, fill_read_buf, ZonedDevice};
use crate::model::error::{DeviceError, IoOp, Result};
use crate::model::geometry::Geometry;
use crate::model::spec::parse_size_bytes;
use crate::model::state::{capacity_crossing_refusal, ZoneAction, ZoneInfo, ZoneState, ZoneTarget};

/// Default SPDK memory size (MiB): what the QEMU guest with 512 hugepages fits.
pub const MEM_SIZE_MB_DEFAULT: u32 = 256;
/// Default I/O queue depth of each core's qpair.
pub const QUEUE_DEPTH_DEFAULT: u32 = 128;
/// Free DMA buffers kept per size class and core.
const POOL_PER_CLASS_MAX: usize = 64;
/// Smallest DMA buffer, and their alignment.
const DMA_MIN_BYTES: usize = 4096;
/// Bytes of a zone report header and of each zone descriptor.
const REPORT_ENTRY_BYTES: usize = 64;
/// Largest zone report buffer per command.
const REPORT_BUF_MAX_BYTES: usize = 64 * 1024;

/// The parsed arguments of an `spdk:` spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpdkOptions {
    /// SPDK transport id string, e.g. `trtype:PCIe traddr:0000:00:04.0`.
    pub trid: String,
    /// The PCI address when the spec named one (DPDK then probes only that device).
    pub pci_addr: Option<String>,
    /// Namespace id.
    pub nsid: u32,
    /// Run DPDK without hugepages.
    pub no_huge: bool,
    /// SPDK memory size in MiB.
    pub mem_size_mb: u32,
    /// I/O queue depth per core.
    pub queue_depth: u32,
    /// Copy every transfer through SPDK DMA buffers, and do not install SPDK's allocator in
    /// the runtime.
    pub bounce: bool,
}

impl SpdkOptions {
    /// Parses what follows `spdk:`.
    pub fn parse(rest: &str) -> std::result::Result<SpdkOptions, String> {
        let mut parts = rest.split(',');
        let addr = parts.next().unwrap_or_default().trim();
        if addr.is_empty() {
            return Err("spdk needs a PCI address or a transport id string".into());
        }
        let (trid, pci_addr) = if addr.to_ascii_lowercase().contains("trtype") {
            (addr.to_string(), None)
        } else if is_pci_addr(addr) {
            (format!("trtype:PCIe traddr:{addr}"), Some(addr.to_string()))
        } else {
            return Err(format!(
                "`{addr}` is neither a PCI address (0000:00:04.0) nor a transport id (trtype:PCIe traddr:...)"
            ));
        };
        let mut o = SpdkOptions {
            trid,
            pci_addr,
            nsid: 1,
            no_huge: false,
            mem_size_mb: MEM_SIZE_MB_DEFAULT,
            queue_depth: QUEUE_DEPTH_DEFAULT,
            bounce: false,
        };
        for opt in parts {
            let (key, value) = opt.split_once('=').unwrap_or((opt, ""));
            let num = || -> std::result::Result<u32, String> {
                value
                    .parse()
                    .ok()
                    .filter(|&n: &u32| n > 0)
                    .ok_or_else(|| format!("{key}={value} is not a positive number"))
            };
            match key {
                "nsid" => o.nsid = num()?,
                "qd" => o.queue_depth = num()?,
                "no_huge" if value.is_empty() || value == "1" || value == "true" => {
                    o.no_huge = true
                }
                "bounce" if value.is_empty() || value == "1" || value == "true" => o.bounce = true,
                "mem" => {
                    let bytes = parse_size_bytes(value)?;
                    o.mem_size_mb = u32::try_from(bytes >> 20)
                        .ok()
                        .filter(|&m| m > 0)
                        .ok_or_else(|| format!("mem={value} must be between 1M and 4P"))?;
                }
                _ => {
                    return Err(format!(
                    "unknown spdk option `{opt}` (known: nsid=N, no_huge, mem=SIZE, qd=N, bounce)"
                ))
                }
            }
        }
        Ok(o)
    }
}

fn is_pci_addr(s: &str) -> bool {
    // [DDDD:]BB:DD.F, hex digits.
    let parts: Vec<&str> = s.split(':').collect();
    let (bus_dev, hex_ok) = match parts.as_slice() {
        [dom, bus, dev] => (
            (*bus, *dev),
            dom.len() == 4 && dom.chars().all(|c| c.is_ascii_hexdigit()),
        ),
        [bus, dev] => ((*bus, *dev), true),
        _ => return false,
    };
    let (bus, dev) = bus_dev;
    let Some((d, f)) = dev.split_once('.') else {
        return false;
    };
    hex_ok
        && bus.len() == 2
        && bus.chars().all(|c| c.is_ascii_hexdigit())
        && d.len() == 2
        && d.chars().all(|c| c.is_ascii_hexdigit())
        && f.len() == 1
        && f.chars().all(|c| c.is_ascii_digit())
}

// ---- process-wide state: the environment and attached controllers ----------------------

struct CtrlrPtr(*mut ffi::Ctrlr);
// SAFETY: the controller handle is only used for thread-safe SPDK calls (qpair allocation,
// identify data read at attach time); each qpair stays on the core that allocated it.
unsafe impl Send for CtrlrPtr {}
unsafe impl Sync for CtrlrPtr {}

/// One attached controller + namespace.
struct Attached {
    id: usize,
    h: CtrlrPtr,
    geo: ffi::Geo,
    queue_depth: u32,
}

static ENV: OnceLock<std::result::Result<(), String>> = OnceLock::new();
static ATTACHED: Mutex<Vec<(String, u32, Arc<Attached>)>> = Mutex::new(Vec::new());

fn err_buf() -> [c_char; 256] {
    [0; 256]
}

fn err_string(buf: &[c_char; 256]) -> String {
    // SAFETY: the shim writes a NUL-terminated string (snprintf) into the zeroed buffer.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

fn env_init(o: &SpdkOptions) -> std::result::Result<(), String> {
    ENV.get_or_init(|| {
        let name = CString::new("ziob").unwrap();
        let pci = CString::new(o.pci_addr.clone().unwrap_or_default())
            .map_err(|_| "PCI address contains NUL".to_string())?;
        let mut err = err_buf();
        // SAFETY: plain C strings and an error buffer of the stated length.
        let rc = unsafe {
            ffi::ziob_spdk_env_init(
                name.as_ptr(),
                c_int::from(o.no_huge),
                o.mem_size_mb as c_int,
                pci.as_ptr(),
                err.as_mut_ptr(),
                err.len(),
            )
        };
        if rc != 0 {
            return Err(err_string(&err));
        }
        tracing::info!(version = version(), "SPDK environment initialised");
        Ok(())
    })
    .clone()
}

/// The SPDK version this build links, e.g. `25.09.0`.
pub fn version() -> String {
    // SAFETY: no arguments.
    let v = unsafe { ffi::ziob_spdk_version() };
    format!("{}.{:02}.{}", v / 10000, (v / 100) % 100, v % 100)
}

fn attach(o: &SpdkOptions) -> std::result::Result<Arc<Attached>, String> {
    env_init(o)?;
    let mut list = ATTACHED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, _, a)) = list.iter().find(|(t, n, _)| *t == o.trid && *n == o.nsid) {
        return Ok(a.clone());
    }
    // A controller is attached once; another namespace of it reuses the handle's controller
    // only through a second connect, which SPDK refuses for PCIe: one namespace per process.
    if list.iter().any(|(t, _, _)| *t == o.trid) {
        return Err(format!(
            "{} is already attached with another namespace (one namespace per controller and process)",
            o.trid
        ));
    }
    let trid = CString::new(o.trid.clone()).map_err(|_| "transport id contains NUL".to_string())?;
    let mut geo = ffi::Geo::default();
    let mut err = err_buf();
    // SAFETY: C string, out-struct defined by the shim, error buffer of the stated length.
    let h = unsafe {
        ffi::ziob_spdk_connect(trid.as_ptr(), o.nsid, &mut geo, err.as_mut_ptr(), err.len())
    };
    if h.is_null() {
        return Err(err_string(&err));
    }
    let a = Arc::new(Attached {
        id: list.len(),
        h: CtrlrPtr(h),
        geo,
        queue_depth: o.queue_depth,
    });
    list.push((o.trid.clone(), o.nsid, a.clone()));
    Ok(a)
}

// ---- zero copy: SPDK memory as the runtime's DMA allocator --------------------------------

/// `spdk_dma_malloc`/`spdk_dma_free` as a [`DmaAllocator`] for the runtime's buffer pool.
struct SpdkDmaAllocator;

impl DmaAllocator for SpdkDmaAllocator {
    fn alloc(&self, bytes: usize) -> Option<NonNull<u8>> {
        // SAFETY: plain allocation call; the environment is initialised before this
        // allocator is installed.
        NonNull::new(
            unsafe { ffi::ziob_spdk_dma_alloc(bytes, ziob_runtime::DMA_ALIGN_BYTES) }.cast(),
        )
    }
    unsafe fn free(&self, ptr: NonNull<u8>, _bytes: usize) {
        // SAFETY: the caller guarantees `ptr` came from `alloc` and is not used again;
        // spdk_dma_free may be called from any thread.
        unsafe { ffi::ziob_spdk_dma_free(ptr.as_ptr().cast()) }
    }
    fn name(&self) -> &str {
        "spdk_dma_malloc"
    }
}

/// The process's one SPDK allocator (buffers are recognised by it).
fn spdk_allocator() -> &'static Arc<dyn DmaAllocator> {
    static ALLOC: OnceLock<Arc<dyn DmaAllocator>> = OnceLock::new();
    ALLOC.get_or_init(|| Arc::new(SpdkDmaAllocator))
}

/// Makes every runtime core take its [`DmaBuf`]s from SPDK memory (once per core).
async fn install_allocator_on_every_core() -> Result<()> {
    for core in 0..ziob_runtime::num_cores() {
        ziob_runtime::call_on(core, || async {
            if ziob_runtime::dma_allocator_name().as_deref() != Some("spdk_dma_malloc") {
                ziob_runtime::set_dma_allocator(Some(spdk_allocator().clone()));
            }
        })
        .await
        .map_err(|e| DeviceError::io("spdk: install DMA allocator", std::io::Error::other(e)))?;
    }
    Ok(())
}

/// One thread's transfer counters: written only by that thread (no shared cache line on
/// the I/O path), summed by [`transfer_stats`].
#[derive(Default)]
struct TransferCounters {
    zero_copy_cmds: AtomicU64,
    bounced_cmds: AtomicU64,
    bounced_bytes: AtomicU64,
}

impl TransferCounters {
    /// Adds `n` to a counter of the current thread (its only writer: no atomic add needed).
    fn add(counter: impl Fn(&TransferCounters) -> &AtomicU64, n: u64) {
        THREAD_COUNTERS.with(|c| {
            let a = counter(c);
            a.store(a.load(Ordering::Relaxed) + n, Ordering::Relaxed);
        });
    }
}

/// Every thread's counters, kept after the thread exits so the totals never go back.
static ALL_COUNTERS: Mutex<Vec<Arc<TransferCounters>>> = Mutex::new(Vec::new());

thread_local! {
    static THREAD_COUNTERS: Arc<TransferCounters> = {
        let c = Arc::new(TransferCounters::default());
        ALL_COUNTERS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(c.clone());
        c
    };
}

/// How the data of this process's `spdk:` reads, writes and appends reached the device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransferStats {
    /// Commands that used the caller's [`DmaBuf`] in place (it was SPDK memory).
    pub zero_copy_cmds: u64,
    /// Commands that copied through an SPDK DMA buffer.
    pub bounced_cmds: u64,
    /// Bytes those copies moved.
    pub bounced_bytes: u64,
}

/// Counters of zero-copy and copied data commands since the process started.
pub fn transfer_stats() -> TransferStats {
    let all = ALL_COUNTERS.lock().unwrap_or_else(|e| e.into_inner());
    let sum = |f: fn(&TransferCounters) -> &AtomicU64| {
        all.iter().map(|c| f(c).load(Ordering::Relaxed)).sum()
    };
    TransferStats {
        zero_copy_cmds: sum(|c| &c.zero_copy_cmds),
        bounced_cmds: sum(|c| &c.bounced_cmds),
        bounced_bytes: sum(|c| &c.bounced_bytes),
    }
}

// ---- per-core state: qpair, poller, DMA buffer pool --------------------------------------

/// A buffer from SPDK's DMA allocator.
struct DmaChunk {
    ptr: *mut u8,
    cap: usize,
}

impl DmaChunk {
    fn alloc(len: usize) -> Option<DmaChunk> {
        let cap = len.max(DMA_MIN_BYTES).next_power_of_two();
        // SAFETY: plain allocation call.
        let ptr = unsafe { ffi::ziob_spdk_dma_alloc(cap, DMA_MIN_BYTES) } as *mut u8;
        (!ptr.is_null()).then_some(DmaChunk { ptr, cap })
    }
    fn slice(&self, len: usize) -> &[u8] {
        assert!(len <= self.cap);
        // SAFETY: `ptr` points to `cap` bytes owned by this chunk.
        unsafe { std::slice::from_raw_parts(self.ptr, len) }
    }
    fn slice_mut(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= self.cap);
        // SAFETY: as above, and `&mut self` is unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, len) }
    }
}

impl Drop for DmaChunk {
    fn drop(&mut self) {
        // SAFETY: allocated by ziob_spdk_dma_alloc, freed once.
        unsafe { ffi::ziob_spdk_dma_free(self.ptr.cast()) }
    }
}

struct CoreQ {
    h: *mut ffi::Ctrlr,
    qp: *mut ffi::Qpair,
    inflight: Cell<usize>,
    guard: RefCell<Option<PollerGuard>>,
    pool: RefCell<HashMap<usize, Vec<DmaChunk>>>,
}

impl CoreQ {
    fn get_buf(&self, len: usize) -> Result<DmaChunk> {
        let class = len.max(DMA_MIN_BYTES).next_power_of_two();
        if let Some(c) = self.pool.borrow_mut().get_mut(&class).and_then(|v| v.pop()) {
            return Ok(c);
        }
        DmaChunk::alloc(len).ok_or_else(|| {
            DeviceError::io(
                "spdk: spdk_dma_zmalloc",
                std::io::Error::other(format!(
                    "out of SPDK DMA memory for {class} bytes (raise mem=)"
                )),
            )
        })
    }

    fn put_buf(&self, c: DmaChunk) {
        let mut pool = self.pool.borrow_mut();
        let v = pool.entry(c.cap).or_default();
        if v.len() < POOL_PER_CLASS_MAX {
            v.push(c);
        }
    }

    /// Makes sure the core polls this qpair (called on submit).
    fn start_polling(&self) {
        let mut g = self.guard.borrow_mut();
        if g.is_none() {
            let qp = self.qp;
            *g = Some(ziob_runtime::register_poller(move || {
                // SAFETY: the qpair lives as long as this core's CoreQ, and the poller is
                // unregistered (or the core stopped) before CoreQ is dropped.
                let n = unsafe { ffi::ziob_spdk_qpair_poll(qp) };
                if n < 0 {
                    tracing::error!(rc = n, "spdk_nvme_qpair_process_completions failed");
                    0
                } else {
                    n as usize
                }
            }));
        }
    }

    /// Stops busy polling once nothing is in flight (called by the task a command completes
    /// for, or by the completion callback of a command whose future was dropped).
    fn maybe_stop_polling(&self) {
        if self.inflight.get() == 0 {
            self.guard.borrow_mut().take();
        }
    }
}

impl Drop for CoreQ {
    fn drop(&mut self) {
        // At thread exit the runtime core may already be gone: never touch it from here.
        if let Some(g) = self.guard.get_mut().take() {
            std::mem::forget(g);
        }
        self.pool.get_mut().clear();
        // SAFETY: allocated by ziob_spdk_qpair_alloc on this thread; freed once.
        unsafe { ffi::ziob_spdk_qpair_free(self.qp) }
    }
}

thread_local! {
    static CORES: RefCell<HashMap<usize, Rc<CoreQ>>> = RefCell::new(HashMap::new());
}

fn core_q(a: &Attached) -> Result<Rc<CoreQ>> {
    if !ziob_runtime::on_core() {
        return Err(DeviceError::InvalidArgument(
            "spdk devices are used from runtime cores only".into(),
        ));
    }
    CORES.with(|c| {
        if let Some(q) = c.borrow().get(&a.id) {
            return Ok(q.clone());
        }
        // SAFETY: valid controller handle; SPDK allows allocating qpairs from any thread.
        let qp = unsafe { ffi::ziob_spdk_qpair_alloc(a.h.0, a.queue_depth) };
        if qp.is_null() {
            return Err(DeviceError::io(
                "spdk: spdk_nvme_ctrlr_alloc_io_qpair",
                std::io::Error::other("no I/O queue pair left on the controller"),
            ));
        }
        let q = Rc::new(CoreQ {
            h: a.h.0,
            qp,
            inflight: Cell::new(0),
            guard: RefCell::new(None),
            pool: RefCell::new(HashMap::new()),
        });
        c.borrow_mut().insert(a.id, q.clone());
        Ok(q)
    })
}

// ---- one command: completion slot, callback, future ---------------------------------------

/// The memory a command's data moves through.
enum Held {
    /// The caller's buffer, SPDK memory used in place.
    Caller(DmaBuf),
    /// A bounce buffer from the core's pool.
    Bounce(DmaChunk),
}

impl Held {
    fn into_chunk(self) -> Option<DmaChunk> {
        match self {
            Held::Bounce(c) => Some(c),
            Held::Caller(_) => None,
        }
    }
}

struct Slot {
    core: Rc<CoreQ>,
    done: Cell<Option<(u32, u64)>>,
    waker: Cell<Option<Waker>>,
    /// The memory the device reads/writes; owned here until the completion, so a dropped
    /// future can never let the device write into freed memory.
    buf: Cell<Option<Held>>,
    /// The waiting future was dropped: nobody else will stop the core's polling.
    abandoned: Cell<bool>,
}

unsafe extern "C" fn on_complete(arg: *mut c_void, cpl: *const c_void) {
    // SAFETY: `arg` is the `Rc<Slot>` leaked at submission, reclaimed exactly once here;
    // `cpl` is SPDK's completion, valid during the callback.
    let slot = unsafe { Rc::from_raw(arg as *const Slot) };
    let (status, result) = unsafe {
        (
            ffi::ziob_spdk_cpl_status(cpl),
            ffi::ziob_spdk_cpl_result(cpl),
        )
    };
    slot.done.set(Some((status, result)));
    slot.core.inflight.set(slot.core.inflight.get() - 1);
    if let Some(w) = slot.waker.take() {
        w.wake();
    }
    if slot.abandoned.get() {
        // Its future is gone; if it was the core's last command, stop busy polling (the
        // runtime allows removing a poller from inside a poller).
        slot.core.maybe_stop_polling();
    }
}

struct Cmd {
    slot: Rc<Slot>,
}

impl Drop for Cmd {
    fn drop(&mut self) {
        if self.slot.done.get().is_none() {
            self.slot.abandoned.set(true);
        }
    }
}

impl Future for Cmd {
    type Output = (u32, u64, Option<Held>);
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.slot.done.get() {
            Some((status, result)) => {
                self.slot.core.maybe_stop_polling();
                Poll::Ready((status, result, self.slot.buf.take()))
            }
            None => {
                self.slot.waker.set(Some(cx.waker().clone()));
                Poll::Pending
            }
        }
    }
}

type SubmitFn<'a> =
    dyn Fn(*mut ffi::Ctrlr, *mut ffi::Qpair, *mut c_void, *mut c_void) -> c_int + 'a;

/// Submits one command (retrying while the qpair is out of request slots) and waits for it.
/// `submit(h, qpair, data, arg)` issues it with `on_complete`/`arg`; `data` points into `buf`,
/// which the command owns until its completion. Returns the NVMe status and the
/// command-specific result, and the buffer in every case.
async fn run_cmd(
    core: &Rc<CoreQ>,
    mut buf: Option<Held>,
    data: *mut c_void,
    what: &str,
    submit: &SubmitFn<'_>,
) -> (Result<(u32, u64)>, Option<Held>) {
    loop {
        let slot = Rc::new(Slot {
            core: core.clone(),
            done: Cell::new(None),
            waker: Cell::new(None),
            buf: Cell::new(buf.take()),
            abandoned: Cell::new(false),
        });
        let arg = Rc::into_raw(slot.clone()) as *mut c_void;
        let rc = submit(core.h, core.qp, data, arg);
        if rc == 0 {
            core.inflight.set(core.inflight.get() + 1);
            core.start_polling();
            let (status, result, held) = Cmd { slot }.await;
            return (Ok((status, result)), held);
        }
        // SAFETY: not submitted, so the callback will never reclaim `arg`: do it here.
        drop(unsafe { Rc::from_raw(arg as *const Slot) });
        buf = slot.buf.take();
        if rc == -libc::ENOMEM {
            // Every request slot of the qpair is taken: let completions drain, then retry.
            core.start_polling();
            ziob_runtime::yield_now().await;
            continue;
        }
        return (
            Err(DeviceError::io(
                format!("spdk: submit {what}"),
                std::io::Error::from_raw_os_error(-rc),
            )),
            buf,
        );
    }
}

// ---- the device --------------------------------------------------------------------------

#[derive(Clone)]
struct Inner {
    name: String,
    geometry: Geometry,
    ctl: Arc<Attached>,
    zone_size_blocks: u64,
    max_xfer_bytes: u64,
    /// The `bounce` option: copy every transfer, even from SPDK memory.
    bounce: bool,
}

/// An NVMe ZNS namespace driven by SPDK (see the module docs).
#[derive(Clone)]
pub struct SpdkDevice {
    inner: Arc<Inner>,
}

impl SpdkDevice {
    /// Opens `spdk:ADDR[,options]` (`rest` is what follows `spdk:`). Must run on a runtime
    /// core; the first open of the process initialises SPDK (seconds under emulation).
    pub async fn open(spec: &str, rest: &str) -> Result<SpdkDevice> {
        let invalid = |reason: String| DeviceError::InvalidSpec {
            spec: spec.to_string(),
            reason,
        };
        let o = SpdkOptions::parse(rest).map_err(invalid)?;
        let ctl = attach(&o)
            .map_err(|e| DeviceError::io(format!("{spec}: attach"), std::io::Error::other(e)))?;
        let g = ctl.geo;
        if g.is_zoned == 0 {
            return Err(invalid(format!(
                "namespace {} is not a zoned (ZNS) namespace",
                o.nsid
            )));
        }
        let bs = u64::from(g.block_size);
        let zone_count = u32::try_from(g.zone_count)
            .map_err(|_| invalid(format!("{} zones is too many", g.zone_count)))?;
        let mut geometry = Geometry {
            block_size_bytes: bs,
            zone_size_bytes: g.zone_size_blocks * bs,
            zone_capacity_bytes: g.zone_size_blocks * bs,
            zone_count,
            max_open_zones: (g.max_open != 0).then_some(g.max_open),
            max_active_zones: (g.max_active != 0).then_some(g.max_active),
            max_append_bytes: u64::from(g.max_append_bytes),
            volatile_write_cache: g.vwc != 0,
        };
        let mut dev = Inner {
            name: spec.to_string(),
            geometry,
            ctl,
            zone_size_blocks: g.zone_size_blocks,
            max_xfer_bytes: u64::from(g.max_xfer_bytes.max(g.block_size)),
            bounce: o.bounce,
        };
        // Zone capacity is per zone in ZNS; ZIOB's geometry has one: zone 0's.
        let dev0 = SpdkDevice {
            inner: Arc::new(dev.clone()),
        };
        let z0 = dev0.report_raw(0, 1).await?;
        let cap = z0
            .first()
            .map_or(geometry.zone_size_bytes, |z| z.capacity_bytes);
        geometry.zone_capacity_bytes = cap;
        geometry.max_append_bytes = geometry.max_append_bytes.min(cap) / bs * bs;
        geometry.validate()?;
        dev.geometry = geometry;
        // Only for a device that opened: a failed open leaves the runtime's memory alone.
        if !o.bounce {
            install_allocator_on_every_core().await?;
        }
        tracing::info!(spec, ?geometry, spdk = %version(), "spdk device open");
        Ok(SpdkDevice {
            inner: Arc::new(dev),
        })
    }

    fn geo(&self) -> &Geometry {
        &self.inner.geometry
    }

    fn core(&self) -> Result<Rc<CoreQ>> {
        core_q(&self.inner.ctl)
    }

    fn slba(&self, zone: u32) -> u64 {
        u64::from(zone) * self.inner.zone_size_blocks
    }

    async fn zone_now(&self, zone: u32) -> Option<ZoneInfo> {
        self.report_raw(zone, 1)
            .await
            .ok()
            .and_then(|v| v.into_iter().next())
    }

    /// Report Zones without the range check of the trait (used at open, before the geometry
    /// is final).
    async fn report_raw(&self, first: u32, count: u32) -> Result<Vec<ZoneInfo>> {
        let core = self.core()?;
        let bs = self.inner.geometry.block_size_bytes;
        let zone_count = self.inner.ctl.geo.zone_count;
        let end = u64::from(first)
            .saturating_add(u64::from(count))
            .min(zone_count);
        let per_cmd_max =
            (REPORT_BUF_MAX_BYTES.min(self.inner.max_xfer_bytes as usize) / REPORT_ENTRY_BYTES) - 1;
        let mut out = Vec::with_capacity((end.saturating_sub(u64::from(first))) as usize);
        let mut next = u64::from(first);
        while next < end {
            let n = ((end - next) as usize).min(per_cmd_max);
            let len = REPORT_ENTRY_BYTES * (n + 1);
            let buf = core.get_buf(len)?;
            let data = buf.ptr.cast();
            let slba = next * self.inner.zone_size_blocks;
            let (r, held) = run_cmd(
                &core,
                Some(Held::Bounce(buf)),
                data,
                "report zones",
                &|h, qp, b, arg| {
                    // SAFETY: valid handles; `b` is a DMA buffer of at least `len` bytes.
                    unsafe {
                        ffi::ziob_spdk_report_zones(h, qp, b, len as u32, slba, on_complete, arg)
                    }
                },
            )
            .await;
            let buf = held
                .and_then(Held::into_chunk)
                .expect("a command gives back its buffer");
            let st = match r {
                Ok((st, _)) => st,
                Err(e) => {
                    core.put_buf(buf);
                    return Err(e);
                }
            };
            if st != 0 {
                core.put_buf(buf);
                return Err(typed(st, "spdk: report zones", |_| None));
            }
            let data = buf.slice(len);
            let nr = (u64::from_le_bytes(data[0..8].try_into().unwrap()) as usize).min(n);
            for i in 0..nr {
                let d = &data[REPORT_ENTRY_BYTES * (i + 1)..REPORT_ENTRY_BYTES * (i + 2)];
                let rd = |o: usize| u64::from_le_bytes(d[o..o + 8].try_into().unwrap());
                let zs = d[1] >> 4;
                let (zcap, zslba, wp) = (rd(8), rd(16), rd(24));
                let state = ZoneState::from_nvme_code(zs).ok_or_else(|| {
                    DeviceError::io(
                        "spdk: report zones",
                        std::io::Error::other(format!("unknown zone state {zs:#x}")),
                    )
                })?;
                let capacity_bytes = zcap * bs;
                let write_pointer_bytes = match state {
                    ZoneState::Full => capacity_bytes,
                    ZoneState::Empty | ZoneState::Offline => 0,
                    _ => wp.saturating_sub(zslba).min(zcap) * bs,
                };
                out.push(ZoneInfo {
                    index: (zslba / self.inner.zone_size_blocks) as u32,
                    start_bytes: zslba * bs,
                    capacity_bytes,
                    write_pointer_bytes,
                    state,
                });
            }
            core.put_buf(buf);
            if nr == 0 {
                break;
            }
            next += nr as u64;
        }
        Ok(out)
    }

    /// One read, write or append of `len` bytes: a read fills `buf` from its window start,
    /// a write or append sends `buf[at..at + len]`. SPDK memory is used in place, anything
    /// else goes through a bounce buffer. Returns the command result (the append's LBA) and
    /// `buf`.
    async fn data_cmd(
        &self,
        op: IoOp,
        zone: u32,
        offset_bytes: u64,
        len: usize,
        mut buf: DmaBuf,
        at: usize,
    ) -> (Result<u64>, DmaBuf) {
        let core = match self.core() {
            Ok(c) => c,
            Err(e) => return (Err(e), buf),
        };
        let (held, data, bounced_from) = if !self.inner.bounce && buf.allocated_by(spdk_allocator())
        {
            let data: *mut c_void = if op == IoOp::Read {
                buf.stable_mut_ptr().cast()
            } else {
                assert!(at + len <= buf.len());
                // SAFETY: at + len <= buf.len(), so the pointer stays inside the buffer.
                unsafe { buf.stable_ptr().add(at) }.cast_mut().cast()
            };
            TransferCounters::add(|c| &c.zero_copy_cmds, 1);
            (Held::Caller(buf), data, None)
        } else {
            let mut chunk = match core.get_buf(len) {
                Ok(c) => c,
                Err(e) => return (Err(e), buf),
            };
            if op != IoOp::Read {
                chunk.slice_mut(len).copy_from_slice(&buf[at..at + len]);
            }
            TransferCounters::add(|c| &c.bounced_cmds, 1);
            TransferCounters::add(|c| &c.bounced_bytes, len as u64);
            let data = chunk.ptr.cast();
            (Held::Bounce(chunk), data, Some(buf))
        };
        let bs = self.geo().block_size_bytes;
        let blocks = (len as u64 / bs) as u32;
        let lba = self.slba(zone) + offset_bytes / bs;
        let zslba = self.slba(zone);
        let submit = |h, qp, b, arg| -> c_int {
            // SAFETY: valid handles; `b` points to `len` bytes of SPDK DMA memory owned by
            // the command's slot until its completion.
            unsafe {
                match op {
                    IoOp::Read => ffi::ziob_spdk_read(h, qp, b, lba, blocks, on_complete, arg),
                    IoOp::Write => ffi::ziob_spdk_write(h, qp, b, lba, blocks, on_complete, arg),
                    IoOp::Append => {
                        ffi::ziob_spdk_append(h, qp, b, zslba, blocks, on_complete, arg)
                    }
                }
            }
        };
        let (r, held) = run_cmd(&core, Some(held), data, op.as_str(), &submit).await;
        let read_ok = op == IoOp::Read && matches!(r, Ok((0, _)));
        let buf = match (bounced_from, held) {
            (Some(mut b), Some(Held::Bounce(chunk))) => {
                if read_ok {
                    fill_read_buf(&mut b, chunk.slice(len), len);
                }
                core.put_buf(chunk);
                b
            }
            (None, Some(Held::Caller(mut b))) => {
                if read_ok {
                    // SAFETY: the device wrote `len` bytes from the window start (a
                    // successful read transfers all of them; len <= capacity was checked).
                    unsafe { b.set_init(len) };
                }
                b
            }
            _ => unreachable!("a command gives back the buffer it was given"),
        };
        let (st, result) = match r {
            Ok(x) => x,
            Err(e) => return (Err(e), buf),
        };
        if st != 0 {
            let now = self.zone_now(zone).await;
            let ctx = IoContext {
                op,
                zone,
                offset_bytes,
                len_bytes: len as u64,
            };
            let what = format!("{}: {op}", self.inner.name);
            let e = typed(st, &what, |s| {
                nvme_status::io_error(self.geo(), s, ctx, now.as_ref())
            });
            return (Err(e), buf);
        }
        (Ok(result), buf)
    }

    fn check_read(&self, zone: u32, offset_bytes: u64, len: usize, buf: &DmaBuf) -> Result<()> {
        let g = self.geo();
        g.check_zone(zone)?;
        check_read_buf(buf, len)?;
        g.check_aligned(IoOp::Read, zone, offset_bytes, len as u64)?;
        g.check_read_end(zone, offset_bytes, len as u64)
    }

    async fn check_write(&self, zone: u32, offset_bytes: u64, len: u64) -> Result<()> {
        let g = self.geo();
        g.check_zone(zone)?;
        g.check_aligned(IoOp::Write, zone, offset_bytes, len)?;
        // A write above the max transfer size goes out as several commands; one crossing
        // the capacity would then be applied in part. Refuse it whole here.
        if len > self.inner.max_xfer_bytes && offset_bytes + len > g.zone_capacity_bytes {
            // Refuse it as one command would be refused, in the device's order of checks.
            return Err(match self.zone_now(zone).await {
                Some(z) => capacity_crossing_refusal(
                    g,
                    zone,
                    z.state,
                    z.write_pointer_bytes,
                    offset_bytes,
                    len,
                ),
                None => g.capacity_error(IoOp::Write, zone, offset_bytes, len),
            });
        }
        Ok(())
    }

    fn check_append(&self, zone: u32, len: u64) -> Result<()> {
        let g = self.geo();
        g.check_zone(zone)?;
        g.check_append(zone, len)
    }

    /// A command without data (zone management, flush).
    async fn no_data_cmd(&self, what: &str, submit: &SubmitFn<'_>) -> Result<u32> {
        let core = self.core()?;
        let (r, _) = run_cmd(&core, None, std::ptr::null_mut(), what, submit).await;
        r.map(|(st, _)| st)
    }
}

/// The typed error for completion status `st` (the passthrough encoding, shared with the
/// `nvme:` backend's mapping), or an I/O error naming the status when it has no ZNS meaning.
fn typed(st: u32, what: &str, map: impl FnOnce(NvmeStatus) -> Option<DeviceError>) -> DeviceError {
    let s = NvmeStatus::from_result(st as i32);
    s.and_then(map).unwrap_or_else(|| {
        DeviceError::io(
            what.to_string(),
            std::io::Error::other(match s {
                Some(s) => s.to_string(),
                None => format!("NVMe status {st:#x}"),
            }),
        )
    })
}

impl ZonedDevice for SpdkDevice {
    fn geometry(&self) -> &Geometry {
        self.geo()
    }

    fn name(&self) -> &str {
        &self.inner.name
    }

    async fn report_zones(&self, first: u32, count: u32) -> Result<Vec<ZoneInfo>> {
        self.geo().check_zone(first)?;
        self.report_raw(first, count).await
    }

    async fn read(
        &self,
        zone: u32,
        offset_bytes: u64,
        len: usize,
        buf: DmaBuf,
    ) -> (Result<()>, DmaBuf) {
        if let Err(e) = self.check_read(zone, offset_bytes, len, &buf) {
            return (Err(e), buf);
        }
        let (r, buf) = self
            .data_cmd(IoOp::Read, zone, offset_bytes, len, buf, 0)
            .await;
        (r.map(|_| ()), buf)
    }

    async fn write(&self, zone: u32, offset_bytes: u64, buf: DmaBuf) -> (Result<()>, DmaBuf) {
        if let Err(e) = self.check_write(zone, offset_bytes, buf.len() as u64).await {
            return (Err(e), buf);
        }
        // Above the max transfer size, issue the pieces one after the other ourselves:
        // SPDK would submit its child commands all at once, and when the first is refused
        // (e.g. Too Many Active Zones) the later ones fail with Zone Invalid Write and the
        // parent reports one of those. Sequential pieces report the first refusal.
        let step = self.inner.max_xfer_bytes as usize;
        let mut buf = buf;
        let mut at = 0usize;
        while at < buf.len() {
            let n = step.min(buf.len() - at);
            let (r, b) = self
                .data_cmd(IoOp::Write, zone, offset_bytes + at as u64, n, buf, at)
                .await;
            buf = b;
            if let Err(e) = r {
                return (Err(e), buf);
            }
            at += n;
        }
        (Ok(()), buf)
    }

    async fn append(&self, zone: u32, buf: DmaBuf) -> (Result<u64>, DmaBuf) {
        if let Err(e) = self.check_append(zone, buf.len() as u64) {
            return (Err(e), buf);
        }
        let len = buf.len();
        let (r, buf) = self.data_cmd(IoOp::Append, zone, 0, len, buf, 0).await;
        let bs = self.geo().block_size_bytes;
        (r.map(|lba| (lba - self.slba(zone)) * bs), buf)
    }

    async fn zone_action(&self, action: ZoneAction, target: ZoneTarget) -> Result<()> {
        let (zone, all) = match target {
            ZoneTarget::One(z) => {
                self.geo().check_zone(z)?;
                (z, false)
            }
            ZoneTarget::All => (0, true),
        };
        let code = match action {
            ZoneAction::Open => ffi::ZM_OPEN,
            ZoneAction::Close => ffi::ZM_CLOSE,
            ZoneAction::Finish => ffi::ZM_FINISH,
            ZoneAction::Reset => ffi::ZM_RESET,
            ZoneAction::Offline => ffi::ZM_OFFLINE,
        };
        let slba = self.slba(zone);
        let st = self
            .no_data_cmd("zone management send", &|h, qp, _, arg| {
                // SAFETY: valid handles; no data buffer.
                unsafe {
                    ffi::ziob_spdk_zone_mgmt(h, qp, code, slba, c_int::from(all), on_complete, arg)
                }
            })
            .await?;
        if st != 0 {
            let now = if all { None } else { self.zone_now(zone).await };
            let what = format!("{}: {action} zone", self.inner.name);
            return Err(typed(st, &what, |s| {
                nvme_status::action_error(self.geo(), s, action, zone, now.map(|z| z.state))
            }));
        }
        Ok(())
    }

    async fn flush(&self) -> Result<()> {
        let st = self
            .no_data_cmd("flush", &|h, qp, _, arg| {
                // SAFETY: valid handles; no data buffer.
                unsafe { ffi::ziob_spdk_flush(h, qp, on_complete, arg) }
            })
            .await?;
        if st != 0 {
            return Err(typed(st, &format!("{}: flush", self.inner.name), |_| None));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pci_and_trid_specs() {
        let o = SpdkOptions::parse("0000:00:04.0").unwrap();
        assert_eq!(o.trid, "trtype:PCIe traddr:0000:00:04.0");
        assert_eq!(o.pci_addr.as_deref(), Some("0000:00:04.0"));
        assert_eq!(
            (o.nsid, o.no_huge, o.mem_size_mb),
            (1, false, MEM_SIZE_MB_DEFAULT)
        );
        let o = SpdkOptions::parse("trtype:PCIe traddr:0000:00:04.0,nsid=2,no_huge,mem=512M,qd=64")
            .unwrap();
        assert_eq!(o.trid, "trtype:PCIe traddr:0000:00:04.0");
        assert_eq!(o.pci_addr, None);
        assert_eq!(
            (o.nsid, o.no_huge, o.mem_size_mb, o.queue_depth),
            (2, true, 512, 64)
        );
        assert!(!o.bounce);
        assert!(SpdkOptions::parse("0000:00:04.0,bounce").unwrap().bounce);
        assert!(SpdkOptions::parse("0000:00:04.0,bounce=maybe").is_err());
        assert!(SpdkOptions::parse("00:04.0").is_ok());
        assert!(SpdkOptions::parse("/dev/nvme0").is_err());
        assert!(SpdkOptions::parse("0000:00:04.0,nsid=0").is_err());
        assert!(SpdkOptions::parse("0000:00:04.0,bogus=1").is_err());
    }
}
