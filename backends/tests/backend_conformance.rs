//! The conformance suite run against every backend: one line per backend at the bottom.

#[macro_use]
mod conformance;

use std::path::PathBuf;

use conformance::{Backend, Caps};
use ziob_backends::{
    open_device, AnyDevice, EmuDevice, Geometry, LatencyModel, MemDevice, NilDevice, ZoneAction,
    ZoneTarget, ZonedDevice,
};

struct MemBackend;

impl Backend for MemBackend {
    type Dev = MemDevice;
    const CAPS: Caps = Caps {
        stores_data: true,
        zbc: false,
    };
    async fn create(&mut self, g: &Geometry) -> MemDevice {
        MemDevice::new("mem:conformance", g).unwrap()
    }
}

/// mem through the spec parser and [`AnyDevice`] dispatch.
struct MemSpecBackend;

impl Backend for MemSpecBackend {
    type Dev = AnyDevice;
    const CAPS: Caps = Caps {
        stores_data: true,
        zbc: false,
    };
    async fn create(&mut self, g: &Geometry) -> AnyDevice {
        let spec = format!(
            "mem:zones={},zone_size={},zone_capacity={},block_size={},max_open={},max_active={},max_append={}",
            g.zone_count,
            g.zone_size_bytes,
            g.zone_capacity_bytes,
            g.block_size_bytes,
            g.max_open_zones.unwrap(),
            g.max_active_zones.unwrap(),
            g.max_append_bytes
        );
        open_device(&spec).await.unwrap()
    }
}

struct NilBackend;

impl Backend for NilBackend {
    type Dev = NilDevice;
    const CAPS: Caps = Caps {
        stores_data: false,
        zbc: false,
    };
    async fn create(&mut self, g: &Geometry) -> NilDevice {
        NilDevice::new("nil:conformance", g).unwrap()
    }
}

struct EmuBackend {
    dir: tempfile::TempDir,
    /// `false`: through the page cache (`direct=0`), never `O_DIRECT`.
    direct: bool,
}

impl EmuBackend {
    fn new() -> EmuBackend {
        EmuBackend {
            dir: tempfile::tempdir().unwrap(),
            direct: true,
        }
    }
    fn through_page_cache() -> EmuBackend {
        EmuBackend {
            direct: false,
            ..EmuBackend::new()
        }
    }
    async fn open(&self) -> EmuDevice {
        let dev = if self.direct {
            EmuDevice::open(self.path(), LatencyModel::default()).await
        } else {
            EmuDevice::open_through_page_cache(self.path(), LatencyModel::default()).await
        };
        let dev = dev.unwrap();
        if !self.direct {
            assert!(!dev.is_direct());
        }
        dev
    }
    fn path(&self) -> PathBuf {
        self.dir.path().join("dev.zns")
    }
}

impl Backend for EmuBackend {
    type Dev = EmuDevice;
    const CAPS: Caps = Caps {
        stores_data: true,
        zbc: false,
    };
    async fn create(&mut self, g: &Geometry) -> EmuDevice {
        let created = EmuDevice::create(self.path(), g).await.unwrap();
        if self.direct {
            // The handle `create` returns is what most callers use: test that one.
            return created;
        }
        drop(created);
        self.open().await
    }
    async fn reopen(&mut self, dev: EmuDevice) -> EmuDevice {
        drop(dev);
        self.open().await
    }
}

/// zbd on a zoned block device of the test guest (`cargo xtask vm-test`): the ZNS namespace
/// (`NULLBLK = false`, `$ZIOB_ZNS_BLOCK`) or zoned null_blk (`true`, `$ZIOB_NULLBLK_ZONED`,
/// which follows ZBC where ZBC and ZNS differ). Elsewhere every test prints `skipped: …`.
struct ZbdBackend<const NULLBLK: bool>;

impl<const NULLBLK: bool> ZbdBackend<NULLBLK> {
    const VAR: &'static str = if NULLBLK {
        "ZIOB_NULLBLK_ZONED"
    } else {
        "ZIOB_ZNS_BLOCK"
    };
    fn new() -> Self {
        ZbdBackend
    }
}

/// A number the guest harness exports (see `xtask/README.md`).
fn guest_env(name: &str) -> u64 {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} is not set in the guest"))
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not a number"))
}

