//! Zone log API from tokio: create, append, read, streams, tail, truncate, remove, and the
//! typed errors for bad input.

mod zonelog_support;

use futures::StreamExt;
use ziob::zonelog::{LogSpace, LogSpaceOptions, Position};
use ziob::{ZiobConfig, ZiobError};
use zonelog_support::{bounded, open_space, record, tokio_rt, ziob_rt};

#[test]
fn append_read_stream_truncate_remove() {
    bounded(120, || {
        let rt = ziob_rt(2);
        tokio_rt(2).block_on(async move {
            let (client, space) =
                open_space(&rt, "mem:zones=16,zone_size=64K", ZiobConfig::default()).await;
            assert!(space.logs().is_empty());
            let log = space.open_log("wal").await.unwrap();
            assert_eq!(space.logs(), vec!["wal".to_string()]);
            assert_eq!(log.start(), log.end());
            // Enough records of up to 5000 bytes to fill several 64 KiB zones.
            let mut recs = Vec::new();
            for i in 0..200u64 {
                let r = record(i, (i as usize * 37) % 5000);
                let p = log.append(&r).await.unwrap();
                if let Some((last, _)) = recs.last() {
                    assert!(p > *last, "positions grow");
                }
                recs.push((p, r));
                if i % 17 == 0 {
                    log.sync().await.unwrap();
                }
            }
            assert!(log.zones().len() > 3, "{:?}", log.zones());
            for (p, r) in &recs {
                assert_eq!(&log.read(*p).await.unwrap()[..], &r[..]);
            }
            let all = log.read_from(log.start(), usize::MAX).await.unwrap();
            assert_eq!(all.len(), recs.len());
            for ((p, b), (q, r)) in all.iter().zip(&recs) {
                assert_eq!(p, q);
                assert_eq!(&b[..], &r[..]);
            }
            // Going on from the position after a record.
            let (p5, r5) = &recs[5];
            let next = log.read_from(p5.after(r5.len()), 2).await.unwrap();
            assert_eq!(next[0].0, recs[6].0);
            assert_eq!(next[1].0, recs[7].0);
            // The stream gives the same records and ends.
            let streamed: Vec<_> = log.stream(recs[100].0).collect().await;
            assert_eq!(streamed.len(), 100);
            assert_eq!(streamed[0].as_ref().unwrap().0, recs[100].0);
            // Batch appends are contiguous and in order.
            let batch: Vec<Vec<u8>> = (0..10).map(|i| record(1000 + i, 100)).collect();
            let refs: Vec<&[u8]> = batch.iter().map(|b| &b[..]).collect();
            let ps = log.append_batch(&refs).await.unwrap();
            for w in ps.windows(2) {
                assert_eq!(w[1], w[0].after(100));
            }
            // Truncation frees zones; reading before the start is a typed error.
            let free_before = space.free_zones();
            let cut = recs[150].0;
            log.truncate_before(cut).await.unwrap();
            assert!(space.free_zones() > free_before);
            assert!(log.start() <= cut);
            assert!(matches!(
                log.read(recs[0].0).await,
                Err(ZiobError::Truncated { .. })
            ));
            assert_eq!(&log.read(cut).await.unwrap()[..], &recs[150].1[..]);
            let from_start = log.read_from(log.start(), usize::MAX).await.unwrap();
            assert_eq!(from_start.last().unwrap().0, *ps.last().unwrap());
            // Remove.
            space.remove_log("wal").await.unwrap();
            assert!(space.logs().is_empty());
            assert!(matches!(
                log.append(b"x").await,
                Err(ZiobError::NoSuchLog { .. })
            ));
            assert_eq!(space.free_zones(), 16);
            client.close().await.unwrap();
        });
    });
}

#[test]
fn tail_follows_and_wait_for_wakes() {
    bounded(120, || {
        let rt = ziob_rt(2);
        tokio_rt(3).block_on(async move {
            let (client, space) =
                open_space(&rt, "mem:zones=16,zone_size=64K", ZiobConfig::default()).await;
            let log = space.open_log("events").await.unwrap();
            let p0 = log.append(b"before").await.unwrap();
            let mut tail = Box::pin(log.tail(p0));
            let (p, b) = tail.next().await.unwrap().unwrap();
            assert_eq!((p, &b[..]), (p0, &b"before"[..]));
            let writer = {
                let log = log.clone();
                tokio::spawn(async move {
                    let mut ps = Vec::new();
                    for i in 0..300u64 {
                        ps.push(log.append(&record(i, 700)).await.unwrap());
                        if i % 50 == 0 {
                            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                        }
                    }
                    ps
                })
            };
            let mut got = Vec::new();
            while got.len() < 300 {
                let (p, b) = tail.next().await.unwrap().unwrap();
                assert_eq!(&b[..], &record(got.len() as u64, 700)[..]);
                got.push(p);
            }
            assert_eq!(got, writer.await.unwrap());
            // wait_for resolves only once something is appended past the end.
            let end = log.end();
            let waiter = {
                let log = log.clone();
                tokio::spawn(async move { log.wait_for(end).await })
            };
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            assert!(!waiter.is_finished());
            let last = log.append(b"wake").await.unwrap();
            waiter.await.unwrap().unwrap();
            assert!(last >= end);
            // Removing the log ends a tail with an error.
            space.remove_log("events").await.unwrap();
            let mut tail2 = Box::pin(log.tail(log.end()));
            assert!(matches!(
                tail2.next().await,
                Some(Err(ZiobError::NoSuchLog { .. }))
            ));
            client.close().await.unwrap();
        });
    });
}

