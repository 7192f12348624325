//! The `Client` from tokio: many tasks on a multi-thread tokio runtime append, read back and
//! flush across zones owned by different ZIOB cores; every acknowledged byte is checked,
//! through the client and through a reopened device.

mod client_support;

use std::sync::{Arc, Mutex};

use client_support::{bounded, record, tokio_rt, Rng};
use ziob::{Client, Runtime, ZiobConfig};

const ZONES: u32 = 12;

#[test]
fn many_tokio_tasks_append_read_flush_every_byte_checked() {
    bounded(120, "tokio client workload", || {
        let rt = Runtime::builder().cores(3).build().unwrap();
        let spec = "mem:zones=12,zone_size=4M";
        let trt = tokio_rt(4);
        trt.block_on(async move {
            let client = Client::open(rt.handle(), spec, ZiobConfig::default())
                .await
                .unwrap();
            assert_eq!(client.cores(), 3);
            let acked: Arc<Mutex<Vec<(u32, u64, u64, usize)>>> = Arc::default();
            let mut tasks = Vec::new();
            for t in 0..32u64 {
                let (client, acked) = (client.clone(), acked.clone());
                tasks.push(tokio::spawn(async move {
                    let mut rng = Rng::new(t);
                    for n in 0..40u64 {
                        let zone = rng.below(u64::from(ZONES)) as u32;
                        let len = 1 + rng.below(6000) as usize;
                        let id = t << 32 | n;
                        let data = record(zone, id, len);
                        let off = match n % 3 {
                            0 => client.append(zone, data.clone().into()).await,
                            1 => client.append_slice(zone, &data).await,
                            _ => {
                                client
                                    .append_dma(zone, ziob::DmaBuf::from_slice(&data))
                                    .await
                            }
                        }
                        .unwrap();
                        // Read back at once, by both forms.
                        let got = client.read(zone, off, len).await.unwrap();
                        assert_eq!(&got[..], &data[..], "zone {zone} off {off}");
                        let mut buf = vec![0u8; len];
                        client.read_into(zone, off, &mut buf).await.unwrap();
                        assert_eq!(buf, data);
                        if rng.below(8) == 0 {
                            client.flush(zone).await.unwrap();
                        }
                        acked.lock().unwrap().push((zone, off, id, len));
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
            client.sync().await.unwrap();
            let acked = acked.lock().unwrap().clone();
            for &(zone, off, id, len) in &acked {
                let got = client.read(zone, off, len).await.unwrap();
                assert_eq!(
                    &got[..],
                    &record(zone, id, len)[..],
                    "zone {zone} off {off}"
                );
            }
            // Every zone's write pointer covers what was acknowledged in it.
            let report = client.report(0, ZONES).await.unwrap();
            assert_eq!(report.len(), ZONES as usize);
            for &(zone, off, _, len) in &acked {
                assert!(report[zone as usize].write_pointer_bytes >= off + len as u64);
            }
            let stats = client.stats().await.unwrap();
            assert_eq!(stats.len(), 3);
            client.close().await.unwrap();
            drop(rt);
        });
    });
}
