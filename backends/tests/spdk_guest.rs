//! `spdk:` in the QEMU guest: read, write, zone append, report, zone management, flush, and
//! one qpair per core. Skips (and says why) outside the guest or without the feature `spdk`.
//!
//! `cargo xtask vm-run --hugepages 512 -- <this test binary> --test-threads=1 --nocapture`

mod spdk_env;

use ziob_backends::{open_device, ErrorKind, ZoneAction, ZoneState, ZoneTarget, ZonedDevice};
use ziob_runtime::{DmaBuf, Runtime};

fn spec_or_skip(test: &str) -> Option<String> {
    match spdk_env::spdk_spec() {
        Ok(s) => Some(s),
        Err(why) => {
            eprintln!("SKIPPED {test}: {why}");
            None
        }
    }
}

#[test]
fn spdk_io_and_zone_management() {
    let Some(spec) = spec_or_skip("spdk_io_and_zone_management") else {
        return;
    };
    let _l = spdk_env::device_lock();
    let rt = Runtime::builder().cores(1).build().unwrap();
    rt.block_on(move || async move {
        let t0 = std::time::Instant::now();
        let d = open_device(&spec).await.expect("open");
        let g = *d.geometry();
        eprintln!("[spdk] opened {spec} in {:?}: {g:?}", t0.elapsed());
        let bs = g.block_size_bytes;
        d.zone_action(ZoneAction::Reset, ZoneTarget::All)
            .await
            .unwrap();
        let zones = d.report_all().await.unwrap();
        assert_eq!(zones.len() as u32, g.zone_count);
        assert!(zones
            .iter()
            .all(|z| z.state == ZoneState::Empty && z.write_pointer_bytes == 0));

        // write at the write pointer, read back
        let data: Vec<u8> = (0..4 * bs).map(|i| (i % 251) as u8).collect();
        let (r, _) = d.write(0, 0, DmaBuf::from_slice(&data)).await;
        r.unwrap();
        let z = d.report_zones(0, 1).await.unwrap()[0];
        assert_eq!(
            (z.state, z.write_pointer_bytes),
            (ZoneState::ImplicitlyOpened, 4 * bs)
        );
        let (r, buf) = d
            .read(0, 0, data.len(), DmaBuf::with_capacity(data.len()))
            .await;
        r.unwrap();
        assert_eq!(&buf[..], &data[..]);
        // a write off the write pointer: typed Zone Invalid Write naming the write pointer
        let (r, _) = d
            .write(0, 8 * bs, DmaBuf::from_slice(&data[..bs as usize]))
            .await;
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidWrite, "{e}");
        assert_eq!(e.nvme_status(), Some((1, 0xBC)));
        eprintln!("[spdk] typed error: {e}");

        // zone append returns where the data landed
        let (r, _) = d
            .append(1, DmaBuf::from_slice(&data[..2 * bs as usize]))
            .await;
        assert_eq!(r.unwrap(), 0);
        let (r, _) = d.append(1, DmaBuf::from_slice(&data[..bs as usize])).await;
        assert_eq!(r.unwrap(), 2 * bs);
        let (r, buf) = d
            .read(1, 2 * bs, bs as usize, DmaBuf::with_capacity(bs as usize))
            .await;
        r.unwrap();
        assert_eq!(&buf[..], &data[..bs as usize]);

        // zone management: open, close, finish, invalid transition, reset
        d.zone_action(ZoneAction::Open, ZoneTarget::One(2))
            .await
            .unwrap();
        assert_eq!(
            d.report_zones(2, 1).await.unwrap()[0].state,
            ZoneState::ExplicitlyOpened
        );
        d.zone_action(ZoneAction::Close, ZoneTarget::One(2))
            .await
            .unwrap();
        assert_eq!(
            d.report_zones(2, 1).await.unwrap()[0].state,
            ZoneState::Closed
        );
        d.zone_action(ZoneAction::Finish, ZoneTarget::One(2))
            .await
            .unwrap();
        let z = d.report_zones(2, 1).await.unwrap()[0];
        assert_eq!(
            (z.state, z.write_pointer_bytes),
            (ZoneState::Full, z.capacity_bytes)
        );
        let e = d
            .zone_action(ZoneAction::Open, ZoneTarget::One(2))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidTransition, "{e}");
        let (r, _) = d.append(2, DmaBuf::from_slice(&data[..bs as usize])).await;
        assert_eq!(r.unwrap_err().kind(), ErrorKind::ZoneFull);
        d.flush().await.unwrap();
        d.zone_action(ZoneAction::Reset, ZoneTarget::All)
            .await
            .unwrap();
        assert!(d
            .report_all()
            .await
            .unwrap()
            .iter()
            .all(|z| z.state == ZoneState::Empty));
        eprintln!("[spdk] io + zone management OK");
    })
    .unwrap();
}