#[test]
fn bad_input_gets_typed_errors() {
    bounded(120, || {
        let rt = ziob_rt(1);
        tokio_rt(1).block_on(async move {
            let (client, space) =
                open_space(&rt, "mem:zones=8,zone_size=64K", ZiobConfig::default()).await;
            for bad in ["", "a b", "x/y", &"n".repeat(65)] {
                assert!(matches!(
                    space.open_log(bad).await,
                    Err(ZiobError::InvalidLogName { .. })
                ));
            }
            let log = space.open_log("l").await.unwrap();
            let max = log.max_record_bytes() as usize;
            assert!(matches!(
                log.append(&vec![1u8; max + 1]).await,
                Err(ZiobError::RecordTooLarge { .. })
            ));
            // The largest record fits (in a zone of its own).
            let big = log.append(&vec![2u8; max]).await.unwrap();
            assert_eq!(log.read(big).await.unwrap().len(), max);
            let p = log.append(b"abc").await.unwrap();
            assert!(matches!(
                log.read(Position::new(p.seq(), p.offset_bytes() + 1)).await,
                Err(ZiobError::InvalidPosition { .. })
            ));
            assert!(matches!(
                log.read(log.end()).await,
                Err(ZiobError::InvalidPosition { .. })
            ));
            assert!(matches!(
                log.truncate_before(Position::new(p.seq() + 5, 0)).await,
                Err(ZiobError::InvalidPosition { .. })
            ));
            assert!(matches!(
                space.remove_log("nope").await,
                Err(ZiobError::NoSuchLog { .. })
            ));
            assert!(matches!(
                LogSpace::open(
                    client.clone(),
                    LogSpaceOptions {
                        zones: 4..9,
                        ..Default::default()
                    }
                )
                .await,
                Err(ZiobError::Config(_))
            ));
            client.close().await.unwrap();
        });
    });
}

#[test]
fn running_out_of_zones_is_no_space_and_truncation_frees_them() {
    bounded(120, || {
        let rt = ziob_rt(2);
        tokio_rt(2).block_on(async move {
            let (client, space) =
                open_space(&rt, "mem:zones=6,zone_size=64K", ZiobConfig::default()).await;
            let a = space.open_log("a").await.unwrap();
            let b = space.open_log("b").await.unwrap();
            let rec = vec![7u8; 20_000];
            let mut last = None;
            let err = loop {
                match a.append(&rec).await {
                    Ok(p) => last = Some(p),
                    Err(e) => break e,
                }
            };
            assert!(matches!(err, ZiobError::NoSpace { .. }), "{err}");
            // Log b still has room in its zone; a new log finds no zone.
            b.append(b"fits").await.unwrap();
            assert!(matches!(
                space.open_log("c").await,
                Err(ZiobError::NoSpace { .. })
            ));
            // The failed appends left nothing behind: the log ends with the last success.
            let all = a.read_from(a.start(), usize::MAX).await.unwrap();
            assert_eq!(all.last().unwrap().0, last.unwrap());
            a.truncate_before(a.end()).await.unwrap();
            let p = a.append(&rec).await.unwrap();
            assert_eq!(&a.read(p).await.unwrap()[..], &rec[..]);
            space.open_log("c").await.unwrap();
            client.close().await.unwrap();
        });
    });
}

