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
