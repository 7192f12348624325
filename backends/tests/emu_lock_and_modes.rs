//! The emu file lock, read-only opens and files that are not emu devices.
//!
//! Another process holding the lock is modelled with a `flock` on a descriptor of the test's
//! own: `flock` locks belong to open file descriptions, so a second description conflicts
//! exactly as another process's would. One test also runs the `flock(1)` tool as a real second
//! process.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ziob_backends::{
    open_device, DeviceError, EmuDevice, ErrorKind, Geometry, LatencyModel, OpenMode, ZoneAction,
    ZoneTarget, ZonedDevice,
};
use ziob_runtime::DmaBuf;

fn on_core<T: Send + 'static, F: std::future::Future<Output = T> + 'static>(
    f: impl FnOnce() -> F + Send + 'static,
) -> T {
    let rt = ziob_runtime::Runtime::builder().cores(1).build().unwrap();
    rt.block_on(f).unwrap()
}

/// Runs `f` on a thread and fails (instead of hanging) if it takes longer than 20 s.
fn with_watchdog<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{what}: hung for 20 s"))
}

fn make_device(dir: &Path) -> PathBuf {
    let path = dir.join("dev.zns");
    let p = path.clone();
    on_core(move || async move {
        let d = EmuDevice::create(&p, &Geometry::new(4, 1 << 20))
            .await
            .unwrap();
        d.write(0, 0, DmaBuf::from_slice(&[7; 8192]))
            .await
            .0
            .unwrap();
        d.flush().await.unwrap();
    });
    path
}

/// A `flock` held by "another process": a description of the test's own (the lock lives as
/// long as the file).
struct OtherHolder {
    _file: std::fs::File,
}

impl OtherHolder {
    fn try_take(path: &Path, exclusive: bool) -> Option<OtherHolder> {
        let f = std::fs::File::open(path).unwrap();
        let op = if exclusive {
            libc::LOCK_EX
        } else {
            libc::LOCK_SH
        } | libc::LOCK_NB;
        // SAFETY: flock on a descriptor the test owns.
        let rc = unsafe { libc::flock(f.as_raw_fd(), op) };
        (rc == 0).then_some(OtherHolder { _file: f })
    }

