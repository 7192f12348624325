//! Small records appended through the `Client` (`Bytes` or `&[u8]`) are copied straight into
//! the zone's chunk: the owning core's buffer pool hands out a few chunks, not one aligned
//! 4 KiB buffer per record (what `Ziob::append(DmaBuf::from_slice(..))` costs; measured
//! alongside as the reference).

mod client_support;

use client_support::bounded;
use ziob::runtime::buf::pool_stats;
use ziob::{Client, DmaBuf, Runtime, ZiobConfig};

const RECORDS: u64 = 2000;

/// Buffers the pool of core `core` handed out so far (reused or newly allocated).
fn buffers_taken(client: &Client, core: usize) -> u64 {
    futures::executor::block_on(client.with_ziob(move |_| async move {
        ziob::runtime::call_on(core, || async {
            let s = pool_stats();
            s.reuses + s.allocations + s.fixed_taken
        })
        .await
        .map_err(Into::into)
    }))
    .unwrap()
}

#[test]
fn small_appends_through_the_client_take_no_buffer_each() {
    bounded(60, "small records", || {
        let rt = Runtime::builder().cores(2).build().unwrap();
        let client = futures::executor::block_on(Client::open(
            rt.handle(),
            "mem:zones=4,zone_size=4M",
            ZiobConfig::default(),
        ))
        .unwrap();
        let zone = 1;
        let owner = client.owner_core(zone);
        let b = client.blocking();
        let before = buffers_taken(&client, owner);
        for i in 0..RECORDS {
            let rec = [i as u8; 100];
            if i % 2 == 0 {
                b.append_slice(zone, &rec).unwrap();
            } else {
                b.append(zone, bytes::Bytes::copy_from_slice(&rec)).unwrap();
            }
        }
        let client_taken = buffers_taken(&client, owner) - before;
        // 200 KB of records: a handful of chunks (a first block, doublings up to the unit).
        assert!(
            client_taken < RECORDS / 20,
            "{client_taken} pool buffers for {RECORDS} small client appends"
        );
        // Reference: the DmaBuf path takes one per record on the core.
        let z = client.clone();
        let dma_taken = futures::executor::block_on(client.with_ziob(move |ziob| async move {
            ziob::runtime::call_on(owner, move || async move {
                let s0 = pool_stats();
                for i in 0..RECORDS {
                    ziob.append(zone, DmaBuf::from_slice(&[i as u8; 100]))
                        .await?;
                }
                let s1 = pool_stats();
                Ok::<_, ziob::ZiobError>(
                    s1.reuses + s1.allocations + s1.fixed_taken
                        - (s0.reuses + s0.allocations + s0.fixed_taken),
                )
            })
            .await?
        }))
        .unwrap();
        assert!(dma_taken >= RECORDS, "reference path took {dma_taken}");
        drop(z);
        // The data is all there.
        let all = b.read(zone, 0, 100 * RECORDS as usize).unwrap();
        for i in 0..RECORDS as usize {
            assert!(all[i * 100..(i + 1) * 100].iter().all(|&x| x == i as u8));
        }
        b.close().unwrap();
    });
}
