//! Many tokio tasks appending to the same zone logs at once, over small zones so rollovers
//! race with appends, syncs and readers: every append gets its own position, every record
//! is readable there, a task's records are in its order, the log read back (and a tail that
//! followed it live) holds every record once, in position order.

mod zonelog_support;

use std::collections::HashMap;

use futures::StreamExt;
use ziob::zonelog::Position;
use ziob::ZiobConfig;
use zonelog_support::{bounded, mix, open_space, record, tokio_rt, ziob_rt};

const TASKS: u64 = 32;
const PER_TASK: u64 = 50;

/// Record `i` of task `t` names itself in its first 16 bytes.
fn tagged(t: u64, i: u64) -> Vec<u8> {
    let len = 16 + (mix(t << 32 | i) % 3000) as usize;
    let mut r = record(t << 32 | i, len);
    r[..8].copy_from_slice(&t.to_le_bytes());
    r[8..16].copy_from_slice(&i.to_le_bytes());
    r
}

fn untag(b: &[u8]) -> (u64, u64) {
    (
        u64::from_le_bytes(b[..8].try_into().unwrap()),
        u64::from_le_bytes(b[8..16].try_into().unwrap()),
    )
}

#[test]
fn concurrent_appenders_get_distinct_ordered_positions() {
    for config in [ZiobConfig::default(), ZiobConfig::pass_through()] {
        bounded(120, move || {
            let rt = ziob_rt(3);
            tokio_rt(4).block_on(async move {
                let spec = "mem:zones=200,zone_size=64K";
                let (client, space) = open_space(&rt, spec, config).await;
                let logs = [
                    space.open_log("a").await.unwrap(),
                    space.open_log("b").await.unwrap(),
                ];
                // A tail on log a from its start, following live.
                let tail = {
                    let log = logs[0].clone();
                    tokio::spawn(async move {
                        let mut s = Box::pin(log.tail(log.start()));
                        let mut seen = Vec::new();
                        while seen.len() < (TASKS / 2 * PER_TASK) as usize {
                            // A tail that skipped records would wait here for ever.
                            let n =
                                tokio::time::timeout(std::time::Duration::from_secs(20), s.next())
                                    .await
                                    .unwrap_or_else(|_| {
                                        panic!(
                                            "tail stuck after {} records (last {:?}), log end {}",
                                            seen.len(),
                                            seen.last(),
                                            log.end()
                                        )
                                    });
                            let (p, b) = n.unwrap().unwrap();
                            seen.push((p, untag(&b)));
                        }
                        seen
                    })
                };
                let mut tasks = Vec::new();
                for t in 0..TASKS {
                    let log = logs[(t % 2) as usize].clone();
                    tasks.push(tokio::spawn(async move {
                        let mut mine: Vec<(Position, u64)> = Vec::new();
                        let mut i = 0;
                        while i < PER_TASK {
                            let r = mix(t ^ i << 20);
                            if r.is_multiple_of(5) && i + 3 <= PER_TASK {
                                let recs: Vec<Vec<u8>> = (i..i + 3).map(|k| tagged(t, k)).collect();
                                let refs: Vec<&[u8]> = recs.iter().map(|x| &x[..]).collect();
                                let ps = log.append_batch(&refs).await.unwrap();
                                mine.extend(ps.into_iter().zip(i..i + 3));
                                i += 3;
                            } else {
                                mine.push((log.append(&tagged(t, i)).await.unwrap(), i));
                                i += 1;
                            }
                            if r.is_multiple_of(7) {
                                log.sync().await.unwrap();
                            }
                            if r.is_multiple_of(11) {
                                // Read back an earlier own record.
                                let (p, k) = mine[(r as usize / 11) % mine.len()];
                                assert_eq!(untag(&log.read(p).await.unwrap()), (t, k));
                            }
                        }
                        for w in mine.windows(2) {
                            assert!(w[0].0 < w[1].0, "task {t}: own records out of order");
                        }
                        mine
                    }));
                }
                let mut by_log: [HashMap<Position, (u64, u64)>; 2] = Default::default();
                for (t, task) in tasks.into_iter().enumerate() {
                    for (p, i) in task.await.unwrap() {
                        let prev = by_log[t % 2].insert(p, (t as u64, i));
                        assert!(prev.is_none(), "position {p} given twice");
                    }
                }
                for (l, log) in logs.iter().enumerate() {
                    let all = log.read_from(log.start(), usize::MAX).await.unwrap();
                    assert_eq!(all.len(), by_log[l].len(), "log {l}");
                    for w in all.windows(2) {
                        assert!(w[0].0 < w[1].0);
                    }
                    for (p, b) in &all {
                        assert_eq!(Some(&untag(b)), by_log[l].get(p), "log {l} at {p}");
                    }
                    assert!(
                        log.zones().len() > 5,
                        "rollovers happened: {:?}",
                        log.zones()
                    );
                }
                let seen = tail.await.unwrap();
                let all_a: Vec<(Position, (u64, u64))> = logs[0]
                    .read_from(logs[0].start(), usize::MAX)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|(p, b)| (p, untag(&b)))
                    .collect();
                assert_eq!(seen, all_a, "the tail saw the log as it is");
                client.close().await.unwrap();
            });
        });
    }
}