/// Asserts that `got` is the geometry the guest was booted with for the device whose
/// variables start with `prefix` (`ZIOB_ZNS` or `ZIOB_NULLBLK`; the zone count is checked for
/// the ZNS namespace, whose count the harness sets).
fn assert_guest_geometry(prefix: &str, got: &Geometry) {
    let var = |name: &str| guest_env(&format!("{prefix}_{name}"));
    let limit = |name: &str| Some(var(name) as u32).filter(|&v| v != 0);
    assert_eq!(got.block_size_bytes, guest_env("ZIOB_BLOCK_SIZE"));
    assert_eq!(got.zone_size_bytes, var("ZONE_SIZE"));
    assert_eq!(got.zone_capacity_bytes, var("ZONE_CAPACITY"));
    assert_eq!(got.max_open_zones, limit("MAX_OPEN"));
    assert_eq!(got.max_active_zones, limit("MAX_ACTIVE"));
    if prefix == "ZIOB_ZNS" {
        assert_eq!(u64::from(got.zone_count), var("ZONES"));
    }
    assert!(got.max_append_bytes.is_multiple_of(got.block_size_bytes));
}

impl<const NULLBLK: bool> Backend for ZbdBackend<NULLBLK> {
    type Dev = AnyDevice;
    const CAPS: Caps = Caps {
        stores_data: true,
        zbc: NULLBLK,
    };
    const EXCLUSIVE: Option<&'static str> = Some(Self::VAR);
    /// Resets every zone of the guest's device and opens it through the spec parser.
    async fn create(&mut self, _: &Geometry) -> AnyDevice {
        let path = std::env::var(Self::VAR).unwrap();
        let dev = open_device(&format!("zbd:{path}")).await.unwrap();
        dev.zone_action(ZoneAction::Reset, ZoneTarget::All)
            .await
            .unwrap();
        dev
    }
    fn skip_reason() -> Option<String> {
        match (std::env::var_os("ZIOB_GUEST"), std::env::var_os(Self::VAR)) {
            (Some(_), Some(_)) => None,
            _ => Some(format!(
                "zbd needs a zoned block device, ${} is unset outside the ZIOB test guest",
                Self::VAR
            )),
        }
    }
    /// The device's geometry must be the one the guest was booted with.
    fn check_geometry(&self, _: &Geometry, got: &Geometry) {
        assert_guest_geometry(if NULLBLK { "ZIOB_NULLBLK" } else { "ZIOB_ZNS" }, got);
        got.validate().unwrap();
    }
}

conformance_suite!(mem, MemBackend);
conformance_suite!(mem_spec, MemSpecBackend);
conformance_suite!(nil, NilBackend);
conformance_suite!(emu, EmuBackend::new(), persistent);
conformance_suite!(emu_page_cache, EmuBackend::through_page_cache(), persistent);
conformance_suite!(zbd_zns, ZbdBackend::<false>::new());
conformance_suite!(zbd_nullblk, ZbdBackend::<true>::new());

/// `spdk:` on the test guest's QEMU ZNS namespace through SPDK's userspace NVMe driver
/// (cargo feature `spdk`). Opt-in with `ZIOB_SPDK=1` in a guest with `--hugepages 512`: the
/// first test binds the controller to uio_pci_generic, which takes the namespace away from
/// the kernel (zbd/nvme) for the rest of that guest run. "Creating" resets every zone; the
/// geometry is the device's, checked against the one the guest was booted with.
#[cfg(feature = "spdk")]
mod spdk_env;

#[cfg(feature = "spdk")]
struct SpdkBackend {
    spec: String,
}

#[cfg(feature = "spdk")]
impl SpdkBackend {
    fn new() -> SpdkBackend {
        SpdkBackend {
            spec: spdk_env::spdk_spec().expect("skip_reason said spdk is usable"),
        }
    }
}

#[cfg(feature = "spdk")]
impl Backend for SpdkBackend {
    type Dev = AnyDevice;
    const CAPS: Caps = Caps {
        stores_data: true,
        zbc: false,
    };
    const EXCLUSIVE: Option<&'static str> = Some("ZIOB_ZNS_BLOCK");
    async fn create(&mut self, _: &Geometry) -> AnyDevice {
        let dev = open_device(&self.spec).await.expect("open spdk device");
        dev.zone_action(ZoneAction::Reset, ZoneTarget::All)
            .await
            .expect("reset all");
        dev
    }
    fn skip_reason() -> Option<String> {
        spdk_env::spdk_spec().err().map(|e| format!("spdk: {e}"))
    }
    /// The device's geometry (ZNS Identify through SPDK) must be the guest's.
    fn check_geometry(&self, _: &Geometry, got: &Geometry) {
        assert_guest_geometry("ZIOB_ZNS", got);
        got.validate().unwrap();
    }
}

#[cfg(feature = "spdk")]
conformance_suite!(spdk, SpdkBackend::new());

