//! The backend conformance suite (the same scenarios as every backend's) run through the ZIOB
//! buffer: a `Ziob` instance is itself a `ZonedDevice`. The buffer presents the device's
//! geometry without open/active limits — it lifts them — so the two resource-limit scenarios
//! note that they are skipped (the buffer's own limit behaviour is tested in
//! `buffer_backpressure_errors_limits.rs`). One stated difference: Open/Close of a zone with
//! no data on the device only changes the state the buffer shows, so after a crash such a zone
//! is Empty rather than Closed (`DATALESS_STATES_VOLATILE`). Everything else must behave
//! exactly like a device.

#[path = "../../backends/tests/conformance/mod.rs"]
#[macro_use]
mod conformance;

use std::path::PathBuf;

use conformance::{Backend, Caps};
use ziob::backends::{EmuDevice, LatencyModel, MemDevice};
use ziob::{Geometry, Ziob, ZiobConfig};

fn config() -> ZiobConfig {
    ZiobConfig {
        writeback_unit_bytes: Some(64 << 10),
        shard_budget_bytes: 1 << 20,
        ..ZiobConfig::default()
    }
}

fn lifted(g: &Geometry) -> Geometry {
    Geometry {
        max_open_zones: None,
        max_active_zones: None,
        ..*g
    }
}

/// The buffer over a `mem` device.
struct BufferedMem;

impl Backend for BufferedMem {
    type Dev = Ziob<MemDevice>;
    const CAPS: Caps = Caps {
        stores_data: true,
        zbc: false,
    };
    async fn create(&mut self, g: &Geometry) -> Ziob<MemDevice> {
        let dev = MemDevice::new("mem:conformance", g).unwrap();
        Ziob::with_device(dev, config()).await.unwrap()
    }
    fn check_geometry(&self, requested: &Geometry, got: &Geometry) {
        assert_eq!(
            got,
            &lifted(requested),
            "the buffer lifts only the open/active limits"
        );
    }
}

/// The buffer over an `emu` file; reopening is a process crash: the buffer is dropped
/// without a flush and the device is opened again.
struct BufferedEmu {
    dir: tempfile::TempDir,
}

impl BufferedEmu {
    fn new() -> BufferedEmu {
        BufferedEmu {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn path(&self) -> PathBuf {
        self.dir.path().join("dev.zns")
    }
}

impl Backend for BufferedEmu {
    type Dev = Ziob<EmuDevice>;
    const CAPS: Caps = Caps {
        stores_data: true,
        zbc: false,
    };
    const DATALESS_STATES_VOLATILE: bool = true;
    async fn create(&mut self, g: &Geometry) -> Ziob<EmuDevice> {
        let dev = EmuDevice::create(self.path(), g).await.unwrap();
        Ziob::with_device(dev, config()).await.unwrap()
    }
    fn check_geometry(&self, requested: &Geometry, got: &Geometry) {
        assert_eq!(
            got,
            &lifted(requested),
            "the buffer lifts only the open/active limits"
        );
    }
    async fn reopen(&mut self, dev: Ziob<EmuDevice>) -> Ziob<EmuDevice> {
        dev.abandon().await.unwrap();
        let dev = EmuDevice::open(self.path(), LatencyModel::default())
            .await
            .unwrap();
        Ziob::with_device(dev, config()).await.unwrap()
    }
}

conformance_suite!(buffered_mem, BufferedMem);
conformance_suite!(buffered_emu, BufferedEmu::new(), persistent);

/// The buffer over a real zoned device of the test guest (`cargo xtask vm-test`): `zbd:` on
/// the QEMU ZNS namespace (`KIND = 0`) or on zoned null_blk (`1`), `nvme:` passthrough on the
/// ZNS namespace (`2`). The buffer shows ZNS semantics whatever the device (null_blk's ZBC
/// differences stay below it). Elsewhere every test prints `skipped: …`.
struct BufferedGuest<const KIND: u8>;

impl<const KIND: u8> BufferedGuest<KIND> {
    const VAR: &'static str = match KIND {
        0 => "ZIOB_ZNS_BLOCK",
        1 => "ZIOB_NULLBLK_ZONED",
        _ => "ZIOB_ZNS_CHAR",
    };
    /// One lock per physical device: the ZNS namespace is reached by block or char node.
    const DEVICE: &'static str = if KIND == 1 {
        "ZIOB_NULLBLK_ZONED"
    } else {
        "ZIOB_ZNS_BLOCK"
    };
    fn spec() -> String {
        let path = std::env::var(Self::VAR).unwrap();
        if KIND == 2 {
            format!("nvme:{path}")
        } else {
            format!("zbd:{path}")
        }
    }
}

impl<const KIND: u8> Backend for BufferedGuest<KIND> {
    type Dev = Ziob<ziob::AnyDevice>;
    const CAPS: Caps = Caps {
        stores_data: true,
        zbc: false,
    };
    const SQE128: bool = KIND == 2;
    // A dropped instance closes in the background (it syncs): `run` keeps the device until
    // the runtime has stopped, so that write-back never lands on the next test's device.
    const EXCLUSIVE: Option<&'static str> = Some(Self::DEVICE);
    async fn create(&mut self, _: &Geometry) -> Ziob<ziob::AnyDevice> {
        use ziob::ZonedDevice;
        let dev = ziob::open_device(&Self::spec()).await.unwrap();
        dev.zone_action(ziob::ZoneAction::Reset, ziob::ZoneTarget::All)
            .await
            .unwrap();
        Ziob::with_device(dev, config()).await.unwrap()
    }
    fn skip_reason() -> Option<String> {
        match (std::env::var_os("ZIOB_GUEST"), std::env::var_os(Self::VAR)) {
            (Some(_), Some(_)) => None,
            _ => Some(format!(
                "the buffer over a real zoned device needs ${}, unset outside the ZIOB test guest",
                Self::VAR
            )),
        }
    }
    fn check_geometry(&self, _: &Geometry, got: &Geometry) {
        assert_eq!((got.max_open_zones, got.max_active_zones), (None, None));
        got.validate().unwrap();
    }
}

conformance_suite!(buffered_zbd_zns, BufferedGuest::<0>);
conformance_suite!(buffered_zbd_nullblk, BufferedGuest::<1>);
conformance_suite!(buffered_nvme, BufferedGuest::<2>);
