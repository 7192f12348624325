//! Shutdown and closing through the `Client`: stopping the runtime answers every call in
//! flight and every later call with `RuntimeStopped` (never a hang); dropping the last handle
//! of an instance closes it (syncs, then releases the device: the emu file can be opened
//! again, with the data); `close` and `abandon` keep their meaning.

mod client_support;

use std::path::Path;
use std::time::{Duration, Instant};

use client_support::{bounded, record, tokio_rt};
use ziob::backends::EmuDevice;
use ziob::{Client, Geometry, Runtime, Ziob, ZiobConfig, ZiobError};

fn create_emu(rt: &Runtime, path: &Path, zones: u32) {
    let p = path.to_path_buf();
    rt.block_on(move || async move {
        EmuDevice::create(&p, &Geometry::new(zones, 1 << 20))
            .await
            .unwrap();
    })
    .unwrap();
}

/// Opens `spec` again and again until the device is free (the emu file is locked while an
/// instance holds it); panics after 30 s with the last error.
fn reopen(rt: &Runtime, spec: &str) -> Client {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match futures::executor::block_on(Client::open(rt.handle(), spec, ZiobConfig::default())) {
            Ok(c) => return c,
            Err(e) if Instant::now() > deadline => {
                panic!("the dropped instance still holds {spec} after 30 s: {e}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

#[test]
fn stopping_the_runtime_fails_calls_in_flight_and_later_with_runtime_stopped() {
    bounded(120, "calls across a runtime stop", || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stop.zns");
        let rt = Runtime::builder().cores(2).build().unwrap();
        create_emu(&rt, &path, 8);
        let spec = format!("emu:{},lat_us=300", path.display());
        let client =
            futures::executor::block_on(Client::open(rt.handle(), &spec, ZiobConfig::default()))
                .unwrap();
        let trt = tokio_rt(2);
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let tasks: Vec<_> = (0..16u32)
            .map(|t| {
                let (c, started) = (client.clone(), started_tx.clone());
                trt.spawn(async move {
                    let zone = t % 8;
                    let mut n = 0u64;
                    loop {
                        let res = if n % 4 == 3 {
                            c.flush(zone).await
                        } else {
                            c.append_slice(zone, &record(zone, n, 4096))
                                .await
                                .map(|_| ())
                        };
                        if n == 2 {
                            let _ = started.send(());
                        }
                        n += 1;
                        if let Err(e) = res {
                            return e;
                        }
                    }
                })
            })
            .collect();
        for _ in 0..16 {
            started_rx.recv().unwrap();
        }
        drop(rt); // stops the cores with calls in flight
        trt.block_on(async {
            for t in tasks {
                let e = tokio::time::timeout(Duration::from_secs(30), t)
                    .await
                    .expect("a call in flight hangs after the runtime stopped")
                    .unwrap();
                assert!(matches!(e, ZiobError::RuntimeStopped { .. }), "{e}");
            }
            let e = client.read(1, 0, 10).await.unwrap_err();
            assert!(matches!(e, ZiobError::RuntimeStopped { core: 1 }), "{e}");
            let e = client.sync().await.unwrap_err();
            assert!(matches!(e, ZiobError::RuntimeStopped { .. }), "{e}");
        });
        let e = client.blocking().append_slice(0, b"late").unwrap_err();
        assert!(matches!(e, ZiobError::RuntimeStopped { core: 0 }), "{e}");
        assert!(e.to_string().contains("runtime was stopped"), "{e}");
    });
}

#[test]
fn dropping_the_last_client_closes_the_instance_with_its_data() {
    bounded(120, "drop closes", || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("drop.zns");
        let rt = Runtime::builder().cores(2).build().unwrap();
        create_emu(&rt, &path, 4);
        let spec = format!("emu:{}", path.display());
        let client = reopen(&rt, &spec);
        let b = client.blocking();
        let mut offs = Vec::new();
        for zone in 0..4u32 {
            offs.push(b.append_slice(zone, &record(zone, 1, 3000)).unwrap());
        }
        let second = client.clone();
        drop(b);
        drop(client);
        // A clone is still alive: nothing closes, the device stays held.
        second.blocking().append_slice(0, b"more").unwrap();
        drop(second);
        // The last handle is gone: the instance syncs and lets the device go.
        let again = reopen(&rt, &spec);
        let b = again.blocking();
        for (zone, off) in (0..4u32).zip(offs) {
            // On the device (not buffered: a new instance read it back).
            assert_eq!(
                &b.read(zone, off, 3000).unwrap()[..],
                &record(zone, 1, 3000)[..],
                "zone {zone}"
            );
        }
        assert_eq!(&b.read(0, 3000, 4).unwrap()[..], b"more");
        b.close().unwrap();
    });
}

#[test]
fn dropping_the_last_ziob_on_a_core_closes_the_instance_too() {
    bounded(120, "drop of a Ziob closes", || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dropziob.zns");
        let rt = Runtime::builder().cores(2).build().unwrap();
        create_emu(&rt, &path, 4);
        let spec = format!("emu:{}", path.display());
        let s = spec.clone();
        rt.block_on(move || async move {
            let z = Ziob::open(&s, ZiobConfig::default()).await.unwrap();
            z.append(3, ziob::DmaBuf::from_slice(b"from a core"))
                .await
                .unwrap();
            // Dropped here, on core 0, without close.
        })
        .unwrap();
        let again = reopen(&rt, &spec);
        assert_eq!(
            &again.blocking().read(3, 0, 11).unwrap()[..],
            b"from a core"
        );
        again.blocking().close().unwrap();
    });
}

#[test]
fn close_and_abandon_keep_their_meaning_when_the_handles_drop() {
    bounded(120, "close and abandon", || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("closeabandon.zns");
        let rt = Runtime::builder().cores(2).build().unwrap();
        create_emu(&rt, &path, 4);
        let spec = format!("emu:{}", path.display());
        // close: the device is free once the last handle is gone; dropping adds nothing.
        let c = reopen(&rt, &spec);
        c.blocking().append_slice(1, b"closed").unwrap();
        c.blocking().close().unwrap();
        drop(c);
        let c = reopen(&rt, &spec);
        assert_eq!(&c.blocking().read(1, 0, 6).unwrap()[..], b"closed");
        // abandon: buffered data is lost as in a crash; dropping the handle does not sync.
        c.blocking().append_slice(2, b"lost").unwrap();
        futures::executor::block_on(c.with_ziob(|z| async move { z.abandon().await })).unwrap();
        drop(c);
        let c = reopen(&rt, &spec);
        let zone2 = c.blocking().report(2, 1).unwrap();
        assert_eq!(zone2[0].write_pointer_bytes, 0, "abandoned data was synced");
        c.blocking().close().unwrap();
    });
}
