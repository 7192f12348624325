//! Throughput of 4 KiB appends with N concurrent tasks: tokio tasks through the
//! [`Client`], against the same number of tasks on the ZIOB cores (each on the core that
//! owns its zone) through [`Ziob::append`](ziob::Ziob::append). Task `t` appends to zone
//! `t % zones`.

use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use serde::Serialize;
use ziob::{Client, DmaBuf, ZiobError, ZoneAction, ZoneTarget};

use crate::client_bench::{histogram, record, zone_full, Percentiles, RECORD_BYTES};

/// Who made the appends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Caller {
    /// Tokio tasks through the `Client`.
    TokioClient,
    /// Tasks on the owning ZIOB cores through `Ziob::append`.
    OnCore,
}

/// One repeat's result.
#[derive(Debug, Clone, Serialize)]
pub struct Throughput {
    /// Who made the appends.
    pub caller: Caller,
    /// Concurrent tasks.
    pub tasks: usize,
    /// Appends completed in the window.
    pub appends: u64,
    /// Length of the window in seconds.
    pub secs: f64,
    /// Appends per second.
    pub appends_per_sec: f64,
    /// Zone resets made when zones filled.
    pub resets: u64,
    /// Latency of each append.
    pub latency: Percentiles,
}

/// What one task did.
struct TaskResult {
    appends: u64,
    resets: u64,
    hist: Histogram<u64>,
}

fn summarise(caller: Caller, tasks: usize, secs: f64, parts: Vec<TaskResult>) -> Throughput {
    let mut hist = histogram();
    let (mut appends, mut resets) = (0, 0);
    for p in parts {
        appends += p.appends;
        resets += p.resets;
        hist.add(&p.hist).expect("same histogram bounds");
    }
    Throughput {
        caller,
        tasks,
        appends,
        secs,
        appends_per_sec: appends as f64 / secs,
        resets,
        latency: Percentiles::of(&hist),
    }
}

/// `tasks` tokio tasks append through `client` for `window`.
pub fn tokio_client(
    trt: &tokio::runtime::Runtime,
    client: &Client,
    tasks: usize,
    zones: u32,
    window: Duration,
) -> Result<Throughput, String> {
    let start = Instant::now();
    let deadline = start + window;
    let parts = trt.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|t| {
                let c = client.clone();
                let zone = t as u32 % zones;
                tokio::spawn(async move {
                    let data = Bytes::from(vec![t as u8; RECORD_BYTES]);
                    let mut r = TaskResult {
                        appends: 0,
                        resets: 0,
                        hist: histogram(),
                    };
                    loop {
                        let t0 = Instant::now();
                        if t0 >= deadline {
                            return Ok::<_, ZiobError>(r);
                        }
                        match c.append(zone, data.clone()).await {
                            Ok(_) => {
                                record(&mut r.hist, t0.elapsed());
                                r.appends += 1;
                            }
                            Err(e) if zone_full(&e) => {
                                c.reset(zone).await?;
                                r.resets += 1;
                            }
                            Err(e) => return Err(e),
                        }
                    }
                })
            })
            .collect();
        let mut parts = Vec::with_capacity(tasks);
        for h in handles {
            parts.push(
                h.await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?,
            );
        }
        Ok::<_, String>(parts)
    })?;
    let secs = start.elapsed().as_secs_f64();
    Ok(summarise(Caller::TokioClient, tasks, secs, parts))
}

/// `tasks` tasks on the ZIOB cores (each on its zone's owner) append through `Ziob::append`
/// for `window`.
pub fn on_core(
    client: &Client,
    tasks: usize,
    zones: u32,
    window: Duration,
) -> Result<Throughput, String> {
    let start = Instant::now();
    let deadline = start + window;
    let cores = client.cores();
    let parts = futures::executor::block_on(client.with_ziob(move |z| async move {
        let per_core = (0..cores).map(|core| {
            let z = z.clone();
            ziob::runtime::call_on(core, move || async move {
                let mine: Vec<usize> = (0..tasks)
                    .filter(|&t| z.owner_core(t as u32 % zones) == core)
                    .collect();
                let handles: Vec<_> = mine
                    .into_iter()
                    .map(|t| {
                        let z = z.clone();
                        let zone = t as u32 % zones;
                        ziob::runtime::spawn(async move {
                            let data = vec![t as u8; RECORD_BYTES];
                            let mut r = TaskResult {
                                appends: 0,
                                resets: 0,
                                hist: histogram(),
                            };
                            loop {
                                let t0 = Instant::now();
                                if t0 >= deadline {
                                    return Ok::<_, ZiobError>(r);
                                }
                                match z.append(zone, DmaBuf::from_slice(&data)).await {
                                    Ok(_) => {
                                        record(&mut r.hist, t0.elapsed());
                                        r.appends += 1;
                                    }
                                    Err(e) if zone_full(&e) => {
                                        z.zone_action(ZoneAction::Reset, ZoneTarget::One(zone))
                                            .await?;
                                        r.resets += 1;
                                    }
                                    Err(e) => return Err(e),
                                }
                            }
                        })
                    })
                    .collect();
                let mut parts = Vec::new();
                for h in handles {
                    parts.push(h.await?);
                }
                Ok::<_, ZiobError>(parts)
            })
        });
        let mut all = Vec::new();
        for part in futures::future::join_all(per_core).await {
            all.extend(part??);
        }
        Ok(all)
    }))
    .map_err(|e| e.to_string())?;
    let secs = start.elapsed().as_secs_f64();
    Ok(summarise(Caller::OnCore, tasks, secs, parts))
}
