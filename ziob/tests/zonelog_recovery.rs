//! Zone log recovery on `emu:`: a damaged record in a log's last zone (a flipped payload
//! byte, or a length that runs past the data) cuts the log there, the cut is reported, the
//! log goes on in a fresh zone, and the cut stays put across further reopens; and a crash
//! loop (the instance abandoned without a sync at a random time) keeps every synced record,
//! in order, with at most a prefix of the unsynced ones.

mod zonelog_support;

use std::io::{Read, Seek, SeekFrom, Write};

use bytes::Bytes;
use ziob::zonelog::{LogSpace, LogSpaceOptions, Position, SpaceRecovery};
use ziob::{Client, ZiobConfig};
use zonelog_support::{bounded, record, tokio_rt, ziob_rt, EmuFile};

const ZONES: u32 = 16;
const ZONE_BYTES: u64 = 64 << 10;

/// Byte offset of zone data in an emu file (docs/format.md, "Regions").
fn emu_data_offset(zones: u64, block: u64) -> u64 {
    let slot = (24 + 16 * zones + 4).div_ceil(4096) * 4096;
    (4096 + 2 * slot).div_ceil(block.max(4096)) * block.max(4096)
}

/// Everything a phase saw.
struct Seen {
    recovery: SpaceRecovery,
    records: Vec<(Position, Bytes)>,
    zones: Vec<u32>,
}

/// Opens the space in `file`, runs `f` on log `wal`, then closes (or abandons) the instance.
fn phase<F, Fut>(file: &EmuFile, abandon: bool, f: F) -> Seen
where
    F: FnOnce(LogSpace, ziob::zonelog::ZoneLog) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let spec = file.spec();
    bounded(120, move || {
        let rt = ziob_rt(2);
        let seen = tokio_rt(2).block_on(async {
            // A short idle write-back, so an abandoned instance often leaves a zone's data
            // on the device up to a block boundary in the middle of a record.
            let config = ZiobConfig {
                idle_writeback: Some(std::time::Duration::from_millis(20)),
                ..ZiobConfig::default()
            };
            let client = Client::open(rt.handle(), &spec, config).await.unwrap();
            let space = LogSpace::open(client.clone(), LogSpaceOptions::default())
                .await
                .unwrap();
            let log = space.open_log("wal").await.unwrap();
            let recovery = space.recovery().clone();
            f(space.clone(), log.clone()).await;
            let records = log.read_from(log.start(), usize::MAX).await.unwrap();
            let zones = log.zones();
            if abandon {
                client
                    .with_ziob(|z| async move { z.abandon().await })
                    .await
                    .unwrap();
            } else {
                client.close().await.unwrap();
            }
            Seen {
                recovery,
                records,
                zones,
            }
        });
        drop(rt);
        seen
    })
}

fn damaged_last_zone_is_cut_once(torn: bool) {
    let file = EmuFile::create(if torn { "torn" } else { "corrupt" }, ZONES, ZONE_BYTES);
    // Phase 1: records over three zones, synced.
    let first = phase(&file, false, |_, log| async move {
        for i in 0..50u64 {
            log.append(&record(i, 3000)).await.unwrap();
        }
        log.sync().await.unwrap();
    });
    assert_eq!(first.records.len(), 50);
    assert!(first.zones.len() >= 3);
    // Damage a record in the middle of the last zone.
    let last_seq = first.records.last().unwrap().0.seq();
    let in_last: Vec<usize> = (0..50)
        .filter(|&i| first.records[i].0.seq() == last_seq)
        .collect();
    assert!(in_last.len() >= 3, "{in_last:?}");
    let victim = in_last[in_last.len() / 2];
    let pos = first.records[victim].0;
    let zone = *first.zones.last().unwrap() as u64;
    let at = emu_data_offset(ZONES as u64, 4096) + zone * ZONE_BYTES + pos.offset_bytes() as u64;
    {
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&file.0)
            .unwrap();
        if torn {
            // A length that runs past the zone's data: a record cut short.
            f.seek(SeekFrom::Start(at + 4)).unwrap();
            f.write_all(&(60_000u32).to_le_bytes()).unwrap();
        } else {
            let mut b = [0u8; 1];
            f.seek(SeekFrom::Start(at + 12 + 100)).unwrap();
            f.read_exact(&mut b).unwrap();
            f.seek(SeekFrom::Start(at + 12 + 100)).unwrap();
            f.write_all(&[b[0] ^ 0x40]).unwrap();
        }
        f.sync_all().unwrap();
    }
    // Phase 2: recovery cuts at the victim; the log goes on in a fresh zone.
    let second = phase(&file, false, |_, log| async move {
        let p = log.append(b"after the cut").await.unwrap();
        log.sync().await.unwrap();
        assert_eq!(&log.read(p).await.unwrap()[..], b"after the cut");
    });
    let rec = &second.recovery.logs["wal"];
    let cut = rec.cut.as_ref().expect("the log was cut");
    assert_eq!(cut.position, pos, "{cut:?}");
    assert!(rec.dropped_bytes >= 3000, "{rec:?}");
    assert_eq!(second.recovery.dropped_bytes, rec.dropped_bytes);
    assert_eq!(second.records.len(), victim + 1);
    for (i, (p, b)) in second.records[..victim].iter().enumerate() {
        assert_eq!(*p, first.records[i].0);
        assert_eq!(b, &first.records[i].1);
    }
    let (p_new, b_new) = second.records.last().unwrap();
    assert_eq!(&b_new[..], b"after the cut");
    assert!(p_new.seq() > last_seq);
    // Phase 3: nothing more is cut; the same records, the cut zone read only to its end.
    let third = phase(&file, false, |_, _| async {});
    assert_eq!(third.recovery.logs["wal"].cut, None);
    assert_eq!(third.recovery.dropped_bytes, 0);
    assert_eq!(third.records, second.records);
}

