//! A finish never lands before the data it closes. On a device whose zone commands do not
//! flush its cache (`MemDevice::set_zone_actions_flush(false)`), a finish that fails at each
//! of its device cache flushes in turn (`Fault::FailFlush`), then a power loss: the zone
//! comes back either Full with every byte appended before the finish, or not Full. A device
//! finish sent before the data was durable would leave it Full and reading zeros, a state
//! nothing after the crash can tell from data (the zone file layer cuts a file whose last
//! sync's data a crash lost by the zone's write pointer, which a finish moves to the end).
//! Buffered and pass-through.

use ziob::backends::{Fault, MemDevice};
use ziob::{DmaBuf, Geometry, Runtime, Ziob, ZiobConfig, ZoneState};

#[test]
fn a_finish_never_outlives_the_data_it_closes() {
    for buffered in [true, false] {
        for failing in 0..3u64 {
            Runtime::builder()
                .cores(1)
                .build()
                .unwrap()
                .block_on(move || async move {
                    let g = Geometry::new(4, 64 << 10);
                    let mem = MemDevice::new("mem:finish-order", &g).unwrap();
                    mem.set_zone_actions_flush(false);
                    let config = ZiobConfig {
                        buffered,
                        ..ZiobConfig::default()
                    };
                    let z = Ziob::with_device(mem.clone(), config.clone())
                        .await
                        .unwrap();
                    let data = vec![7u8; 8192];
                    z.append(0, DmaBuf::from_slice(&data)).await.unwrap();
                    mem.inject(Fault::FailFlush {
                        flush_index: mem.flush_count() + failing,
                    });
                    let finished = z.zone(0).finish().await;
                    z.abandon().await.unwrap();
                    mem.clear_faults();
                    mem.crash();
                    let z = Ziob::with_device(mem, config).await.unwrap();
                    let info = z.zone(0).report().await.unwrap();
                    let case = format!(
                        "buffered {buffered}, flush {failing} of the finish failing ({finished:?})"
                    );
                    if finished.is_ok() {
                        assert_eq!(info.state, ZoneState::Full, "{case}");
                    }
                    if info.state == ZoneState::Full {
                        let got = z.read(0, 0, data.len()).await.unwrap();
                        assert!(
                            got[..] == data[..],
                            "{case}: the zone came back Full without its data"
                        );
                    }
                    z.close().await.unwrap();
                })
                .unwrap();
        }
    }
}
