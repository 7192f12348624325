//! Every `Client` zone operation against what the device semantics say: large appends that
//! stream through the budget, large reads, write_at at and off the write pointer, zones out
//! of range, pass-through mode, zone actions and reports.

mod client_support;

use client_support::{bounded, record};
use ziob::{Client, ErrorKind, Runtime, ZiobConfig, ZoneAction, ZoneState, ZoneTarget};

fn open(rt: &Runtime, spec: &str, cfg: ZiobConfig) -> Client {
    futures::executor::block_on(Client::open(rt.handle(), spec, cfg)).unwrap()
}

#[test]
fn appends_writes_and_reads_of_every_size_and_error() {
    bounded(120, "zone ops", || {
        let rt = Runtime::builder().cores(2).build().unwrap();
        let cfg = ZiobConfig {
            shard_budget_bytes: 1 << 20,
            writeback_unit_bytes: Some(128 << 10),
            ..ZiobConfig::default()
        };
        let c = open(&rt, "mem:zones=6,zone_size=8M", cfg);
        let g = c.geometry();
        assert_eq!(g.zone_count, 6);
        futures::executor::block_on(async {
            // Larger than half the 1 MiB budget: streamed in pieces.
            let big = record(1, 7, 3 << 20);
            let off = c.append(1, big.clone().into()).await.unwrap();
            assert_eq!(off, 0);
            // A read larger than the copy limit hands the read buffer over.
            let got = c.read(1, 0, big.len()).await.unwrap();
            assert!(got[..] == big[..]);
            let mut part = vec![0u8; 100_000];
            c.read_into(1, 12345, &mut part).await.unwrap();
            assert!(part[..] == big[12345..112_345]);
            // write_at at the write pointer works, elsewhere it is Invalid Write.
            let wp = big.len() as u64;
            c.write_at_slice(1, wp, b"next").await.unwrap();
            let e = c.write_at_slice(1, 3, b"x").await.unwrap_err();
            assert_eq!(e.kind(), Some(ErrorKind::InvalidWrite), "{e}");
            let e = c
                .write_at(1, wp + 4, bytes::Bytes::new())
                .await
                .unwrap_err();
            assert!(e.to_string().contains("0 bytes"), "{e}");
            // Zones out of range: errors, no panic, on any core.
            for zone in [6u32, 7, 1000] {
                let e = c.append_slice(zone, b"x").await.unwrap_err();
                assert_eq!(e.kind(), Some(ErrorKind::OutOfRange), "{e}");
                assert!(c.read(zone, 0, 1).await.is_err());
                assert!(c.flush(zone).await.is_err());
                assert!(c.reset(zone).await.is_err());
                assert!(c.report(zone, 1).await.is_err());
            }
            // Actions and reports.
            c.append_slice(4, b"four").await.unwrap();
            c.finish(4).await.unwrap();
            let r = c.report(0, 6).await.unwrap();
            assert_eq!(
                r.iter().map(|z| z.index).collect::<Vec<_>>(),
                vec![0, 1, 2, 3, 4, 5]
            );
            assert_eq!(r[4].state, ZoneState::Full);
            let e = c.append_slice(4, b"late").await.unwrap_err();
            assert_eq!(e.kind(), Some(ErrorKind::ZoneFull), "{e}");
            c.zone_action(ZoneAction::Open, ZoneTarget::One(2))
                .await
                .unwrap();
            assert_eq!(
                c.report(2, 1).await.unwrap()[0].state,
                ZoneState::ExplicitlyOpened
            );
            c.zone_action(ZoneAction::Reset, ZoneTarget::All)
                .await
                .unwrap();
            assert!(c
                .report(0, 6)
                .await
                .unwrap()
                .iter()
                .all(|z| z.state == ZoneState::Empty));
            // The escape hatch runs on a core with a Ziob.
            let name = c
                .with_ziob(|z| async move {
                    assert!(ziob::runtime::on_core());
                    Ok(z.view_name().to_string())
                })
                .await
                .unwrap();
            assert!(name.starts_with("ziob(mem:"), "{name}");
            let stats = c.stats().await.unwrap();
            assert_eq!(stats.len(), 2);
            c.close().await.unwrap();
            let e = c.read(1, 0, 1).await.unwrap_err();
            assert!(matches!(e, ziob::ZiobError::Closed), "{e}");
        });
    });
}

