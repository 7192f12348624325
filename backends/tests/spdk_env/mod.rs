//! Shared by the SPDK guest tests: decides whether `spdk:` can run here, and prepares the
//! QEMU guest's NVMe controller for SPDK (unbind from `nvme`, bind to `uio_pci_generic`).
//!
//! Runs only inside the project's QEMU guest (`ZIOB_GUEST=1`, see xtask/README.md) with
//! hugepages (`--hugepages 512`) and a build with the cargo feature `spdk`; otherwise every
//! caller prints why it skipped. `ZIOB_SPDK_SPEC` overrides the device spec
//! (default `spdk:$ZIOB_NVME_PCI`); `ZIOB_SPDK=1` opts in (the uio binding takes the namespace
//! away from the kernel's `nvme` driver, so zbd/nvme tests of the same guest run would fail).

#![allow(dead_code)]

use std::path::Path;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The spec to open, or why SPDK tests cannot run here.
#[allow(unexpected_cfgs)] // also included by the ziob crate's tests, which have no `spdk` feature
pub fn spdk_spec() -> Result<String, String> {
    if !cfg!(feature = "spdk") {
        return Err(
            "built without the cargo feature `spdk` (needs an installed SPDK >= 25.09, \
                    see docs/SPDK.md)"
                .into(),
        );
    }
    if std::env::var_os("ZIOB_GUEST").is_none() {
        return Err("not in the ZIOB QEMU guest (ZIOB_GUEST unset): run with \
                    `cargo xtask vm-run --hugepages 512 --env ZIOB_SPDK=1 ...`"
            .into());
    }
    if std::env::var_os("ZIOB_SPDK").is_none() {
        return Err(
            "opt-in: set ZIOB_SPDK=1 (binding the controller to uio_pci_generic takes \
                    the namespace from the kernel's nvme driver for the rest of the guest run)"
                .into(),
        );
    }
    if let Ok(s) = std::env::var("ZIOB_SPDK_SPEC") {
        return Ok(s);
    }
    let pci = std::env::var("ZIOB_NVME_PCI").map_err(|_| "ZIOB_NVME_PCI unset".to_string())?;
    let hp = std::fs::read_to_string("/proc/sys/vm/nr_hugepages").unwrap_or_default();
    if hp.trim().parse::<u64>().unwrap_or(0) < 128 {
        return Err(format!(
            "only {} hugepages reserved (need >= 128 x 2 MiB): run the guest with --hugepages 512",
            hp.trim()
        ));
    }
    bind_uio(&pci)?;
    Ok(format!("spdk:{pci}"))
}

/// Binds the controller at `pci` to uio_pci_generic (once per process).
pub fn bind_uio(pci: &str) -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let dev = Path::new("/sys/bus/pci/devices").join(pci);
        let driver = std::fs::read_link(dev.join("driver"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
        if driver.as_deref() == Some("uio_pci_generic") {
            return Ok(());
        }
        let w =
            |p: &str, v: &str| std::fs::write(p, v).map_err(|e| format!("write {v} to {p}: {e}"));
        let _ = std::process::Command::new("modprobe")
            .arg("uio_pci_generic")
            .status();
        if let Some(d) = driver {
            w(&format!("/sys/bus/pci/drivers/{d}/unbind"), pci)?;
        }
        // new_id binds every unbound 1b36:0010 device; EEXIST after the first time is fine.
        let _ = std::fs::write("/sys/bus/pci/drivers/uio_pci_generic/new_id", "1b36 0010");
        let _ = std::fs::write("/sys/bus/pci/drivers/uio_pci_generic/bind", pci);
        let now = std::fs::read_link(dev.join("driver")).ok();
        match now.as_ref().and_then(|p| p.file_name()) {
            Some(n) if n == "uio_pci_generic" => {
                eprintln!("[spdk] {pci} bound to uio_pci_generic");
                Ok(())
            }
            other => Err(format!(
                "{pci} could not be bound to uio_pci_generic (driver now {other:?})"
            )),
        }
    })
    .clone()
}

/// Serialises the tests of one process on the one device.
pub fn device_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
