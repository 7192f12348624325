//! Shared pieces of the `ziob fs` tests (`mod cli_support; mod fs_support;`): a formatted emu
//! device, files written through the zonefs API in this process, and the device file's bytes.
#![allow(dead_code)] // each test file uses its own part

use std::path::Path;

use ziob::{Client, Runtime, ZiobConfig};
use ziob_zonefs::{WriteLifetime, ZoneFs};

use crate::cli_support::{device, ok, Dev};

/// Zones of the test devices.
pub const ZONES: u32 = 16;
/// Zone size (= capacity) of the test devices.
pub const ZONE_BYTES: u64 = 1 << 20;

/// An emu device of [`ZONES`] zones of 1 MiB, not formatted.
pub fn blank() -> Dev {
    device(&["--zones", "16", "--zone-size", "1M"])
}

/// An emu device formatted by `ziob fs mkfs`.
pub fn formatted() -> Dev {
    let d = blank();
    ok(&["fs", "mkfs", &d.spec], b"");
    d
}

/// One step of work on the file system.
pub enum Op<'a> {
    /// Create a file of this class.
    Create(&'a str, WriteLifetime),
    /// Append bytes.
    Append(&'a str, &'a [u8]),
    /// Sync the file.
    Sync(&'a str),
    /// Delete the file.
    Delete(&'a str),
}

/// Mounts the file system on `spec` in this process, runs `ops`, and ends the instance: a
/// clean close, or (`crash`) an abandon, as a crashed process (unsynced data lost).
pub fn run_ops(spec: &str, ops: &[Op], crash: bool) {
    let rt = Runtime::builder().cores(1).build().unwrap();
    futures::executor::block_on(async {
        let client = Client::open(rt.handle(), spec, ZiobConfig::default())
            .await
            .unwrap();
        let fs = ZoneFs::mount(client.clone()).await.unwrap();
        for op in ops {
            match *op {
                Op::Create(p, l) => fs.create(p, l).await.unwrap(),
                Op::Append(p, data) => fs.append(p, data).await.unwrap(),
                Op::Sync(p) => fs.sync(p).await.unwrap(),
                Op::Delete(p) => fs.delete(p).await.unwrap(),
            }
        }
        drop(fs);
        if crash {
            client
                .with_ziob(|z| async move { z.abandon().await })
                .await
                .unwrap();
        } else {
            client.close().await.unwrap();
        }
    });
}

/// The whole device file.
pub fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// Byte offset of zone `zone`'s data in the device file.
pub fn zone_offset(zone: u32) -> u64 {
    let g = ziob::Geometry::new(ZONES, ZONE_BYTES);
    ziob::backends::emu::format::Layout::for_geometry(&g).data_offset_bytes
        + zone as u64 * ZONE_BYTES
}

/// Overwrites bytes of the device file at `at`.
pub fn poke(path: &Path, at: u64, data: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(data, at).unwrap();
}

/// `fs ls --json` as values.
pub fn ls_json(spec: &str, dir: &str) -> Vec<serde_json::Value> {
    serde_json::from_str(&ok(&["fs", "ls", spec, dir, "--json"], b"")).unwrap()
}

/// `fs df --json`.
pub fn df_json(spec: &str) -> serde_json::Value {
    serde_json::from_str(&ok(&["fs", "df", spec, "--json"], b"")).unwrap()
}
