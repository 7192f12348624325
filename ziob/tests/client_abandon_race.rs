//! Calls racing `Ziob::abandon` (a crash: the instance is dropped without a sync) must answer,
//! never hang: a flush or finish waiting for a write-back, or an append waiting for memory,
//! would otherwise wait forever, because an abandoned shard starts no write-back any more
//! (found by the zone file layer's crash loop). Seeded: each round runs a writer thread
//! (appends, flushes, finishes, reports, resets over 8 zones, through the blocking client)
//! and abandons the instance after a few milliseconds; every call must answer within the
//! watchdog, and the emu file must open again.

mod client_support;

use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use client_support::Rng;
use ziob::backends::EmuDevice;
use ziob::{Client, Geometry, Runtime, ZiobConfig, ZoneAction, ZoneTarget};

fn rounds() -> u64 {
    std::env::var("ZIOB_ABANDON_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

#[test]
fn calls_racing_abandon_answer() {
    let path = PathBuf::from(format!(
        "/var/tmp/ziob-abandon-race-{}.zns",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    let rt = Runtime::builder().cores(2).build().unwrap();
    let p = path.clone();
    rt.block_on(move || async move {
        EmuDevice::create(&p, &Geometry::new(64, 256 << 10))
            .await
            .unwrap();
    })
    .unwrap();
    let spec = format!("emu:{}", path.display());
    let config = ZiobConfig::default();
    for round in 0..rounds() {
        let mut rng = Rng::new(round);
        let client =
            futures::executor::block_on(Client::open(rt.handle(), &spec, config.clone())).unwrap();
        client
            .blocking()
            .zone_action(ZoneAction::Reset, ZoneTarget::All)
            .unwrap();
        let writer_client = client.clone();
        let (tx, rx) = mpsc::channel();
        let writer = std::thread::spawn(move || {
            let c = writer_client.blocking();
            for i in 0u64.. {
                let z = (i % 8) as u32;
                let (name, r) = match i % 6 {
                    0 | 1 => ("append", c.append_slice(z, &[1u8; 3000]).map(|_| ())),
                    2 => ("flush", c.flush(z)),
                    3 => ("finish", c.finish(z)),
                    4 => ("report", c.report(0, 64).map(|_| ())),
                    _ => ("reset", c.reset(z)),
                };
                let _ = tx.send(format!("op {i} ({name})"));
                if r.is_err() {
                    return;
                }
            }
        });
        std::thread::sleep(Duration::from_millis(1 + rng.below(20)));
        futures::executor::block_on(client.with_ziob(|z| async move { z.abandon().await }))
            .unwrap();
        drop(client);
        let mut last = String::from("no call");
        loop {
            match rx.recv_timeout(Duration::from_secs(20)) {
                Ok(s) => last = s,
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("round {round}: the call after {last} never answered after abandon")
                }
            }
        }
        writer.join().unwrap();
    }
    let _ = std::fs::remove_file(&path);
}
