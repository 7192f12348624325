//! The conformance suite run against every backend: one line per backend at the bottom.

#[macro_use]
mod conformance;

use std::path::PathBuf;

use conformance::{Backend, Caps};
use ziob_backends::{
    open_device, AnyDevice, EmuDevice, Geometry, LatencyModel, MemDevice, NilDevice,
};

struct MemBackend;

impl Backend for MemBackend {
    type Dev = MemDevice;
    const CAPS: Caps = Caps { stores_data: true };
    async fn create(&mut self, g: &Geometry) -> MemDevice {
        MemDevice::new("mem:conformance", g).unwrap()
    }
}

/// mem through the spec parser and [`AnyDevice`] dispatch.
struct MemSpecBackend;

impl Backend for MemSpecBackend {
    type Dev = AnyDevice;
    const CAPS: Caps = Caps { stores_data: true };
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
    const CAPS: Caps = Caps { stores_data: false };
    async fn create(&mut self, g: &Geometry) -> NilDevice {
        NilDevice::new("nil:conformance", g).unwrap()
    }
}

struct EmuBackend {
    dir: tempfile::TempDir,
}

impl EmuBackend {
    fn new() -> EmuBackend {
        EmuBackend {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn path(&self) -> PathBuf {
        self.dir.path().join("dev.zns")
    }
}

impl Backend for EmuBackend {
    type Dev = EmuDevice;
    const CAPS: Caps = Caps { stores_data: true };
    async fn create(&mut self, g: &Geometry) -> EmuDevice {
        EmuDevice::create(self.path(), g).await.unwrap()
    }
    async fn reopen(&mut self, dev: EmuDevice) -> EmuDevice {
        drop(dev);
        EmuDevice::open(self.path(), LatencyModel::default())
            .await
            .unwrap()
    }
}

conformance_suite!(mem, MemBackend);
conformance_suite!(mem_spec, MemSpecBackend);
conformance_suite!(nil, NilBackend);
conformance_suite!(emu, EmuBackend::new(), persistent);