/// Pass-through, the device's active-zone limit applies: each log keeps one zone active, so
/// a device allowing 3 active zones holds 3 logs (rollovers finish the old zone first);
/// with the buffer on, the limit is lifted and a fourth log opens. Logs written
/// pass-through (whole-block appends) reopen intact.
#[test]
fn active_zone_limit_pass_through_and_lifted_by_the_buffer() {
    let file = zonelog_support::EmuFile::create_limited("limit", 16, 64 << 10, Some(3));
    let spec = file.spec();
    let written = {
        let spec = spec.clone();
        bounded(120, move || {
            let rt = ziob_rt(2);
            tokio_rt(2).block_on(async move {
                let (client, space) = open_space(&rt, &spec, ZiobConfig::pass_through()).await;
                let mut logs = Vec::new();
                for name in ["a", "b", "c"] {
                    logs.push(space.open_log(name).await.unwrap());
                }
                let err = space.open_log("d").await.unwrap_err();
                assert!(
                    matches!(&err, ZiobError::NoSpace { detail, .. } if detail.contains("active")),
                    "{err}"
                );
                // Rollovers within the limit.
                let mut written = Vec::new();
                for i in 0..60u64 {
                    let log = &logs[(i % 3) as usize];
                    let r = record(i, 9000);
                    written.push((log.name().to_string(), log.append(&r).await.unwrap(), r));
                }
                assert!(logs[0].zones().len() >= 3);
                for l in &logs {
                    l.sync().await.unwrap();
                }
                client.close().await.unwrap();
                drop((logs, space, client));
                drop(rt);
                written
            })
        })
    };
    bounded(120, move || {
        let rt = ziob_rt(2);
        tokio_rt(2).block_on(async move {
            let (client, space) = open_space(&rt, &spec, ZiobConfig::default()).await;
            assert_eq!(space.recovery().dropped_bytes, 0);
            for (name, p, r) in &written {
                let log = space.open_log(name).await.unwrap();
                assert_eq!(&log.read(*p).await.unwrap()[..], &r[..]);
            }
            // The buffer lifts the limit: a fourth log opens.
            let d = space.open_log("d").await.unwrap();
            d.append(b"fourth").await.unwrap();
            client.close().await.unwrap();
        });
    });
}

/// A space over part of the device uses only its zones; another space over the rest is
/// independent, and each finds only its own logs on reopen.
#[test]
fn spaces_over_parts_of_the_device() {
    bounded(120, || {
        let rt = ziob_rt(2);
        tokio_rt(2).block_on(async move {
            let client = ziob::Client::open(
                rt.handle(),
                "mem:zones=8,zone_size=64K",
                ZiobConfig::default(),
            )
            .await
            .unwrap();
            let opts = |zones| LogSpaceOptions {
                zones,
                ..Default::default()
            };
            let left = LogSpace::open(client.clone(), opts(0..5)).await.unwrap();
            let right = LogSpace::open(client.clone(), opts(5..8)).await.unwrap();
            let l = left.open_log("l").await.unwrap();
            let r = right.open_log("r").await.unwrap();
            for i in 0..12u64 {
                l.append(&record(i, 30_000)).await.unwrap();
                r.append(&record(100 + i, 30_000)).await.unwrap();
                r.truncate_before(r.end()).await.unwrap();
                if l.zones().len() >= 4 {
                    l.truncate_before(l.end()).await.unwrap();
                }
            }
            assert!(
                l.zones().iter().all(|z| (0..5).contains(z)),
                "{:?}",
                l.zones()
            );
            assert!(
                r.zones().iter().all(|z| (5..8).contains(z)),
                "{:?}",
                r.zones()
            );
            l.sync().await.unwrap();
            r.sync().await.unwrap();
            drop((left, right));
            let left = LogSpace::open(client.clone(), opts(0..5)).await.unwrap();
            assert_eq!(left.logs(), vec!["l".to_string()]);
            let right = LogSpace::open(client.clone(), opts(5..u32::MAX))
                .await
                .unwrap();
            assert_eq!(right.logs(), vec!["r".to_string()]);
            let r2 = right.open_log("r").await.unwrap();
            let last = r2.read_from(r2.start(), usize::MAX).await.unwrap();
            assert_eq!(&last.last().unwrap().1[..], &record(111, 30_000)[..]);
            client.close().await.unwrap();
        });
    });
}

/// A log opened on a core takes its zones from those the core owns while one is free, the
/// others from the lowest free zones; opened on another core later, its next zones are
/// that core's.
#[test]
fn a_log_opened_on_a_core_takes_that_cores_zones() {
    bounded(120, || {
        let rt = ziob_rt(2);
        tokio_rt(2).block_on(async move {
            let (client, space) =
                open_space(&rt, "mem:zones=24,zone_size=64K", ZiobConfig::default()).await;
            let on1 = space.open_log_on_core("on1", 1).await.unwrap();
            let plain = space.open_log("plain").await.unwrap();
            let rec = vec![7u8; 20_000];
            for _ in 0..12 {
                on1.append(&rec).await.unwrap();
                plain.append(&rec).await.unwrap();
            }
            let zones = on1.zones();
            assert!(zones.len() >= 3, "{zones:?}");
            assert!(
                zones.iter().all(|&z| client.owner_core(z) == 1),
                "{zones:?}"
            );
            // Left alone, the other log took the lowest free zones: core 0's, between.
            assert!(
                plain.zones().iter().all(|&z| client.owner_core(z) == 0),
                "{:?}",
                plain.zones()
            );
            let again = space.open_log_on_core("on1", 0).await.unwrap();
            let before = again.zones();
            for _ in 0..6 {
                again.append(&rec).await.unwrap();
            }
            let new: Vec<u32> = again
                .zones()
                .into_iter()
                .filter(|z| !before.contains(z))
                .collect();
            assert!(!new.is_empty());
            assert!(new.iter().all(|&z| client.owner_core(z) == 0), "{new:?}");
            client.close().await.unwrap();
        });
    });
}
