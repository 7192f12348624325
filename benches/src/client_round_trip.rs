//! Round trip of one 4 KiB append, one at a time: from a tokio task through the
//! [`Client`], from a plain thread through the [`BlockingClient`](ziob::BlockingClient), and
//! the same append made by a task on the owning core through [`Ziob::append`](ziob::Ziob::append).

use std::time::Instant;

use bytes::Bytes;
use serde::Serialize;
use ziob::{Client, DmaBuf, ZiobError, ZoneAction, ZoneTarget};

use crate::client_bench::{histogram, record, zone_full, Percentiles, RECORD_BYTES};

/// Round-trip latencies of one repeat.
#[derive(Debug, Clone, Serialize)]
pub struct RoundTrip {
    /// `Client::append` awaited by one task on a multi-thread tokio runtime.
    pub tokio_client: Percentiles,
    /// `BlockingClient::append` from a plain thread.
    pub blocking_client: Percentiles,
    /// `Ziob::append` awaited by a task on the zone's owning core.
    pub on_core: Percentiles,
}

/// Measures `appends` round trips of each kind to `zone` (after `appends / 10` of warm-up).
pub fn measure(
    trt: &tokio::runtime::Runtime,
    client: &Client,
    zone: u32,
    appends: u64,
) -> Result<RoundTrip, String> {
    let warm = appends / 10;
    let c = client.clone();
    let tokio_client = trt
        .block_on(async move {
            tokio::spawn(async move {
                let data = Bytes::from(vec![0x5a; RECORD_BYTES]);
                let mut h = histogram();
                for i in 0..warm + appends {
                    let t = Instant::now();
                    let res = c.append(zone, data.clone()).await;
                    let took = t.elapsed();
                    match res {
                        Ok(_) if i >= warm => record(&mut h, took),
                        Ok(_) => {}
                        Err(e) if zone_full(&e) => c.reset(zone).await?,
                        Err(e) => return Err(e),
                    }
                }
                Ok::<_, ZiobError>(Percentiles::of(&h))
            })
            .await
        })
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;

    let b = client.blocking();
    let blocking_client = std::thread::spawn(move || {
        let data = Bytes::from(vec![0x5b; RECORD_BYTES]);
        let mut h = histogram();
        for i in 0..warm + appends {
            let t = Instant::now();
            let res = b.append(zone, data.clone());
            let took = t.elapsed();
            match res {
                Ok(_) if i >= warm => record(&mut h, took),
                Ok(_) => {}
                Err(e) if zone_full(&e) => b.reset(zone)?,
                Err(e) => return Err(e),
            }
        }
        Ok::<_, ZiobError>(Percentiles::of(&h))
    })
    .join()
    .map_err(|_| "the blocking round-trip thread panicked".to_string())?
    .map_err(|e| e.to_string())?;

    let on_core = futures::executor::block_on(client.with_ziob(move |z| async move {
        let owner = z.owner_core(zone);
        // with_ziob picks a core; hop to the owner for the measured loop.
        ziob::runtime::call_on(owner, move || async move {
            let data = vec![0x5c; RECORD_BYTES];
            let mut h = histogram();
            for i in 0..warm + appends {
                let t = Instant::now();
                let res = z.append(zone, DmaBuf::from_slice(&data)).await;
                let took = t.elapsed();
                match res {
                    Ok(_) if i >= warm => record(&mut h, took),
                    Ok(_) => {}
                    Err(e) if zone_full(&e) => {
                        z.zone_action(ZoneAction::Reset, ZoneTarget::One(zone))
                            .await?
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok::<_, ZiobError>(Percentiles::of(&h))
        })
        .await?
    }))
    .map_err(|e| e.to_string())?;
    Ok(RoundTrip {
        tokio_client,
        blocking_client,
        on_core,
    })
}
