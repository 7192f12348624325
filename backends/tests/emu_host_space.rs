//! emu and the host filesystem's space: a reset gives the zone's space back (hole punch), a
//! geometry whose file size overflows is refused, and a full filesystem (ENOSPC on a small
//! tmpfs, root only) fails writes without moving a write pointer over unwritten data or
//! making a zone Read Only.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ziob_backends::{
    EmuDevice, ErrorKind, Geometry, ZoneAction, ZoneState, ZoneTarget, ZonedDevice,
};
use ziob_runtime::DmaBuf;

fn on_core<T: Send + 'static, F: std::future::Future<Output = T> + 'static>(
    f: impl FnOnce() -> F + Send + 'static,
) -> T {
    let rt = ziob_runtime::Runtime::builder().cores(1).build().unwrap();
    rt.block_on(f).unwrap()
}

fn allocated_bytes(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

#[test]
fn a_reset_gives_the_zone_space_back_to_the_host_with_discard() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.zns");
    let p = path.clone();
    on_core(move || async move {
        let dev = EmuDevice::create(&p, &Geometry::new(4, 4 << 20))
            .await
            .unwrap()
            .discard_on_reset(true);
        for zone in [1, 2] {
            for i in 0..8u64 {
                let (r, _) = dev
                    .write(
                        zone,
                        i << 19,
                        DmaBuf::from_slice(&vec![zone as u8 + 1; 512 << 10]),
                    )
                    .await;
                r.unwrap();
            }
        }
        dev.flush().await.unwrap();
        let full = allocated_bytes(&p);
        assert!(full >= 8 << 20, "both zones allocated: {full} bytes");
        dev.zone_action(ZoneAction::Reset, ZoneTarget::One(1))
            .await
            .unwrap();
        let after_one = allocated_bytes(&p);
        assert!(
            after_one + (3 << 20) <= full,
            "resetting a full 4 MiB zone freed only {} bytes",
            full - after_one
        );
        let (r, buf) = dev
            .read(2, 0, 4 << 20, DmaBuf::with_capacity(4 << 20))
            .await;
        r.unwrap();
        assert!(buf.iter().all(|&b| b == 3), "zone 2 keeps its data");
        dev.zone_action(ZoneAction::Reset, ZoneTarget::All)
            .await
            .unwrap();
        let after_all = allocated_bytes(&p);
        assert!(after_all + (7 << 20) <= full, "{after_all} of {full} left");
        // The reset zone takes data again and reads it back.
        dev.write(1, 0, DmaBuf::from_slice(&[9; 8192]))
            .await
            .0
            .unwrap();
        let (r, buf) = dev.read(1, 0, 16384, DmaBuf::with_capacity(16384)).await;
        r.unwrap();
        assert!(buf[..8192].iter().all(|&b| b == 9) && buf[8192..].iter().all(|&b| b == 0));
    });
}

#[test]
fn a_geometry_whose_file_size_overflows_is_refused_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.zns");
    let p = path.clone();
    let e = on_core(move || async move {
        // The issue's `--zones 1 --zone-size 18446744073709547520`.
        EmuDevice::create(&p, &Geometry::new(1, 18_446_744_073_709_547_520))
            .await
            .err()
            .unwrap()
    });
    assert_eq!(e.kind(), ErrorKind::InvalidGeometry, "{e}");
    assert!(!path.exists(), "no file is made for a refused geometry");
}

/// A tmpfs of a few MiB mounted for one test; unmounted on drop.
struct SmallTmpfs {
    dir: PathBuf,
    _parent: tempfile::TempDir,
}

impl SmallTmpfs {
    fn mount(size: &str) -> Option<SmallTmpfs> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return None;
        }
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("fs");
        std::fs::create_dir(&dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(SmallTmpfs {
            dir,
            _parent: parent,
        })
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.dir).status();
    }
}

/// Blocks of append `id` to `zone`, self-describing.
fn block(zone: u32, id: u64) -> Vec<u8> {
    let mut b = vec![(id as u8) ^ 0xA5; 4096];
    b[..4].copy_from_slice(&zone.to_le_bytes());
    b[4..12].copy_from_slice(&id.to_le_bytes());
    b
}

#[test]
fn a_full_host_filesystem_fails_writes_without_a_read_only_zone() {
    let Some(fs) = SmallTmpfs::mount("3M") else {
        println!("skipped: mounting a tmpfs needs root (the injected-fault test covers ENOSPC semantics)");
        return;
    };
    let path = fs.dir.join("dev.zns");
    on_core(move || async move {
        let mut g = Geometry::new(4, 2 << 20);
        g.max_append_bytes = 64 << 10;
        let dev = EmuDevice::create(&path, &g).await.unwrap();
        // Pipelined appends (16 in flight per zone) until the filesystem is full.
        let mut failures = 0;
        let mut id = 0u64;
        for round in 0..12 {
            let mut batch = Vec::new();
            for zone in 0..4u32 {
                for _ in 0..4 {
                    id += 1;
                    let data: Vec<u8> = (0..16).flat_map(|_| block(zone, id)).collect();
                    let d = dev.clone();
                    batch.push(ziob_runtime::spawn(async move {
                        d.append(zone, DmaBuf::from_slice(&data)).await.0
                    }));
                }
            }
            for t in batch {
                match t.await {
                    Ok(_) => {}
                    Err(e) => {
                        assert!(
                            matches!(
                                e.kind(),
                                ErrorKind::Io
                                    | ErrorKind::Aborted
                                    | ErrorKind::BoundaryError
                                    | ErrorKind::ZoneFull
                            ),
                            "round {round}: {e}"
                        );
                        failures += 1;
                    }
                }
            }
        }
        assert!(failures > 0, "a 3 MiB tmpfs never filled up");
        // Wait until every zone is settled (dropped nothing here, so at once).
        ziob_runtime::sleep(Duration::from_millis(1)).await.unwrap();
        let zones = dev.report_all().await.unwrap();
        for z in &zones {
            assert_ne!(z.state, ZoneState::ReadOnly, "zone {}: {z:?}", z.index);
            let wp = z.write_pointer_bytes;
            if wp == 0 {
                continue;
            }
            let (r, buf) = dev
                .read(z.index, 0, wp as usize, DmaBuf::with_capacity(wp as usize))
                .await;
            r.unwrap();
            for (i, b) in buf.chunks(4096).enumerate() {
                let id = u64::from_le_bytes(b[4..12].try_into().unwrap());
                assert!(
                    b == &block(z.index, id)[..],
                    "zone {} block {i} below the write pointer {wp} was never written",
                    z.index
                );
            }
        }
        dev.flush().await.unwrap();
        // Resets work, give the space back, and the zones take data again.
        dev.zone_action(ZoneAction::Reset, ZoneTarget::All)
            .await
            .unwrap();
        for zone in 0..4u32 {
            let (r, _) = dev.append(zone, DmaBuf::from_slice(&block(zone, 0))).await;
            r.unwrap_or_else(|e| panic!("zone {zone} after reset: {e}"));
        }
        dev.flush().await.unwrap();
    });
    drop(fs);
}