#[test]
fn pass_through_takes_bytes_too() {
    bounded(60, "pass-through", || {
        let rt = Runtime::builder().cores(2).build().unwrap();
        let c = open(&rt, "mem:zones=4,zone_size=1M", ZiobConfig::pass_through());
        let b = c.blocking();
        let data = record(3, 1, 8192);
        assert_eq!(b.append_slice(3, &data).unwrap(), 0);
        b.write_at_slice(3, 8192, &data[..4096]).unwrap();
        assert_eq!(&b.read(3, 0, 8192).unwrap()[..], &data[..]);
        assert_eq!(&b.read(3, 8192, 4096).unwrap()[..], &data[..4096]);
        // The owned-buffer forms, async and blocking.
        let dma = ziob::DmaBuf::from_slice(&data[4096..]);
        futures::executor::block_on(c.write_at_dma(3, 12288, dma)).unwrap();
        b.write_at_dma(3, 16384, ziob::DmaBuf::from_slice(&data[..4096]))
            .unwrap();
        assert_eq!(&b.read(3, 12288, 4096).unwrap()[..], &data[4096..]);
        assert_eq!(&b.read(3, 16384, 4096).unwrap()[..], &data[..4096]);
        // Not a block multiple: the device refuses it, as without the client.
        assert!(b.append_slice(3, b"odd").is_err());
        b.close().unwrap();
    });
}

/// `Client::metrics` from a thread off the runtime merges every core's counters: each append
/// is counted once, on the core that owns its zone, and the bytes add up.
#[test]
fn metrics_from_the_client_count_every_append_once() {
    bounded(60, "client metrics", || {
        let rt = Runtime::builder().cores(2).build().unwrap();
        let c = open(&rt, "mem:zones=8,zone_size=8M", ZiobConfig::default());
        futures::executor::block_on(async {
            let mut bytes = 0u64;
            for i in 0..40u32 {
                let rec = record(i, u64::from(i), 100 + i as usize);
                bytes += rec.len() as u64;
                c.append_slice(i % 8, &rec).await.unwrap();
            }
            let m = c.metrics().await.unwrap();
            assert_eq!(m.cores().len(), 2);
            assert_eq!(m.total().latency.count(ziob::OpKind::Append), 40);
            assert_eq!(m.total().stats.append_bytes, bytes);
            let per_core: Vec<u64> = m
                .cores()
                .iter()
                .map(|core| core.latency.count(ziob::OpKind::Append))
                .collect();
            assert_eq!(per_core, vec![20, 20], "zones alternate between the cores");
            c.close().await.unwrap();
        });
    });
}

#[test]
fn offsets_near_the_end_of_u64_are_errors_not_panics() {
    bounded(60, "extreme offsets", || {
        let rt = Runtime::builder().cores(2).build().unwrap();
        for buffered in [true, false] {
            let cfg = ZiobConfig {
                buffered,
                ..ZiobConfig::default()
            };
            let c = open(&rt, "mem:zones=4,zone_size=1M", cfg);
            futures::executor::block_on(async {
                c.append_slice(1, &[7u8; 4096]).await.unwrap();
                let zone_size = c.geometry().zone_size_bytes;
                let extremes = [
                    (u64::MAX, 1usize),
                    (u64::MAX - 4095, 4096),
                    (u64::MAX / 2, 4096),
                    (zone_size, 4096),
                    (4096, usize::MAX),
                ];
                for (offset, len) in extremes {
                    let what = format!("buffered={buffered} offset={offset} len={len}");
                    assert!(c.read(1, offset, len).await.is_err(), "read {what}");
                    if len <= 4096 {
                        let mut buf = vec![0u8; len];
                        assert!(c.read_into(1, offset, &mut buf).await.is_err(), "{what}");
                        let data = vec![1u8; len];
                        assert!(c.write_at_slice(1, offset, &data).await.is_err(), "{what}");
                    }
                }
                let r = c.report(2, u32::MAX).await.unwrap();
                assert_eq!(r.iter().map(|z| z.index).collect::<Vec<_>>(), vec![2, 3]);
                // The zone is unharmed.
                assert_eq!(&c.read(1, 0, 4096).await.unwrap()[..], &[7u8; 4096][..]);
                c.close().await.unwrap();
            });
        }
    });
}