    /// Takes the lock, retrying for a while: while another test of this process spawns a
    /// child, the child holds copies of this process's descriptors (a device's lock among them)
    /// until it execs.
    fn take(path: &Path, exclusive: bool) -> OtherHolder {
        let start = std::time::Instant::now();
        loop {
            if let Some(h) = OtherHolder::try_take(path, exclusive) {
                return h;
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "the lock was not released"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[test]
fn an_open_device_excludes_other_processes() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_device(dir.path());
    let p = path.clone();
    on_core(move || async move {
        let dev = EmuDevice::open(&p, LatencyModel::default()).await.unwrap();
        assert!(
            OtherHolder::try_take(&p, false).is_none(),
            "a read-write open must keep other processes out, readers too"
        );
        drop(dev);
        // Dropping the device releases the lock.
        OtherHolder::take(&p, true);
    });
}

#[test]
fn a_second_opener_gets_device_busy() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_device(dir.path());
    let p = path.clone();
    on_core(move || async move {
        let other = OtherHolder::take(&p, true);
        let e = EmuDevice::open(&p, LatencyModel::default())
            .await
            .err()
            .unwrap();
        assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
        assert_eq!(
            e.to_string(),
            format!(
                "{}: device busy: another process has it open (a read-write open needs it alone)",
                p.display()
            )
        );
        let e = open_device(&format!("emu:{}", p.display()))
            .await
            .err()
            .unwrap();
        assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
        let e = EmuDevice::open_read_only(&p, LatencyModel::default())
            .await
            .err()
            .unwrap();
        assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
        drop(other);
        // A shared holder lets read-only opens in, not read-write ones.
        let other = OtherHolder::take(&p, false);
        let ro = EmuDevice::open_read_only(&p, LatencyModel::default())
            .await
            .unwrap();
        assert_eq!(ro.mode(), OpenMode::ReadOnly);
        let e = EmuDevice::open(&p, LatencyModel::default())
            .await
            .err()
            .unwrap();
        assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
        drop((ro, other));
        EmuDevice::open(&p, LatencyModel::default()).await.unwrap();
    });
}

#[test]
fn a_real_second_process_is_refused_while_the_device_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_device(dir.path());
    let p = path.clone();
    on_core(move || async move {
        let flock = |args: &[&str]| {
            std::process::Command::new("flock")
                .args(args)
                .arg(&p)
                .arg("true")
                .status()
        };
        let Ok(free) = flock(&["-w", "5", "-s"]) else {
            println!("skipped: the flock(1) tool is not installed");
            return;
        };
        assert!(free.success(), "nobody holds the file yet");
        let dev = EmuDevice::open(&p, LatencyModel::default()).await.unwrap();
        let status = flock(&["-n", "-s"]).unwrap();
        assert!(!status.success(), "flock(1) got a lock the device holds");
        drop(dev);
        let ro = EmuDevice::open_read_only(&p, LatencyModel::default())
            .await
            .unwrap();
        assert!(
            flock(&["-w", "5", "-s"]).unwrap().success(),
            "readers share"
        );
        assert!(
            !flock(&["-n", "-x"]).unwrap().success(),
            "no writer while read"
        );
        drop(ro);
    });
}

#[test]
fn opens_in_one_process_share_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_device(dir.path());
    let p = path.clone();
    on_core(move || async move {
        let ro = EmuDevice::open_read_only(&p, LatencyModel::default())
            .await
            .unwrap();
        // A read-write open of the same process upgrades the process's lock.
        let rw = EmuDevice::open(&p, LatencyModel::default()).await.unwrap();
        assert!(OtherHolder::try_take(&p, false).is_none());
        drop(rw);
        assert!(
            OtherHolder::try_take(&p, false).is_none(),
            "still held while the read-only device lives"
        );
        drop(ro);
        OtherHolder::take(&p, true);
    });
}

#[test]
fn a_read_only_open_reads_and_reports_and_refuses_changes() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_device(dir.path());
    // Immutable (chattr +i): no open for writing succeeds, not even root's.
    let immutable = std::process::Command::new("chattr")
        .arg("+i")
        .arg(&path)
        .status()
        .is_ok_and(|s| s.success());
    if !immutable {
        println!("note: chattr +i is not available here; the read-only open is checked on a writable file");
    }
    let p = path.clone();
    let result = std::panic::catch_unwind(move || {
        on_core(move || async move {
            if immutable {
                let e = EmuDevice::open(&p, LatencyModel::default())
                    .await
                    .err()
                    .unwrap();
                assert_eq!(e.kind(), ErrorKind::Io, "{e}");
            }
            let dev = EmuDevice::open_read_only(&p, LatencyModel::default())
                .await
                .unwrap();
            let zones = dev.report_all().await.unwrap();
            assert_eq!(zones[0].write_pointer_bytes, 8192);
            let (r, buf) = dev.read(0, 0, 8192, DmaBuf::with_capacity(8192)).await;
            r.unwrap();
            assert!(buf.iter().all(|&b| b == 7));
            let (r, _) = dev.write(0, 8192, DmaBuf::from_slice(&[1; 4096])).await;
            let e = r.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ReadOnlyDevice, "{e}");
            assert!(
                e.to_string()
                    .ends_with("write to zone 0 refused: the device is opened read-only"),
                "{e}"
            );
            let (r, _) = dev.append(1, DmaBuf::from_slice(&[1; 4096])).await;
            assert_eq!(r.unwrap_err().kind(), ErrorKind::ReadOnlyDevice);
            let e = dev
                .zone_action(ZoneAction::Reset, ZoneTarget::All)
                .await
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ReadOnlyDevice);
            dev.flush().await.unwrap();
            assert_eq!(dev.report_all().await.unwrap(), zones, "nothing changed");
        })
    });
    if immutable {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&path)
            .status();
    }
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