#[cfg(not(feature = "spdk"))]
#[test]
fn spdk_conformance_skipped() {
    eprintln!(
        "skipped: spdk conformance: built without the cargo feature `spdk` \
         (needs an installed SPDK >= 25.09, see docs/SPDK.md)"
    );
}

/// `nvme:` on the test guest's QEMU ZNS namespace through NVMe passthrough (`$ZIOB_ZNS_CHAR`,
/// e.g. `/dev/ng0n1`). "Creating" resets every zone of the existing namespace; the geometry is
/// the device's (Identify), checked against the one the guest was booted with. The tests share
/// the namespace with `zbd_zns` (same lock). Elsewhere every test prints `skipped: …`.
struct NvmeBackend;

impl Backend for NvmeBackend {
    type Dev = AnyDevice;
    const CAPS: Caps = Caps {
        stores_data: true,
        zbc: false,
    };
    const SQE128: bool = true;
    // The ZNS namespace, whichever node it is opened by.
    const EXCLUSIVE: Option<&'static str> = Some("ZIOB_ZNS_BLOCK");
    async fn create(&mut self, _: &Geometry) -> AnyDevice {
        let path = std::env::var("ZIOB_ZNS_CHAR").unwrap();
        let dev = open_device(&format!("nvme:{path}")).await.unwrap();
        dev.zone_action(ZoneAction::Reset, ZoneTarget::All)
            .await
            .unwrap();
        dev
    }
    fn skip_reason() -> Option<String> {
        match (
            std::env::var_os("ZIOB_GUEST"),
            std::env::var_os("ZIOB_ZNS_CHAR"),
        ) {
            (Some(_), Some(_)) => None,
            _ => Some(
                "nvme needs the QEMU ZNS namespace's generic char device, $ZIOB_ZNS_CHAR is \
                 unset outside the ZIOB test guest"
                    .into(),
            ),
        }
    }
    /// The device's geometry (from Identify) must be the one the guest was booted with.
    fn check_geometry(&self, _: &Geometry, got: &Geometry) {
        assert_guest_geometry("ZIOB_ZNS", got);
        assert!(got.max_append_bytes <= got.zone_capacity_bytes);
        got.validate().unwrap();
    }
}

conformance_suite!(nvme, NvmeBackend);

/// [`conformance::run`] keeps a backend's shared device until the scenario's runtime has
/// stopped. The guest's devices are shared by tests on parallel threads; a task a scenario
/// leaves behind — the background close of a dropped ZIOB instance, which syncs — once
/// wrote to the next test's freshly reset device (`buffered_nvme::reset_and_reuse` failed with
/// an Invalid Write at a write pointer of 3 blocks, the previous test's unflushed data).
mod run_holds_the_device {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    const DEVICE: &str = "run-holds-the-device probe";
    static SCENARIO_RAN: AtomicBool = AtomicBool::new(false);
    static NEXT_TEST_HAS_DEVICE: AtomicBool = AtomicBool::new(false);
    static LEFTOVER_RAN_AFTER: AtomicBool = AtomicBool::new(false);

    struct Probe;

    impl Backend for Probe {
        type Dev = MemDevice;
        const CAPS: Caps = Caps {
            stores_data: true,
            zbc: false,
        };
        const EXCLUSIVE: Option<&'static str> = Some(DEVICE);
        async fn create(&mut self, g: &Geometry) -> MemDevice {
            MemDevice::new("mem:probe", g).unwrap()
        }
    }

    /// Stands for a leftover task's last device access: it runs when the runtime drops the
    /// task, slowly, and records whether another test held the device by then.
    struct LeftoverTask;

    impl Drop for LeftoverTask {
        fn drop(&mut self) {
            std::thread::sleep(Duration::from_millis(300));
            if NEXT_TEST_HAS_DEVICE.load(Ordering::SeqCst) {
                LEFTOVER_RAN_AFTER.store(true, Ordering::SeqCst);
            }
        }
    }

    #[test]
    fn until_its_runtime_has_stopped() {
        let scenario = std::thread::spawn(|| {
            conformance::run(
                || Probe,
                |_probe: Probe| async move {
                    let leftover = LeftoverTask;
                    ziob_runtime::spawn(async move {
                        let _leftover = leftover;
                        std::future::pending::<()>().await
                    })
                    .detach();
                    SCENARIO_RAN.store(true, Ordering::SeqCst);
                },
            )
        });
        while !SCENARIO_RAN.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let _device = conformance::exclusive(DEVICE);
        NEXT_TEST_HAS_DEVICE.store(true, Ordering::SeqCst);
        scenario.join().unwrap();
        assert!(
            !LEFTOVER_RAN_AFTER.load(Ordering::SeqCst),
            "a task of the previous test's runtime ran after the next test took the device"
        );
    }
}