/// Two cores, each with its own qpair, appending concurrently to their own zones.
#[test]
fn spdk_qpair_per_core() {
    let Some(spec) = spec_or_skip("spdk_qpair_per_core") else {
        return;
    };
    let _l = spdk_env::device_lock();
    let rt = Runtime::builder().cores(2).build().unwrap();
    let s = spec.clone();
    let dev = rt
        .run_on(
            0,
            move || async move { open_device(&s).await.expect("open") },
        )
        .unwrap();
    let d0 = dev.clone();
    rt.run_on(0, move || async move {
        d0.zone_action(ZoneAction::Reset, ZoneTarget::All)
            .await
            .unwrap();
    })
    .unwrap();
    let res = rt
        .run_on_all(move |core| {
            let d = dev.clone();
            async move {
                let core = core as u32;
                let bs = d.geometry().block_size_bytes;
                let tasks: Vec<_> = (0..8)
                    .map(|i| {
                        let d = d.clone();
                        ziob_runtime::spawn(async move {
                            let (r, _) = d
                                .append(core, DmaBuf::from_slice(&vec![i as u8; bs as usize]))
                                .await;
                            r.unwrap()
                        })
                    })
                    .collect();
                let mut offs = Vec::new();
                for t in tasks {
                    offs.push(t.await);
                }
                offs.sort();
                assert_eq!(offs, (0..8).map(|i| i * bs).collect::<Vec<_>>());
                d.report_zones(core, 1).await.unwrap()[0].write_pointer_bytes
            }
        })
        .unwrap();
    eprintln!("[spdk] per-core appends done, write pointers {res:?}");
    assert!(res.iter().all(|&w| w == 8 * 4096));
}

/// Buffers taken on a core after the open are SPDK memory and go to the device in place;
/// a heap buffer (taken off the runtime) is copied through a bounce buffer. Both give the
/// same data, and a dropped read leaves its buffer with the command until it completes.
#[test]
fn spdk_zero_copy_and_bounce() {
    let Some(spec) = spec_or_skip("spdk_zero_copy_and_bounce") else {
        return;
    };
    zero_copy_and_bounce(spec);
}

#[cfg(not(feature = "spdk"))]
fn zero_copy_and_bounce(_spec: String) {
    unreachable!("spdk_env::spdk_spec refuses builds without the feature");
}

#[cfg(feature = "spdk")]
fn zero_copy_and_bounce(spec: String) {
    let _l = spdk_env::device_lock();
    let heap = DmaBuf::from_slice(&[0x33; 8192]); // off-core: heap memory
    let rt = Runtime::builder().cores(1).build().unwrap();
    rt.block_on(move || async move {
        use ziob_backends::spdk::transfer_stats;
        let d = open_device(&spec).await.expect("open");
        assert_eq!(
            ziob_runtime::dma_allocator_name().as_deref(),
            Some("spdk_dma_malloc")
        );
        d.zone_action(ZoneAction::Reset, ZoneTarget::All)
            .await
            .unwrap();
        let s0 = transfer_stats();
        let (r, _) = d.write(0, 0, DmaBuf::from_slice(&[0x11; 8192])).await;
        r.unwrap();
        let (r, _) = d.append(0, DmaBuf::from_slice(&[0x22; 4096])).await;
        assert_eq!(r.unwrap(), 8192);
        let (r, buf) = d.read(0, 0, 12288, DmaBuf::with_capacity(12288)).await;
        r.unwrap();
        assert!(buf[..8192].iter().all(|&x| x == 0x11) && buf[8192..].iter().all(|&x| x == 0x22));
        let s1 = transfer_stats();
        assert_eq!(s1.zero_copy_cmds - s0.zero_copy_cmds, 3, "{s0:?} -> {s1:?}");
        assert_eq!(s1.bounced_cmds, s0.bounced_cmds);

        // A heap buffer still works, through a copy.
        let (r, heap) = d.write(0, 12288, heap).await;
        r.unwrap();
        let mut into_heap = heap;
        into_heap.clear();
        let (r, back) = d.read(0, 12288, 8192, into_heap).await;
        r.unwrap();
        assert!(back.iter().all(|&x| x == 0x33));
        let s2 = transfer_stats();
        assert_eq!(s2.bounced_cmds - s1.bounced_cmds, 2, "{s1:?} -> {s2:?}");
        assert_eq!(s2.bounced_bytes - s1.bounced_bytes, 16384);

        // A `bounce` handle on the same controller copies even SPDK memory.
        let bounced = open_device(&format!("{spec},bounce"))
            .await
            .expect("open with bounce");
        let (r, _) = bounced.read(0, 0, 4096, DmaBuf::with_capacity(4096)).await;
        r.unwrap();
        let s3 = transfer_stats();
        assert_eq!(s3.bounced_cmds - s2.bounced_cmds, 1, "{s2:?} -> {s3:?}");
        assert_eq!(s3.zero_copy_cmds, s2.zero_copy_cmds);

        // Drop in-flight reads into SPDK memory after one poll; the next commands still work
        // and the recycled buffers hold exactly what later reads put there.
        for _ in 0..32 {
            let mut f = Box::pin(d.read(0, 0, 4096, DmaBuf::with_capacity(4096)));
            let _ = futures::poll!(f.as_mut());
            drop(f);
        }
        for _ in 0..32 {
            let (r, b) = d.read(0, 8192, 4096, DmaBuf::with_capacity(4096)).await;
            r.unwrap();
            assert!(b.iter().all(|&x| x == 0x22));
        }
        d.zone_action(ZoneAction::Reset, ZoneTarget::All)
            .await
            .unwrap();
        eprintln!("[spdk] zero copy {s0:?} -> {s2:?}");
    })
    .unwrap();
}

