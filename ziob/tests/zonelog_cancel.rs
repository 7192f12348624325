//! Zone log calls dropped at their n-th await point (appends that move the log to a fresh
//! zone, syncs, truncations, log creation), from many tokio tasks at once: afterwards every
//! completed append reads back at its position, the log reads through in order, appends
//! and rollovers still work, no zone leaks, and a reopen finds nothing damaged.

mod zonelog_support;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use ziob::zonelog::{LogSpace, LogSpaceOptions, Position};
use ziob::{Client, ZiobConfig, ZiobError};
use zonelog_support::{bounded, mix, record, tokio_rt, ziob_rt, EmuFile};

/// Polls `inner` at most `polls` times; drops it (cancels it) if it is not done by then.
struct PollLimit<F> {
    inner: Option<Pin<Box<F>>>,
    polls: u32,
}

impl<F: Future> Future for PollLimit<F> {
    type Output = Option<F::Output>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.polls == 0 {
            self.inner = None;
            return Poll::Ready(None);
        }
        self.polls -= 1;
        match self.inner.as_mut().unwrap().as_mut().poll(cx) {
            Poll::Ready(v) => Poll::Ready(Some(v)),
            Poll::Pending => Poll::Pending,
        }
    }
}

fn limit<F: Future>(polls: u32, f: F) -> PollLimit<F> {
    PollLimit {
        inner: Some(Box::pin(f)),
        polls,
    }
}

#[test]
fn dropped_calls_leave_the_log_consistent() {
    // ZIOB_ZONELOG_CANCEL_ROUNDS=N runs more rounds (each its own seed and device).
    let rounds: u64 = std::env::var("ZIOB_ZONELOG_CANCEL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    for round in 0..rounds {
        one_round(round);
    }
}

fn one_round(round: u64) {
    let file = EmuFile::create("cancel", 24, 64 << 10);
    let spec = file.spec();
    let kept = {
        let spec = spec.clone();
        bounded(120, move || {
            let rt = ziob_rt(2);
            tokio_rt(3).block_on(async move {
                let client = Client::open(rt.handle(), &spec, ZiobConfig::default())
                    .await
                    .unwrap();
                let space = LogSpace::open(client.clone(), LogSpaceOptions::default())
                    .await
                    .unwrap();
                let log = space.open_log("c").await.unwrap();
                let mut tasks = Vec::new();
                for t in 0..8u64 {
                    let (log, space) = (log.clone(), space.clone());
                    let round = round;
                    tasks.push(tokio::spawn(async move {
                        let mut done: Vec<(Position, Vec<u8>)> = Vec::new();
                        for i in 0..80u64 {
                            let r = mix(round << 48 | t << 32 | i);
                            let polls = (r % 6) as u32;
                            match r % 10 {
                                0 => {
                                    let _ = limit(polls, log.sync()).await;
                                }
                                1 if !done.is_empty() && r.is_multiple_of(3) => {
                                    let cut = done[done.len() / 2].0;
                                    if let Some(res) = limit(polls, log.truncate_before(cut)).await
                                    {
                                        res.unwrap();
                                    }
                                }
                                2 => {
                                    let name = format!("side{}", r % 3);
                                    let _ = limit(polls, space.open_log(&name)).await;
                                }
                                _ => {
                                    let rec = record(t << 32 | i, 2000 + (r % 9000) as usize);
                                    match limit(polls + 1, log.append(&rec)).await {
                                        Some(Ok(p)) => done.push((p, rec)),
                                        Some(Err(ZiobError::NoSpace { .. })) => {
                                            log.truncate_before(log.end()).await.unwrap();
                                        }
                                        Some(Err(e)) => panic!("{e}"),
                                        None => {}
                                    }
                                }
                            }
                        }
                        done
                    }));
                }
                let mut done = Vec::new();
                for t in tasks {
                    done.extend(t.await.unwrap());
                }
                // Completed appends at or after the start read back at their positions.
                let start = log.start();
                done.retain(|(p, _)| *p >= start);
                for (p, r) in &done {
                    assert_eq!(&log.read(*p).await.unwrap()[..], &r[..], "at {p}");
                }
                // The whole log reads through in order (dropped appends may be in it).
                let all = log.read_from(start, usize::MAX).await.unwrap();
                for w in all.windows(2) {
                    assert!(w[0].0 < w[1].0);
                }
                assert!(all.len() >= done.len());
                // Still works: appends across several fresh zones (after freeing zones).
                log.truncate_before(log.end()).await.unwrap();
                for i in 0..40u64 {
                    let r = record(1 << 40 | i, 9000);
                    let p = log.append(&r).await.unwrap();
                    done.push((p, r));
                }
                log.sync().await.unwrap();
                // Zones: every one is free, stale (to reset) or used by a log.
                let mut used = 0;
                for name in space.logs() {
                    used += space.open_log(&name).await.unwrap().zones().len();
                }
                assert_eq!(used + space.free_zones(), 24, "a zone leaked");
                let all = log.read_from(log.start(), usize::MAX).await.unwrap();
                client.close().await.unwrap();
                drop((log, space, client));
                drop(rt);
                all
            })
        })
    };
    bounded(120, move || {
        let rt = ziob_rt(2);
        tokio_rt(2).block_on(async move {
            let client = Client::open(rt.handle(), &spec, ZiobConfig::default())
                .await
                .unwrap();
            let space = LogSpace::open(client.clone(), LogSpaceOptions::default())
                .await
                .unwrap();
            assert_eq!(space.recovery().dropped_bytes, 0, "{:?}", space.recovery());
            let log = space.open_log("c").await.unwrap();
            let all = log.read_from(log.start(), usize::MAX).await.unwrap();
            assert_eq!(all, kept);
            client.close().await.unwrap();
        });
    });
}
