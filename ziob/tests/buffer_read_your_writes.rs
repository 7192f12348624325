//! Appends get their offsets at once, reads see them (from memory), flush pads a partial
//! block and moves the write pointer, and requests for zones of other cores are forwarded.

use ziob::{
    DmaBuf, ErrorKind, Runtime, Ziob, ZiobConfig, ZoneAction, ZoneState, ZoneTarget, ZonedDevice,
};

fn rt(cores: usize) -> Runtime {
    Runtime::builder().cores(cores).build().unwrap()
}

#[test]
fn appends_read_back_from_memory_and_flush_pads() {
    rt(1)
        .block_on(|| async {
            let z = Ziob::open("mem:zones=4,zone_size=1M", ZiobConfig::default())
                .await
                .unwrap();
            let mut expect = Vec::new();
            for i in 0..50u32 {
                let data: Vec<u8> = (0..(100 + i * 37)).map(|j| (i + j) as u8).collect();
                let off = z.append(1, DmaBuf::from_slice(&data)).await.unwrap();
                assert_eq!(off, expect.len() as u64);
                expect.extend_from_slice(&data);
            }
            let got = z.read(1, 0, expect.len()).await.unwrap();
            assert!(got[..] == expect[..]);
            let st = ziob::ShardStats::total(&z.stats().await.unwrap());
            assert_eq!(st.read_hits, 1);
            assert_eq!(st.writebacks, 0, "nothing reached the device yet");
            // Flush pads to the block boundary; the next append lands there.
            z.flush(1).await.unwrap();
            let wp = expect.len().div_ceil(4096) * 4096;
            let info = z.report(1, 1).await.unwrap()[0];
            assert_eq!(info.write_pointer_bytes, wp as u64);
            assert_eq!(info.state, ZoneState::ImplicitlyOpened);
            assert_eq!(
                z.append(1, DmaBuf::from_slice(b"x")).await.unwrap(),
                wp as u64
            );
            // The device has exactly the padded data.
            let dev = z.device().report_zones(1, 1).await.unwrap()[0];
            assert_eq!(dev.write_pointer_bytes, wp as u64);
            let st = ziob::ShardStats::total(&z.stats().await.unwrap());
            // Nothing counts as durable before a device flush has covered the zone since the
            // open: one write-back, then one device flush.
            assert!(
                st.writebacks == 1 && st.device_flushes == 1 && st.device_durable_writes == 0,
                "{st:?}"
            );
            z.close().await.unwrap();
        })
        .unwrap();
}

#[test]
fn zones_of_other_cores_are_forwarded() {
    let rt = rt(2);
    rt.block_on(|| async {
        let z = Ziob::open("mem:zones=8,zone_size=1M", ZiobConfig::default())
            .await
            .unwrap();
        for zone in 0..8u32 {
            let off = z
                .append(zone, DmaBuf::from_slice(&[zone as u8; 8192]))
                .await
                .unwrap();
            assert_eq!(off, 0);
            assert_eq!(z.owner_core(zone), zone as usize % 2);
        }
        for zone in 0..8u32 {
            let got = z.read(zone, 4096, 4096).await.unwrap();
            assert!(got.iter().all(|&b| b == zone as u8));
        }
        let stats = z.stats().await.unwrap();
        assert_eq!(stats.len(), 2);
        assert!(
            stats.iter().all(|s| s.bytes_written == 4 * 8192),
            "{stats:?}"
        );
        z.sync().await.unwrap();
        let stats = z.stats().await.unwrap();
        assert!(stats.iter().all(|s| s.dirty_bytes == 0), "{stats:?}");
        z.close().await.unwrap();
    })
    .unwrap();
}

#[test]
fn write_at_must_match_the_logical_write_pointer() {
    rt(1)
        .block_on(|| async {
            let z = Ziob::open("mem:zones=2,zone_size=1M", ZiobConfig::default())
                .await
                .unwrap();
            z.write_at(0, 0, DmaBuf::from_slice(&[1; 4096]))
                .await
                .unwrap();
            let err = z
                .write_at(0, 0, DmaBuf::from_slice(&[1; 4096]))
                .await
                .unwrap_err();
            assert_eq!(err.kind(), Some(ErrorKind::InvalidWrite));
            assert_eq!(
                err.to_string(),
                "Zone Invalid Write: write at block 0 of zone 0, write pointer is at block 1"
            );
            z.write_at(0, 4096, DmaBuf::from_slice(&[2; 100]))
                .await
                .unwrap();
            // A write that does not fit is refused whole.
            let err = z
                .append(0, DmaBuf::from_slice(&vec![3; 1 << 20]))
                .await
                .unwrap_err();
            assert_eq!(err.kind(), Some(ErrorKind::BoundaryError));
            assert_eq!(z.report(0, 1).await.unwrap()[0].write_pointer_bytes, 4196);
        })
        .unwrap();
}

