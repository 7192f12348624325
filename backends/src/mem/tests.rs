use super::*;
use crate::model::error::ErrorKind;
use crate::model::state::ZoneState;

fn block_on<T: Send + 'static, F: std::future::Future<Output = T> + 'static>(
    f: impl FnOnce() -> F + Send + 'static,
) -> T {
    let rt = ziob_runtime::Runtime::builder().cores(1).build().unwrap();
    rt.block_on(f).unwrap()
}

fn device() -> MemDevice {
    let mut g = Geometry::new(4, 64 * 1024);
    g.max_open_zones = Some(2);
    MemDevice::new("mem:test", &g).unwrap()
}

#[test]
fn failed_op_has_no_effect_and_is_deterministic() {
    block_on(|| async {
        let dev = device();
        dev.inject(Fault::FailOp { op_index: 1 });
        let (r, _) = dev.write(0, 0, DmaBuf::from_slice(&[1; 4096])).await;
        r.unwrap();
        let (r, _) = dev.write(0, 4096, DmaBuf::from_slice(&[2; 4096])).await;
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io);
        assert_eq!(
            e.to_string(),
            "mem:test: write (injected fault at op 1): Input/output error (os error 5)"
        );
        let z = dev.report_zones(0, 1).await.unwrap()[0];
        assert_eq!(z.write_pointer_bytes, 4096);
        let (r, _) = dev.write(0, 4096, DmaBuf::from_slice(&[2; 4096])).await;
        r.unwrap();
        assert_eq!(dev.op_count(), 3);
    });
}

#[test]
fn zone_actions_may_persist_only_their_zones() {
    block_on(|| async {
        for flush in [true, false] {
            let dev = device();
            dev.set_zone_actions_flush(flush);
            let (r, _) = dev.write(0, 0, DmaBuf::from_slice(&[1; 8192])).await;
            r.unwrap();
            let (r, _) = dev.write(1, 0, DmaBuf::from_slice(&[2; 4096])).await;
            r.unwrap();
            dev.zone_action(ZoneAction::Finish, ZoneTarget::One(0))
                .await
                .unwrap();
            dev.crash();
            let zones = dev.report_all().await.unwrap();
            // The finish is kept either way; its data, and zone 1's, only if it flushed.
            assert_eq!(zones[0].state, ZoneState::Full);
            let (r, buf) = dev.read(0, 0, 8192, DmaBuf::with_capacity(8192)).await;
            r.unwrap();
            let want = if flush { 1 } else { 0 };
            assert_eq!(&buf[..], &[want; 8192][..], "flush {flush}");
            let wp1 = if flush { 4096 } else { 0 };
            assert_eq!(zones[1].write_pointer_bytes, wp1, "flush {flush}");
            let state1 = if flush {
                ZoneState::Closed
            } else {
                ZoneState::Empty
            };
            assert_eq!(zones[1].state, state1, "flush {flush}");
        }
    });
}

#[test]
fn a_failed_flush_makes_nothing_durable() {
    block_on(|| async {
        let dev = device();
        dev.inject(Fault::FailFlush { flush_index: 1 });
        let (r, _) = dev.write(0, 0, DmaBuf::from_slice(&[1; 4096])).await;
        r.unwrap();
        dev.flush().await.unwrap();
        let (r, _) = dev.write(0, 4096, DmaBuf::from_slice(&[2; 4096])).await;
        r.unwrap();
        let e = dev.flush().await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io);
        assert!(e.to_string().contains("injected fault at flush 1"), "{e}");
        assert_eq!(dev.flush_count(), 2);
        dev.crash();
        assert_eq!(dev.report_all().await.unwrap()[0].write_pointer_bytes, 4096);
    });
}

#[test]
fn a_torn_crash_keeps_a_prefix_of_each_zone_independently() {
    block_on(|| async {
        let dev = device();
        let (r, _) = dev.write(0, 0, DmaBuf::from_slice(&[1; 4096])).await;
        r.unwrap();
        dev.flush().await.unwrap();
        let (r, _) = dev.write(0, 4096, DmaBuf::from_slice(&[2; 8192])).await;
        r.unwrap();
        let (r, _) = dev.write(1, 0, DmaBuf::from_slice(&[3; 8192])).await;
        r.unwrap();
        let (r, _) = dev.write(2, 0, DmaBuf::from_slice(&[4; 4096])).await;
        r.unwrap();
        let mut asked = Vec::new();
        // Zone 0 keeps one block and a half (rounded down to one) of its 2 new blocks, zone
        // 1 all, zone 2 nothing (below its durable 0: clamped).
        dev.crash_keeping(|z, durable, written| {
            asked.push((z, durable, written));
            match z {
                0 => 4096 + 6144,
                1 => u64::MAX,
                _ => 0,
            }
        });
        assert_eq!(asked, vec![(0, 4096, 12288), (1, 0, 8192), (2, 0, 4096)]);
        let zones = dev.report_all().await.unwrap();
        assert_eq!(zones[0].write_pointer_bytes, 8192);
        assert_eq!(zones[0].state, ZoneState::Closed);
        assert_eq!(zones[1].write_pointer_bytes, 8192);
        assert_eq!(zones[2].state, ZoneState::Empty);
        let (r, buf) = dev.read(0, 0, 12288, DmaBuf::with_capacity(12288)).await;
        r.unwrap();
        assert_eq!(&buf[..4096], &[1; 4096][..]);
        assert_eq!(&buf[4096..8192], &[2; 4096][..]);
        assert_eq!(&buf[8192..], &[0; 4096][..]);
        // What survived is durable: a plain crash now loses nothing more.
        dev.crash();
        assert_eq!(dev.report_all().await.unwrap()[1].write_pointer_bytes, 8192);
    });
}

