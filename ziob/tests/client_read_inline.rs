//! `Client::read` polled on the core owning the zone serves a range the buffer holds in
//! memory at once (no hop through the mailbox): the bytes are those of the ordinary path
//! (memory, device below it, zeros past the write pointer) whichever path a read takes.

use futures::FutureExt;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use ziob::{Client, Runtime, ZiobConfig};

fn open(rt: &Runtime, spec: &str, budget: u64) -> Client {
    let cfg = ZiobConfig {
        shard_budget_bytes: budget,
        writeback_unit_bytes: Some(16 << 10),
        ..ZiobConfig::default()
    };
    futures::executor::block_on(Client::open(rt.handle(), spec, cfg)).unwrap()
}

/// The zone's expected bytes at `[offset, offset + len)`: what was appended, zeros after.
fn expected(model: &[u8], offset: usize, len: usize) -> Vec<u8> {
    (offset..offset + len)
        .map(|i| model.get(i).copied().unwrap_or(0))
        .collect()
}

/// A read of data just appended (so in memory), polled once on the owning core, is done:
/// the ordinary path would still wait for its task to run.
#[test]
fn a_memory_read_on_the_owning_core_completes_in_one_poll() {
    let rt = Runtime::builder().cores(1).build().unwrap();
    let c = open(&rt, "mem:zones=2,zone_size=1M", 1 << 20);
    rt.block_on(move || async move {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        c.append(0, data.clone().into()).await.unwrap();
        // A fresh cooperative budget: the read has no reason to yield.
        ziob::runtime::yield_now().await;
        let got = c
            .read(0, 100, 5000)
            .now_or_never()
            .expect("served at once")
            .unwrap();
        assert!(got[..] == data[100..5100]);
        // Past the write pointer: zeros, also at once.
        let got = c
            .read(0, 9000, 4000)
            .now_or_never()
            .expect("at once")
            .unwrap();
        assert_eq!(got[..], expected(&data, 9000, 4000)[..]);
        // Out of the zone: the same error as the ordinary path.
        assert!(c.read(0, (1 << 20) - 10, 20).await.is_err());
        c.close().await.unwrap();
    })
    .unwrap();
}

/// Random appends, flushes and reads (a small budget, so data is written back and evicted
/// and reads straddle device and memory), on the owning core and on another one: every read
/// gives the model's bytes.
#[test]
fn reads_match_a_model_whichever_path_they_take() {
    let rt = Runtime::builder().cores(2).build().unwrap();
    let c = open(&rt, "mem:zones=4,zone_size=1M", 64 << 10);
    run_model(&rt, c);
}

/// The same on an `emu` device through the page cache, whose device reads are of just the
/// bytes wanted (not whole blocks).
#[test]
fn reads_match_a_model_on_a_page_cache_device() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.zns");
    let spec = format!("emu:{},direct=0", path.display());
    let rt = Runtime::builder().cores(2).build().unwrap();
    let s = spec.clone();
    rt.block_on(move || async move {
        let g = ziob::Geometry::new(4, 1 << 20);
        ziob::backends::create_device(&s, &g).await.unwrap();
    })
    .unwrap();
    let c = open(&rt, &spec, 64 << 10);
    run_model(&rt, c);
}

fn run_model(rt: &Runtime, c: Client) {
    let mut runner = TestRunner::new(Config {
        cases: 24,
        ..Config::default()
    });
    let op = prop_oneof![
        4 => (1usize..40_000).prop_map(Op::Append),
        1 => Just(Op::Flush),
        6 => (0usize..(1 << 20), 1usize..(64 << 10)).prop_map(|(o, l)| Op::Read(o, l)),
    ];
    let zone = std::sync::atomic::AtomicU32::new(0);
    runner
        .run(&proptest::collection::vec(op, 1..100), |ops| {
            // A zone per case in turn (zones 0 and 2 are core 0's, 1 and 3 core 1's), reset
            // first; the test runs on core 0.
            let z = zone.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 4;
            let c = c.clone();
            let res = rt
                .block_on(move || async move {
                    c.reset(z).await.unwrap();
                    let mut model: Vec<u8> = Vec::new();
                    for op in ops {
                        match op {
                            Op::Append(n) => {
                                if model.len() + n > 1 << 20 {
                                    continue;
                                }
                                let data: Vec<u8> =
                                    (0..n).map(|i| (model.len() + i) as u8 | 1).collect();
                                let off = c.append(z, data.clone().into()).await.unwrap();
                                model.resize(off as usize, 0); // flush padding
                                model.extend_from_slice(&data);
                            }
                            Op::Flush => c.flush(z).await.unwrap(),
                            Op::Read(o, l) => {
                                let l = l.min((1 << 20) - o);
                                let got = c.read(z, o as u64, l).await.unwrap();
                                if got[..] != expected(&model, o, l)[..] {
                                    return Err(format!("zone {z}: read {o}+{l} differs"));
                                }
                            }
                        }
                    }
                    Ok(())
                })
                .unwrap();
            res.map_err(TestCaseError::fail)
        })
        .unwrap();
    // Both kinds of read ran: from memory and (part) from the device.
    let st = ziob::ShardStats::total(&futures::executor::block_on(c.stats()).unwrap());
    assert!(st.read_hits > 0 && st.read_misses > 0, "{st:?}");
    futures::executor::block_on(c.close()).unwrap();
}

#[derive(Debug, Clone)]
enum Op {
    Append(usize),
    Flush,
    Read(usize, usize),
}