fn open_error(path: PathBuf) -> DeviceError {
    with_watchdog("opening a non-file", move || {
        on_core(move || async move {
            EmuDevice::open(&path, LatencyModel::default())
                .await
                .err()
                .unwrap()
        })
    })
}

#[test]
fn a_fifo_or_a_directory_is_refused_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let e = open_error(fifo.clone());
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "invalid argument: emu:{} is a FIFO; an emu device is a regular file made by `ziob create`",
            fifo.display()
        )
    );
    let e = open_error(dir.path().to_path_buf());
    assert!(e.to_string().contains("a directory"), "{e}");
    let spec = format!("emu:{}", fifo.display());
    let e = with_watchdog("open_device on a FIFO", move || {
        on_core(move || async move { open_device(&spec).await.err().unwrap() })
    });
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

#[test]
fn open_device_read_only_shares_the_file_with_other_readers() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_device(dir.path());
    let spec = format!("emu:{}", path.display());
    let p = path.clone();
    on_core(move || async move {
        let reader = OtherHolder::take(&p, false);
        let d = ziob_backends::open_device_read_only(&spec).await.unwrap();
        assert_eq!(d.name(), spec);
        assert!(d.table_recovery().is_none());
        assert_eq!(
            d.report_zones(0, 1).await.unwrap()[0].write_pointer_bytes,
            8192
        );
        let (r, _) = d.write(0, 8192, DmaBuf::from_slice(&[1; 4096])).await;
        assert_eq!(r.unwrap_err().kind(), ErrorKind::ReadOnlyDevice);
        drop(d);
        let e = open_device(&spec).await.err().unwrap();
        assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
        drop(reader);
    });
}

#[test]
fn a_second_read_write_open_in_the_process_is_busy_until_the_first_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_device(dir.path());
    let p = path.clone();
    on_core(move || async move {
        let a = EmuDevice::open(&p, LatencyModel::default()).await.unwrap();
        let wp0 = a.report_zones(0, 1).await.unwrap()[0].write_pointer_bytes;
        // Two read-write devices would keep two zone tables; each flush would undo the other's.
        let e = EmuDevice::open(&p, LatencyModel::default())
            .await
            .err()
            .expect("a second read-write open in the process is refused");
        assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
        assert!(
            e.to_string()
                .contains("this process has it open read-write"),
            "{e}"
        );
        let e = open_device(&format!("emu:{}", p.display()))
            .await
            .err()
            .unwrap();
        assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
        // Read-only opens share.
        let ro = EmuDevice::open_read_only(&p, LatencyModel::default())
            .await
            .unwrap();
        let (r, _) = a.append(0, DmaBuf::from_slice(&[1; 4096])).await;
        r.unwrap();
        a.flush().await.unwrap();
        // A clone keeps the device (and its claim) alive.
        let a2 = a.clone();
        drop(a);
        let e = EmuDevice::open(&p, LatencyModel::default())
            .await
            .err()
            .unwrap();
        assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
        drop(a2);
        let c = EmuDevice::open(&p, LatencyModel::default()).await.unwrap();
        let wp = c.report_zones(0, 1).await.unwrap()[0].write_pointer_bytes;
        assert_eq!(wp, wp0 + 4096, "the flushed append survives");
        drop((c, ro));
    });
}

#[test]
fn a_failed_upgrade_keeps_the_shared_lock_of_the_read_only_devices() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_device(dir.path());
    let p = path.clone();
    on_core(move || async move {
        let ro = EmuDevice::open_read_only(&p, LatencyModel::default())
            .await
            .unwrap();
        let reader = OtherHolder::take(&p, false);
        let e = EmuDevice::open(&p, LatencyModel::default())
            .await
            .err()
            .unwrap();
        assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
        drop(reader);
        // Tried for a while: a child another test forks holds copies of this process's lock
        // descriptors until it execs, which would hide a lost lock for that moment.
        for _ in 0..40 {
            assert!(
                OtherHolder::try_take(&p, true).is_none(),
                "a writer got the file while this process reads it"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(ro);
        OtherHolder::take(&p, true);
    });
}