#[test]
fn crash_drops_unflushed_writes_only() {
    block_on(|| async {
        let dev = device();
        let (r, _) = dev.write(0, 0, DmaBuf::from_slice(&[1; 8192])).await;
        r.unwrap();
        dev.flush().await.unwrap();
        let (r, _) = dev.write(0, 8192, DmaBuf::from_slice(&[2; 4096])).await;
        r.unwrap();
        let (r, _) = dev.append(1, DmaBuf::from_slice(&[3; 4096])).await;
        r.unwrap();
        dev.crash();
        let zones = dev.report_all().await.unwrap();
        assert_eq!(zones[0].write_pointer_bytes, 8192);
        assert_eq!(zones[0].state, ZoneState::Closed);
        assert_eq!(zones[1].state, ZoneState::Empty);
        let (r, buf) = dev.read(0, 4096, 8192, DmaBuf::with_capacity(8192)).await;
        r.unwrap();
        assert_eq!(&buf[..4096], &[1; 4096][..]);
        assert_eq!(&buf[4096..], &[0; 4096][..]);
    });
}

#[test]
fn a_durable_write_survives_a_crash_only_after_a_durable_prefix() {
    block_on(|| async {
        let dev = device();
        let wp = |dev: MemDevice, zone: usize| async move {
            dev.report_all().await.unwrap()[zone].write_pointer_bytes
        };
        // Zone 0: a durable write on an empty zone, then one continuing it: both survive.
        let (r, _) = dev
            .write_durable(0, 0, DmaBuf::from_slice(&[1; 4096]))
            .await;
        r.unwrap();
        let (r, _) = dev
            .write_durable(0, 4096, DmaBuf::from_slice(&[2; 4096]))
            .await;
        r.unwrap();
        // Zone 1: an ordinary write, then a durable one after it: neither survives.
        let (r, _) = dev.write(1, 0, DmaBuf::from_slice(&[3; 4096])).await;
        r.unwrap();
        let (r, _) = dev
            .write_durable(1, 4096, DmaBuf::from_slice(&[4; 4096]))
            .await;
        r.unwrap();
        // Zone 2: an ordinary write after durable data is lost alone.
        let (r, _) = dev
            .write_durable(2, 0, DmaBuf::from_slice(&[5; 4096]))
            .await;
        r.unwrap();
        let (r, _) = dev.write(2, 4096, DmaBuf::from_slice(&[6; 4096])).await;
        r.unwrap();
        assert!(dev.has_durable_writes());
        dev.crash();
        assert_eq!(wp(dev.clone(), 0).await, 8192);
        assert_eq!(wp(dev.clone(), 1).await, 0);
        assert_eq!(wp(dev.clone(), 2).await, 4096);
        let (r, buf) = dev.read(0, 0, 8192, DmaBuf::with_capacity(8192)).await;
        r.unwrap();
        assert_eq!(&buf[..4096], &[1; 4096][..]);
        assert_eq!(&buf[4096..], &[2; 4096][..]);
    });
}

#[test]
fn device_initiated_states_refuse_io() {
    block_on(|| async {
        let dev = device();
        let (r, _) = dev.write(2, 0, DmaBuf::from_slice(&[1; 4096])).await;
        r.unwrap();
        dev.inject(Fault::ZoneReadOnly { zone: 2 });
        let (r, _) = dev.write(2, 4096, DmaBuf::from_slice(&[1; 4096])).await;
        assert_eq!(
            r.unwrap_err().to_string(),
            "Zone Is Read Only: write at block 1 of zone 2"
        );
        let (r, buf) = dev.read(2, 0, 4096, DmaBuf::with_capacity(4096)).await;
        r.unwrap();
        assert_eq!(&buf[..], &[1; 4096][..]);
        let e = dev
            .zone_action(ZoneAction::Reset, ZoneTarget::One(2))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidTransition);
        dev.zone_action(ZoneAction::Offline, ZoneTarget::All)
            .await
            .unwrap();
        let (r, _) = dev.read(2, 0, 4096, DmaBuf::with_capacity(4096)).await;
        assert_eq!(
            r.unwrap_err().to_string(),
            "Zone Is Offline: read at block 0 of zone 2"
        );
        dev.inject(Fault::ZoneOffline { zone: 3 });
        let (r, _) = dev.append(3, DmaBuf::from_slice(&[1; 4096])).await;
        assert_eq!(r.unwrap_err().kind(), ErrorKind::Offline);
    });
}

#[test]
fn cleared_faults_do_not_fire() {
    block_on(|| async {
        let dev = device();
        dev.inject(Fault::FailOp { op_index: 0 });
        dev.inject(Fault::FailOp { op_index: 1 });
        dev.clear_faults();
        let (r, _) = dev.write(0, 0, DmaBuf::from_slice(&[1; 4096])).await;
        r.unwrap();
        dev.flush().await.unwrap();
        assert_eq!(dev.op_count(), 2);
    });
}