#[test]
fn corrupt_record_cuts_the_log_once() {
    damaged_last_zone_is_cut_once(false);
}

#[test]
fn torn_record_cuts_the_log_once() {
    damaged_last_zone_is_cut_once(true);
}

/// Crash loop: each round appends and syncs some records, appends more without a sync,
/// waits a random time (idle write-back may take some of them) and abandons the instance.
/// After every reopen: all synced records are there, in order, then a prefix of the rest.
#[test]
fn crash_keeps_synced_records_in_order() {
    let rounds: u64 = std::env::var("ZIOB_ZONELOG_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let file = EmuFile::create("crash", ZONES, ZONE_BYTES);
    let mut durable: Vec<Vec<u8>> = Vec::new();
    let mut cuts = 0;
    for round in 0..rounds {
        let seed = zonelog_support::mix(round);
        let synced_n = 1 + seed % 20;
        let unsynced_n = (seed >> 8) % 30;
        let sleep_ms = (seed >> 16) % 80;
        let base = round * 1000;
        let (tx, rx) = std::sync::mpsc::channel();
        let seen = phase(&file, true, move |space, log| async move {
            // Keep the log within the device: drop what is older than the last round.
            let keep = log.read_from(log.start(), usize::MAX).await.unwrap();
            if keep.len() > 40 {
                log.truncate_before(keep[keep.len() - 40].0).await.unwrap();
            }
            let mut synced = Vec::new();
            for i in 0..synced_n {
                let r = record(base + i, 500 + ((seed >> (i % 32)) % 4000) as usize);
                log.append(&r).await.unwrap();
                synced.push(r);
            }
            log.sync().await.unwrap();
            let mut unsynced = Vec::new();
            for i in 0..unsynced_n {
                let r = record(base + 500 + i, 300 + ((seed >> (i % 29)) % 5000) as usize);
                log.append(&r).await.unwrap();
                unsynced.push(r);
            }
            tx.send((synced, unsynced)).unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(sleep_ms)).await;
            // Another log's sync flushes the device's cache: whatever idle write-back put
            // on the device of `wal`'s zone (whole blocks, maybe part of a record) stays.
            if !seed.is_multiple_of(3) {
                let side = space.open_log("side").await.unwrap();
                side.append(b"side").await.unwrap();
                side.sync().await.unwrap();
            }
        });
        let (synced, unsynced) = rx.recv().unwrap();
        // What the phase read at its end (before abandoning) had everything.
        assert!(seen.records.len() >= synced.len() + unsynced.len());
        // Reopen and check.
        let after = phase(&file, false, |_, _| async {});
        if after.recovery.logs["wal"].cut.is_some() {
            cuts += 1;
        }
        let got: Vec<&[u8]> = after.records.iter().map(|(_, b)| &b[..]).collect();
        // The log's records: the (kept tail of the) earlier ones, this round's synced
        // ones, then a prefix of the unsynced ones.
        assert!(
            got.len() >= synced.len(),
            "round {round}: synced records lost"
        );
        // Find the synced records of this round in order right before the unsynced prefix.
        let pos_first_synced = got
            .iter()
            .position(|r| *r == &synced[0][..])
            .unwrap_or_else(|| panic!("round {round}: first synced record missing"));
        for (k, r) in synced.iter().enumerate() {
            assert_eq!(
                got[pos_first_synced + k],
                &r[..],
                "round {round} synced #{k}"
            );
        }
        let rest = &got[pos_first_synced + synced.len()..];
        eprintln!(
            "round {round}: slept {sleep_ms} ms, kept {} of {} unsynced, cut: {:?}",
            rest.len(),
            unsynced.len(),
            after.recovery.logs["wal"].cut
        );
        assert!(
            rest.len() <= unsynced.len(),
            "round {round}: records from nowhere"
        );
        for (k, r) in rest.iter().enumerate() {
            assert_eq!(*r, &unsynced[k][..], "round {round} unsynced #{k}");
        }
        // Earlier rounds' records before this round's stay in order (those not truncated).
        let before = &got[..pos_first_synced];
        let durable_tail = &durable[durable.len() - before.len()..];
        for (k, r) in before.iter().enumerate() {
            assert_eq!(
                *r,
                &durable_tail[k][..],
                "round {round}: earlier record #{k}"
            );
        }
        positions_grow(&after.records);
        durable = got.iter().map(|r| r.to_vec()).collect();
    }
    eprintln!("crash loop: {rounds} rounds, {cuts} reopen(s) cut a torn tail");
}

fn positions_grow(records: &[(Position, Bytes)]) {
    for w in records.windows(2) {
        assert!(
            w[0].0 < w[1].0,
            "positions out of order: {} then {}",
            w[0].0,
            w[1].0
        );
    }
}