/// The child half of [`spdk_open_error_names_the_cause`]: opens `ZIOB_SPDK_CHILD_SPEC` in a
/// fresh process (SPDK initialises its environment once per process) and prints the error.
#[test]
fn spdk_open_error_child() {
    let Ok(spec) = std::env::var("ZIOB_SPDK_CHILD_SPEC") else {
        return; // only runs as the child of the test below
    };
    let rt = Runtime::builder().cores(1).build().unwrap();
    let out = rt
        .block_on(move || async move { open_device(&spec).await.map(|_| ()) })
        .unwrap();
    match out {
        Ok(()) => println!("OPEN-OK"),
        Err(e) => println!("OPEN-ERROR: {e}"),
    }
}

/// An `spdk:` open whose SPDK environment cannot start says why in its error: SPDK's own
/// error lines and DPDK's last EAL line, not only an errno and a guess. Forces the failure by
/// asking for far more SPDK memory than any machine reserves as hugepages; runs on any
/// machine with the feature (no device is touched: the environment fails first).
#[test]
fn spdk_open_error_names_the_cause() {
    if !cfg!(feature = "spdk") {
        eprintln!("SKIPPED spdk_open_error_names_the_cause: built without the feature `spdk`");
        return;
    }
    let pci = std::env::var("ZIOB_NVME_PCI").unwrap_or_else(|_| "0000:00:04.0".into());
    // 1 TiB of hugepage memory: more than is reserved anywhere this runs.
    let spec = format!("spdk:{pci},mem=1T");
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "spdk_open_error_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ZIOB_SPDK_CHILD_SPEC", &spec)
        .output()
        .expect("run the child test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.find("OPEN-").map(|at| &l[at..]))
        .unwrap_or_else(|| panic!("no OPEN- line from the child: {stdout}"));
    eprintln!("[spdk] {spec}: {line}");
    assert!(line.starts_with("OPEN-ERROR: "), "{line}");
    assert!(
        line.contains("SPDK said: ") || line.contains("DPDK's last line: "),
        "the error does not carry SPDK's or DPDK's reason: {line}"
    );
    assert!(
        line.contains(" [DPDK ") && line.contains(", SPDK v"),
        "the error does not name the DPDK and SPDK versions it met: {line}"
    );
}

/// A command whose completion arrives while nobody polls its future, and whose future is then
/// dropped (a `select!` that another branch won, a timeout), must not leave the core
/// busy-polling: once nothing is in flight the SPDK poller goes, however the last future ended.
#[test]
fn spdk_dropped_completed_command_stops_polling() {
    let Some(spec) = spec_or_skip("spdk_dropped_completed_command_stops_polling") else {
        return;
    };
    dropped_completed_command_stops_polling(spec);
}

#[cfg(not(feature = "spdk"))]
fn dropped_completed_command_stops_polling(_spec: String) {
    unreachable!("spdk_env::spdk_spec refuses builds without the feature");
}

#[cfg(feature = "spdk")]
fn dropped_completed_command_stops_polling(spec: String) {
    use std::future::Future;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Wake, Waker};
    use ziob_backends::spdk::core_is_polling;

    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    let _l = spdk_env::device_lock();
    let rt = Runtime::builder().cores(1).build().unwrap();
    rt.block_on(move || async move {
        let d = open_device(&spec).await.expect("open");
        let bs = d.geometry().block_size_bytes as usize;
        let zones = d.geometry().zone_count;
        for round in 0..20u32 {
            let flag = Arc::new(Flag(AtomicBool::new(false)));
            let waker = Waker::from(flag.clone());
            let mut cx = Context::from_waker(&waker);
            // reads of the (maybe unwritten) start of a zone: the device answers them
            let mut read = Box::pin(d.read(round % zones, 0, bs, DmaBuf::with_capacity(bs)));
            assert!(
                read.as_mut().poll(&mut cx).is_pending(),
                "a submitted command waits for its completion"
            );
            assert!(core_is_polling(), "a command is in flight");
            let t0 = std::time::Instant::now();
            while !flag.0.load(Ordering::SeqCst) {
                assert!(
                    t0.elapsed() < std::time::Duration::from_secs(30),
                    "round {round}: no completion in 30 s"
                );
                ziob_runtime::yield_now().await;
            }
            drop(read); // completed, never polled again
            ziob_runtime::yield_now().await;
            assert!(
                !core_is_polling(),
                "round {round}: the core still busy-polls with nothing in flight"
            );
        }
        eprintln!("[spdk] 20 completed-then-dropped commands: the core stopped polling each time");
    })
    .unwrap();
}
