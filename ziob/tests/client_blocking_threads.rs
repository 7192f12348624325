//! `BlockingClient` from plain threads (as an FFI caller would use it), every byte checked;
//! and a blocking call made on a ZIOB core fails at once instead of deadlocking.

mod client_support;

use client_support::{bounded, record, Rng};
use ziob::{Client, Runtime, ZiobConfig, ZiobError, ZoneAction, ZoneState, ZoneTarget};

const ZONES: u32 = 8;

#[test]
fn plain_threads_append_read_flush_through_the_blocking_client() {
    bounded(120, "blocking client workload", || {
        let rt = Runtime::builder().cores(2).build().unwrap();
        let client = futures::executor::block_on(Client::open(
            rt.handle(),
            "mem:zones=8,zone_size=4M",
            ZiobConfig::default(),
        ))
        .unwrap();
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let b = client.blocking();
                std::thread::spawn(move || {
                    let mut rng = Rng::new(t ^ 0xB10C);
                    let mut acked = Vec::new();
                    for n in 0..60u64 {
                        let zone = rng.below(u64::from(ZONES)) as u32;
                        let len = 1 + rng.below(5000) as usize;
                        let id = t << 32 | n;
                        let data = record(zone, id, len);
                        let off = if n % 2 == 0 {
                            b.append_slice(zone, &data).unwrap()
                        } else {
                            b.append(zone, data.clone().into()).unwrap()
                        };
                        let mut buf = vec![0u8; len];
                        b.read_into(zone, off, &mut buf).unwrap();
                        assert_eq!(buf, data);
                        if rng.below(10) == 0 {
                            b.flush(zone).unwrap();
                        }
                        acked.push((zone, off, id, len));
                    }
                    acked
                })
            })
            .collect();
        let b = client.blocking();
        let mut acked = Vec::new();
        for t in threads {
            acked.extend(t.join().unwrap());
        }
        b.sync().unwrap();
        for (zone, off, id, len) in acked {
            assert_eq!(
                &b.read(zone, off, len).unwrap()[..],
                &record(zone, id, len)[..]
            );
        }
        // Zone management and write_at through the blocking form.
        let wp = b.report(7, 1).unwrap()[0].write_pointer_bytes;
        b.write_at_slice(7, wp, b"tail").unwrap();
        b.finish(7).unwrap();
        assert_eq!(b.report(7, 1).unwrap()[0].state, ZoneState::Full);
        b.reset(7).unwrap();
        assert_eq!(b.report(7, 1).unwrap()[0].state, ZoneState::Empty);
        b.zone_action(ZoneAction::Reset, ZoneTarget::All).unwrap();
        assert!(b
            .report(0, ZONES)
            .unwrap()
            .iter()
            .all(|z| z.state == ZoneState::Empty));
        assert_eq!(b.stats().unwrap().len(), 2);
        let m = b.metrics().unwrap();
        assert_eq!(m.cores().len(), 2);
        // 8 threads x 60 appends and writes, one write_at_slice.
        let total = &m.total().latency;
        assert_eq!(
            total.count(ziob::OpKind::Append) + total.count(ziob::OpKind::WriteAt),
            8 * 60 + 1
        );
        b.close().unwrap();
        assert!(matches!(b.append_slice(0, b"x"), Err(ZiobError::Closed)));
    });
}

#[test]
fn a_blocking_call_on_a_ziob_core_fails_instead_of_deadlocking() {
    bounded(60, "blocking calls on a core", || {
        let rt = Runtime::builder().cores(2).build().unwrap();
        let client = futures::executor::block_on(Client::open(
            rt.handle(),
            "mem:zones=4,zone_size=1M",
            ZiobConfig::default(),
        ))
        .unwrap();
        for core in 0..2 {
            let b = client.blocking();
            let errs = rt
                .run_on(core, move || async move {
                    // Zone 0 is owned by core 0, zone 1 by core 1: both would deadlock on
                    // one of them, and both are refused on both.
                    let mut buf = [0u8; 4];
                    vec![
                        b.append_slice(0, b"x").map(|_| ()),
                        b.append_slice(1, b"x").map(|_| ()),
                        b.read(0, 0, 1).map(|_| ()),
                        b.read_into(1, 0, &mut buf),
                        b.flush(1),
                        b.sync(),
                        b.report(0, 4).map(|_| ()),
                        b.stats().map(|_| ()),
                        b.reset(0),
                        b.close(),
                    ]
                })
                .unwrap();
            for e in errs {
                assert!(
                    matches!(e, Err(ZiobError::BlockingOnCore { .. })),
                    "core {core}: {e:?}"
                );
            }
        }
        // Nothing happened: the instance is open and empty.
        let b = client.blocking();
        assert!(b
            .report(0, 4)
            .unwrap()
            .iter()
            .all(|z| z.write_pointer_bytes == 0));
        b.close().unwrap();
    });
}
