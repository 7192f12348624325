//! A missing, truncated or damaged emu file gives a clear error, never a panic and never a
//! silent reformat; a torn zone-table write falls back to the previous slot.

use std::path::{Path, PathBuf};

use ziob_backends::emu::format::{self, Layout};
use ziob_backends::{
    create_device, open_device, DeviceError, EmuDevice, ErrorKind, Geometry, LatencyModel,
    ZoneState, ZonedDevice,
};
use ziob_runtime::DmaBuf;

fn on_core<T: Send + 'static, F: std::future::Future<Output = T> + 'static>(
    f: impl FnOnce() -> F + Send + 'static,
) -> T {
    let rt = ziob_runtime::Runtime::builder().cores(1).build().unwrap();
    rt.block_on(f).unwrap()
}

fn geometry() -> Geometry {
    let mut g = Geometry::new(4, 256 * 1024);
    g.max_open_zones = Some(2);
    g
}

/// Creates a device with 8 KiB flushed in zone 0 and returns its path.
fn make_device(dir: &Path) -> PathBuf {
    let path = dir.join("dev.zns");
    let p = path.clone();
    on_core(move || async move {
        let d = EmuDevice::create(&p, &geometry()).await.unwrap();
        d.write(0, 0, DmaBuf::from_slice(&[0xAB; 8192]))
            .await
            .0
            .unwrap();
        d.flush().await.unwrap();
    });
    path
}

fn open(path: &Path) -> Result<EmuDevice, DeviceError> {
    let p = path.to_path_buf();
    on_core(move || async move { EmuDevice::open(&p, LatencyModel::default()).await })
}

fn patch(path: &Path, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset).unwrap();
}

#[test]
fn missing_file_is_an_io_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.zns");
    let e = open(&path).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert_eq!(
        e.to_string(),
        format!(
            "emu:{}: open failed: No such file or directory (os error 2)",
            path.display()
        )
    );
    assert!(!path.exists(), "opening must never create a device");
}

#[test]
fn create_refuses_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_device(dir.path());
    let spec = format!("emu:{}", path.display());
    let e = on_core(move || async move { create_device(&spec, &geometry()).await.err().unwrap() });
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(e.to_string().contains("File exists"), "{e}");
    assert_eq!(
        open(&path).unwrap().geometry(),
        &geometry(),
        "the existing device is untouched"
    );
}

#[test]
fn truncated_and_empty_files_are_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_device(dir.path());
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(100_000).unwrap();
    let e = open(&path).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Corrupt);
    let want_len = Layout::for_geometry(&geometry()).file_bytes(&geometry());
    assert_eq!(
        e.to_string(),
        format!(
            "{} is not a usable emu device: the file is truncated: 100000 bytes, the geometry needs {want_len}",
            path.display()
        )
    );
    f.set_len(0).unwrap();
    let e = open(&path).err().unwrap();
    assert!(
        e.to_string()
            .ends_with("the file is shorter than its 4096-byte header"),
        "{e}"
    );
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        0,
        "never reformatted"
    );
}

#[test]
fn damaged_header_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_device(dir.path());
    patch(&path, 20, &[0xFF]);
    let e = open(&path).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Corrupt);
    assert!(e.to_string().contains("header checksum mismatch"), "{e}");
    patch(&path, 0, b"NOTZIOB!");
    let e = open(&path).err().unwrap();
    assert!(e.to_string().contains("bad magic"), "{e}");
}

#[test]
fn damaged_newest_table_is_an_error_not_a_silent_rollback() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_device(dir.path());
    // create wrote sequences 0 and 1; the flush wrote sequence 2 into slot 0. Bytes 30..38 of
    // the slot are zone 0's reserved bytes and written bytes: no table write produces 0x5A there.
    let layout = Layout::for_geometry(&geometry());
    patch(&path, layout.slot_offset(0) + 30, &[0x5A; 8]);
    let e = open(&path).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Corrupt);
    assert!(e.to_string().contains("slot 0 is damaged"), "{e}");
    assert!(e.to_string().contains("checksum mismatch"), "{e}");
    patch(&path, layout.slot_offset(1) + 30, &[0x5A; 8]);
    let e = open(&path).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Corrupt);
    assert!(e.to_string().contains("no valid zone table"), "{e}");
}

#[test]
fn table_inconsistent_with_geometry_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_device(dir.path());
    let g = geometry();
    let layout = Layout::for_geometry(&g);
    let mut zones = vec![
        format::TableEntry::unchecked(ziob_backends::PersistedZone {
            state: ZoneState::Empty,
            written_bytes: 0
        });
        4
    ];
    zones[1].zone.written_bytes = 4096; // Empty with data
    patch(
        &path,
        layout.slot_offset(1),
        &format::encode_table(&layout, 9, &zones),
    );
    let e = open(&path).err().unwrap();
    assert!(
        e.to_string().ends_with(
            "zone table slot 1 (sequence 9): zone 1: state Empty with 4096 bytes written"
        ),
        "{e}"
    );
}

#[test]
fn reopen_by_spec_keeps_data_and_uses_direct_io() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_device(dir.path());
    let spec = format!("emu:{},lat_us=1", path.display());
    on_core(move || async move {
        let d = open_device(&spec).await.unwrap();
        assert_eq!(d.name(), spec);
        if let ziob_backends::AnyDevice::Emu(e) = &d {
            // tmpfs and some overlay filesystems refuse O_DIRECT; the device then runs buffered.
            eprintln!("emu O_DIRECT: {}", e.is_direct());
        }
        let (r, buf) = d.read(0, 0, 12288, DmaBuf::with_capacity(12288)).await;
        r.unwrap();
        assert!(buf[..8192].iter().all(|&b| b == 0xAB));
        assert!(buf[8192..].iter().all(|&b| b == 0));
        assert_eq!(
            d.report_zones(0, 1).await.unwrap()[0].state,
            ZoneState::Closed
        );
    });
}

#[test]
fn a_direct_0_spec_opens_through_the_page_cache_and_keeps_the_data() {
    // /var/tmp rather than /tmp: /tmp is often tmpfs, which refuses O_DIRECT, and then the
    // default open would be buffered too and show no contrast.
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let path = make_device(dir.path());
    let plain = format!("emu:{}", path.display());
    let spec = format!("{plain},direct=0");
    on_core(move || async move {
        let d = open_device(&plain).await.unwrap();
        let ziob_backends::AnyDevice::Emu(e) = &d else {
            panic!("not emu: {}", d.name());
        };
        if !e.is_direct() {
            // tmpfs and some overlay filesystems refuse O_DIRECT: every open is buffered.
            eprintln!("skipped the contrast: this filesystem refuses O_DIRECT");
        }
        drop(d);
        for read_only in [false, true] {
            let d = if read_only {
                ziob_backends::open_device_read_only(&spec).await
            } else {
                open_device(&spec).await
            }
            .unwrap();
            let ziob_backends::AnyDevice::Emu(e) = &d else {
                panic!("not emu: {}", d.name());
            };
            assert!(!e.is_direct(), "{spec} uses O_DIRECT");
            let (r, buf) = d.read(0, 0, 12288, DmaBuf::with_capacity(12288)).await;
            r.unwrap();
            assert!(buf[..8192].iter().all(|&b| b == 0xAB));
            assert!(buf[8192..].iter().all(|&b| b == 0));
        }
    });
}