#[test]
fn reads_past_the_write_pointer_are_zeros_and_past_the_zone_fail() {
    rt(1)
        .block_on(|| async {
            let z = Ziob::open("mem:zones=2,zone_size=64K", ZiobConfig::default())
                .await
                .unwrap();
            z.append(0, DmaBuf::from_slice(&[9; 10])).await.unwrap();
            let got = z.read(0, 0, 8192).await.unwrap();
            assert_eq!(&got[..10], &[9; 10]);
            assert!(got[10..].iter().all(|&b| b == 0));
            let err = z.read(0, 60 * 1024, 8192).await.unwrap_err();
            assert_eq!(err.kind(), Some(ErrorKind::BoundaryError));
            let err = z.read(7, 0, 10).await.unwrap_err();
            assert_eq!(err.kind(), Some(ErrorKind::OutOfRange));
        })
        .unwrap();
}

#[test]
fn filling_a_zone_writes_it_out_and_makes_it_full() {
    rt(1)
        .block_on(|| async {
            let cfg = ZiobConfig {
                writeback_unit_bytes: Some(16 * 1024),
                ..ZiobConfig::default()
            };
            let z = Ziob::open("mem:zones=2,zone_size=64K", cfg).await.unwrap();
            for i in 0..16u8 {
                z.append(0, DmaBuf::from_slice(&[i; 4096])).await.unwrap();
            }
            assert_eq!(z.report(0, 1).await.unwrap()[0].state, ZoneState::Full);
            let err = z
                .append(0, DmaBuf::from_slice(&[0; 4096]))
                .await
                .unwrap_err();
            assert_eq!(err.kind(), Some(ErrorKind::ZoneFull));
            z.flush(0).await.unwrap();
            let dev = z.device().report_zones(0, 1).await.unwrap()[0];
            assert_eq!(dev.state, ZoneState::Full);
            let st = ziob::ShardStats::total(&z.stats().await.unwrap());
            assert_eq!(st.writebacks, 4, "four 16 KiB units: {st:?}");
            assert_eq!(st.writeback_size_max_bytes, 16 * 1024);
        })
        .unwrap();
}

#[test]
fn reset_and_finish_with_buffered_data() {
    rt(1)
        .block_on(|| async {
            let z = Ziob::open("mem:zones=2,zone_size=64K", ZiobConfig::default())
                .await
                .unwrap();
            z.append(0, DmaBuf::from_slice(&[5; 5000])).await.unwrap();
            z.zone_action(ZoneAction::Reset, ZoneTarget::One(0))
                .await
                .unwrap();
            let info = z.report(0, 1).await.unwrap()[0];
            assert_eq!(
                (info.state, info.write_pointer_bytes),
                (ZoneState::Empty, 0)
            );
            assert!(z.read(0, 0, 4096).await.unwrap().iter().all(|&b| b == 0));
            assert_eq!(z.memory_used_bytes().await.unwrap(), vec![0]);
            // Finish writes the data back (padded) and makes the zone Full.
            z.append(0, DmaBuf::from_slice(&[6; 5000])).await.unwrap();
            z.zone_action(ZoneAction::Finish, ZoneTarget::One(0))
                .await
                .unwrap();
            let info = z.report(0, 1).await.unwrap()[0];
            assert_eq!(info.state, ZoneState::Full);
            let dev = z.device().report_zones(0, 1).await.unwrap()[0];
            assert_eq!(dev.state, ZoneState::Full);
            let got = z
                .device()
                .read(0, 0, 8192, DmaBuf::with_capacity(8192))
                .await;
            got.0.unwrap();
            assert!(got.1[..5000].iter().all(|&b| b == 6));
            assert!(got.1[5000..].iter().all(|&b| b == 0), "padding is zeros");
            // Open of a Full zone is refused like on the device.
            let err = z
                .zone_action(ZoneAction::Open, ZoneTarget::One(0))
                .await
                .unwrap_err();
            assert_eq!(err.kind(), Some(ErrorKind::InvalidTransition));
        })
        .unwrap();
}

#[test]
fn pass_through_gives_the_same_answers_as_the_device() {
    rt(2)
        .block_on(|| async {
            let z = Ziob::open("mem:zones=4,zone_size=64K", ZiobConfig::pass_through())
                .await
                .unwrap();
            assert_eq!(
                z.append(1, DmaBuf::from_slice(&[1; 4096])).await.unwrap(),
                0
            );
            assert_eq!(
                z.append(1, DmaBuf::from_slice(&[2; 4096])).await.unwrap(),
                4096
            );
            let err = z
                .append(1, DmaBuf::from_slice(&[2; 100]))
                .await
                .unwrap_err();
            assert_eq!(err.kind(), Some(ErrorKind::Misaligned));
            let got = z.read(1, 4096, 4096).await.unwrap();
            assert!(got.iter().all(|&b| b == 2));
            let dev = z.device().report_zones(1, 1).await.unwrap()[0];
            assert_eq!(
                dev.write_pointer_bytes, 8192,
                "no buffering: the device has it"
            );
            let st = ziob::ShardStats::total(&z.stats().await.unwrap());
            assert_eq!(st.writebacks, 0);
        })
        .unwrap();
}
