//! emu shared by two cores (each owning its zones, both flushing), and the latency model.

use std::time::{Duration, Instant};

use ziob_backends::{open_device, EmuDevice, Geometry, LatencyModel, ZoneState, ZonedDevice};
use ziob_runtime::{DmaBuf, Runtime};

#[test]
fn two_cores_write_their_own_zones_of_one_device() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.zns");
    let rt = Runtime::builder().cores(2).build().unwrap();
    let p = path.clone();
    let dev = rt
        .block_on(move || async move {
            EmuDevice::create(&p, &Geometry::new(4, 1 << 20))
                .await
                .unwrap()
        })
        .unwrap();
    let d = dev.clone();
    rt.run_on_all(move |core| {
        let d = d.clone();
        async move {
            let zone = core as u32;
            for i in 0..32u64 {
                let block = DmaBuf::from_slice(&[(core as u8) * 100 + i as u8; 4096]);
                d.write(zone, i * 4096, block).await.0.unwrap();
                if i % 8 == 7 {
                    d.flush().await.unwrap();
                }
            }
        }
    })
    .unwrap();
    drop(dev);
    rt.block_on(move || async move {
        let d = EmuDevice::open(&path, LatencyModel::default())
            .await
            .unwrap();
        for zone in 0..2u32 {
            let info = d.report_zones(zone, 1).await.unwrap()[0];
            assert_eq!(
                (info.state, info.write_pointer_bytes),
                (ZoneState::Closed, 32 * 4096)
            );
            let (r, buf) = d
                .read(zone, 0, 32 * 4096, DmaBuf::with_capacity(32 * 4096))
                .await;
            r.unwrap();
            for (i, chunk) in buf.chunks(4096).enumerate() {
                assert!(
                    chunk.iter().all(|&b| b == zone as u8 * 100 + i as u8),
                    "zone {zone} block {i}"
                );
            }
        }
    })
    .unwrap();
}

#[test]
fn latency_model_delays_ops_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.zns");
    let rt = Runtime::builder().cores(1).build().unwrap();
    let elapsed = rt
        .block_on(move || async move {
            EmuDevice::create(&path, &Geometry::new(2, 1 << 20))
                .await
                .unwrap();
            let timed = |spec: String| async move {
                let d = open_device(&spec).await.unwrap();
                d.zone_action(
                    ziob_backends::ZoneAction::Reset,
                    ziob_backends::ZoneTarget::All,
                )
                .await
                .unwrap();
                let start = Instant::now();
                for i in 0..10u64 {
                    d.write(0, i * 65536, DmaBuf::zeroed(65536))
                        .await
                        .0
                        .unwrap();
                }
                start.elapsed()
            };
            let slow = timed(format!("emu:{},lat_us=3000,bw_mbps=100", path.display())).await;
            let fast = timed(format!("emu:{}", path.display())).await;
            (slow, fast)
        })
        .unwrap();
    let (slow, fast) = elapsed;
    // 10 × (3 ms + 64 KiB at 100 MB/s = 0.655 ms) ≥ 36 ms.
    assert!(slow >= Duration::from_millis(36), "modelled: {slow:?}");
    assert!(fast < slow, "unmodelled {fast:?} vs modelled {slow:?}");
}
