//! `ZiobConfig::cores`: an instance on the first n cores of a larger runtime owns every zone
//! on those cores, is reached from the others and from plain threads, and refuses a count
//! the runtime cannot give.

use bytes::Bytes;
use ziob::{Client, Runtime, ZiobConfig, ZiobError};

const ZONES: u32 = 9;

fn config(cores: Option<usize>) -> ZiobConfig {
    ZiobConfig {
        cores,
        ..ZiobConfig::default()
    }
}

fn pattern(zone: u32, writer: u32) -> Vec<u8> {
    (0..3000u32)
        .map(|i| (zone * 31 + writer * 7 + i) as u8)
        .collect()
}

#[test]
fn an_instance_on_two_of_three_cores_serves_every_core_and_thread() {
    let rt = Runtime::builder().cores(3).build().unwrap();
    let spec = format!("mem:zones={ZONES},zone_size=1M");
    let client: Client =
        futures::executor::block_on(Client::open(rt.handle(), &spec, config(Some(2)))).unwrap();
    assert_eq!(client.cores(), 2);
    for zone in 0..ZONES {
        assert_eq!(client.owner_core(zone), zone as usize % 2, "zone {zone}");
    }
    // Writers on every core (core 2 has no shard) and on a plain thread, each to every zone.
    let calls: Vec<_> = (0..3usize)
        .map(|core| {
            let c = client.clone();
            rt.handle().call(core, move || async move {
                for zone in 0..ZONES {
                    let off = c
                        .append(zone, Bytes::from(pattern(zone, core as u32)))
                        .await
                        .unwrap();
                    assert_eq!(off % 3000, 0);
                }
            })
        })
        .collect();
    for r in futures::executor::block_on(futures::future::join_all(calls)) {
        r.unwrap();
    }
    let blocking = client.blocking();
    for zone in 0..ZONES {
        blocking.append_slice(zone, &pattern(zone, 3)).unwrap();
    }
    // Every zone holds the four writers' records, whole, and reads agree on every core.
    blocking.sync().unwrap();
    for zone in 0..ZONES {
        let all = blocking.read(zone, 0, 4 * 3000).unwrap();
        let mut seen: Vec<u32> = all
            .chunks(3000)
            .map(|rec| {
                (0..4)
                    .find(|&w| rec == &pattern(zone, w)[..])
                    .expect("a whole record of one writer")
            })
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, vec![0, 1, 2, 3], "zone {zone}");
        let c = client.clone();
        let on_core_2 = futures::executor::block_on(
            rt.handle()
                .call(2, move || async move { c.read(zone, 0, 4 * 3000).await }),
        )
        .unwrap()
        .unwrap();
        assert!(on_core_2[..] == all[..]);
    }
    // Two shards, and they hold all of it.
    let stats = blocking.stats().unwrap();
    assert_eq!(stats.len(), 2);
    let written: u64 = stats.iter().map(|s| s.bytes_written).sum();
    assert_eq!(written, u64::from(ZONES) * 4 * 3000);
    blocking.close().unwrap();
}

#[test]
fn a_core_count_the_runtime_lacks_is_a_config_error() {
    let rt = Runtime::builder().cores(2).build().unwrap();
    for bad in [0, 3] {
        let err = futures::executor::block_on(Client::open(
            rt.handle(),
            "mem:zones=4,zone_size=1M",
            config(Some(bad)),
        ))
        .unwrap_err();
        assert!(matches!(err, ZiobError::Config(_)), "{bad}: {err:?}");
        assert!(
            err.to_string().contains(&format!("{bad} cores")),
            "{bad}: {err}"
        );
    }
    // All of them, spelled out or not.
    for ok in [Some(2), None, Some(1)] {
        let c = futures::executor::block_on(Client::open(
            rt.handle(),
            "mem:zones=4,zone_size=1M",
            config(ok),
        ))
        .unwrap();
        assert_eq!(c.cores(), ok.unwrap_or(2));
        c.blocking().close().unwrap();
    }
}
