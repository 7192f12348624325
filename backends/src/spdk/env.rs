//! The process-wide SPDK state: the environment (DPDK EAL), initialised once, and the
//! attached controllers, each connected once and shared by every handle and core.

use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::{Arc, Mutex, OnceLock};

use super::ffi;
use super::options::SpdkOptions;

pub(super) struct CtrlrPtr(pub(super) *mut ffi::Ctrlr);
// SAFETY: the controller handle is only used for thread-safe SPDK calls (qpair allocation,
// identify data read at attach time); each qpair stays on the core that allocated it.
unsafe impl Send for CtrlrPtr {}
unsafe impl Sync for CtrlrPtr {}

/// One attached controller + namespace.
pub(super) struct Attached {
    /// Index of the controller in this process (keys the per-core qpairs).
    pub(super) id: usize,
    /// The controller + namespace handle.
    pub(super) h: CtrlrPtr,
    /// Geometry from the Identify data.
    pub(super) geo: ffi::Geo,
    /// I/O queue depth of each core's qpair.
    pub(super) queue_depth: u32,
}

static ENV: OnceLock<std::result::Result<(), String>> = OnceLock::new();
static ATTACHED: Mutex<Vec<(String, u32, Arc<Attached>)>> = Mutex::new(Vec::new());

fn err_buf() -> [c_char; 1024] {
    [0; 1024]
}

fn err_string(buf: &[c_char; 1024]) -> String {
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

pub(super) fn attach(o: &SpdkOptions) -> std::result::Result<Arc<Attached>, String> {
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
