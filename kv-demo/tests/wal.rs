//! The shard WAL: replay after a reopen; a corrupted record (any byte of its checksummed
//! part, at a random place) or a torn last record on the device is cut at open with the
//! records before it kept and writing going on; synced payloads survive a crash; group commit
//! shares records and syncs among many concurrent writers (each payload exactly once, each
//! writer's in order); dropped writers do not stall or lose the others; truncation.

mod durable_support;

use std::collections::BTreeMap;

use bytes::Bytes;
use durable_support::{b, bounded, end, open, runtime, EmuPath, Rng};
use futures::future::{join_all, maybe_done};
use kv_demo::wal::{Wal, WalError};
use ziob::zonelog::RECORD_HEADER_BYTES;
use ziob::{Client, LogSpace, LogSpaceOptions, Position};

const ZONES: u32 = 16;
const ZONE_BYTES: u64 = 256 << 10;

fn space(client: &Client) -> LogSpace {
    b(LogSpace::open(client.clone(), LogSpaceOptions::default())).unwrap()
}

fn payload(id: u64, len: usize) -> Vec<u8> {
    let mut p = id.to_le_bytes().to_vec();
    p.extend((0..len).map(|i| (id as u8).wrapping_mul(31) ^ i as u8));
    p
}

fn replay(wal: &Wal) -> Vec<(Position, Bytes)> {
    b(wal.replay_all(Position::ZERO)).unwrap()
}

#[test]
fn replay_after_reopen_in_two_shards() {
    let dev = EmuPath::create("wal-reopen", ZONES, ZONE_BYTES);
    let spec = dev.spec();
    bounded(120, move || {
        let rt = runtime(2);
        let mut want: BTreeMap<usize, Vec<(Position, Vec<u8>)>> = BTreeMap::new();
        let client = open(&rt, &spec, true);
        let s = space(&client);
        let wals = [b(Wal::open(&s, 0)).unwrap(), b(Wal::open(&s, 1)).unwrap()];
        let mut rng = Rng(5);
        for i in 0..300u64 {
            let shard = rng.below(2) as usize;
            let p = payload(i, rng.below(3000) as usize);
            let pos = b(wals[shard].append(&p, i % 7 == 0)).unwrap();
            want.entry(shard).or_default().push((pos, p));
        }
        for w in &wals {
            b(w.sync()).unwrap();
        }
        drop((wals, s));
        end(client, false);

        let client = open(&rt, &spec, true);
        let s = space(&client);
        assert_eq!(s.logs(), vec!["wal-0".to_string(), "wal-1".to_string()]);
        for shard in 0..2 {
            let wal = b(Wal::open(&s, shard)).unwrap();
            assert!(wal.recovery().unwrap().cut.is_none());
            let got = replay(&wal);
            let want = &want[&shard];
            assert_eq!(got.len(), want.len(), "shard {shard}");
            for ((gp, gb), (wp, wb)) in got.iter().zip(want) {
                assert_eq!((gp, &gb[..]), (wp, &wb[..]));
            }
            // Replaying from a record's position starts there.
            let mid = want.len() / 2;
            let tail = b(wal.replay_all(want[mid].0)).unwrap();
            assert_eq!(tail.len(), want.len() - mid);
        }
        drop(s);
        end(client, false);
    });
}

/// Writes `n` records (synced, one zone), closes; returns their positions and payloads and
/// the device zone holding them.
fn write_records(spec: &str, n: u64, buffered: bool) -> (Vec<(Position, Vec<u8>)>, u32) {
    let rt = runtime(1);
    let client = open(&rt, spec, buffered);
    let s = space(&client);
    let wal = b(Wal::open(&s, 0)).unwrap();
    let mut out = Vec::new();
    for i in 0..n {
        let p = payload(i, 50 + (i as usize * 97) % 900);
        out.push((b(wal.append(&p, false)).unwrap(), p));
    }
    b(wal.sync()).unwrap();
    let zones = wal.log().zones();
    assert_eq!(zones.len(), 1, "the records fit one zone");
    assert!(out.iter().all(|(p, _)| p.seq() == out[0].0.seq()));
    drop((wal, s));
    end(client, false);
    (out, zones[0])
}

/// Reopens: the WAL is cut at record `k` (records before it kept); appending goes on and
/// survives another reopen.
fn check_cut_at(spec: &str, records: &[(Position, Vec<u8>)], k: usize, buffered: bool) {
    let rt = runtime(1);
    for round in 0..2 {
        let client = open(&rt, spec, buffered);
        let s = space(&client);
        let wal = b(Wal::open(&s, 0)).unwrap();
        if round == 0 {
            let cut = wal.recovery().unwrap().cut.clone().expect("a cut");
            assert_eq!(cut.position, records[k].0, "{cut:?}");
            let got = replay(&wal);
            assert_eq!(got.len(), k);
            for ((gp, gb), (wp, wb)) in got.iter().zip(records) {
                assert_eq!((gp, &gb[..]), (wp, &wb[..]));
            }
            let pos = b(wal.append(b"after the cut", true)).unwrap();
            assert!(pos > records[k - 1].0);
        } else {
            assert!(wal.recovery().unwrap().cut.is_none());
            let got = replay(&wal);
            assert_eq!(got.len(), k + 1);
            assert_eq!(&got[k].1[..], b"after the cut");
            for ((_, gb), (_, wb)) in got[..k].iter().zip(records) {
                assert_eq!(&gb[..], &wb[..]);
            }
        }
        drop((wal, s));
        end(client, false);
    }
}

#[test]
fn a_corrupted_record_cuts_the_tail_there() {
    bounded(240, || {
        let mut rng = Rng(0x5eed);
        for round in 0..8 {
            let buffered = round % 2 == 0;
            let dev = EmuPath::create("wal-corrupt", ZONES, ZONE_BYTES);
            let spec = dev.spec();
            let (records, zone) = write_records(&spec, 40, buffered);
            // Flip one byte of record k's checksum or payload (the frame's CRC covers both).
            let k = 1 + rng.below(records.len() as u64 - 1) as usize;
            let (pos, p) = &records[k];
            let span = 4 + p.len() as u64; // crc (4) + payload
            let at = dev.zone_offset(ZONES, ZONE_BYTES, zone)
                + pos.offset_bytes() as u64
                + RECORD_HEADER_BYTES as u64
                - 4
                + rng.below(span);
            let old = dev.peek(at, 1)[0];
            dev.poke(at, &[old ^ (1 + rng.below(255) as u8)]);
            check_cut_at(&spec, &records, k, buffered);
        }
    });
}

#[test]
fn a_torn_last_record_is_dropped() {
    bounded(120, || {
        for buffered in [true, false] {
            let dev = EmuPath::create("wal-torn", ZONES, ZONE_BYTES);
            let spec = dev.spec();
            let (records, zone) = write_records(&spec, 12, buffered);
            // The last record's length now runs past the zone's written data: as if the
            // write stopped part-way through it.
            let k = records.len() - 1;
            let at = dev.zone_offset(ZONES, ZONE_BYTES, zone) + records[k].0.offset_bytes() as u64;
            dev.poke(at + 4, &(100_000u32).to_le_bytes());
            check_cut_at(&spec, &records, k, buffered);
        }
    });
}

#[test]
fn synced_payloads_survive_a_crash() {
    bounded(120, || {
        let mut rng = Rng(77);
        for _ in 0..4 {
            let dev = EmuPath::create("wal-crash", ZONES, ZONE_BYTES);
            let spec = dev.spec();
            let rt = runtime(1);
            let client = open(&rt, &spec, true);
            let s = space(&client);
            let wal = b(Wal::open(&s, 3)).unwrap();
            let n = 20 + rng.below(60);
            let mut appended = Vec::new();
            let mut synced = 0;
            for i in 0..n {
                let sync = rng.below(4) == 0;
                let p = payload(i, rng.below(2000) as usize);
                b(wal.append(&p, sync)).unwrap();
                appended.push(p);
                if sync {
                    synced = appended.len();
                }
            }
            drop((wal, s));
            end(client, true);
            let client = open(&rt, &spec, true);
            let s = space(&client);
            let wal = b(Wal::open(&s, 3)).unwrap();
            let got = replay(&wal);
            // A prefix of what was appended, holding every synced payload.
            assert!(got.len() >= synced && got.len() <= appended.len());
            for ((_, g), w) in got.iter().zip(&appended) {
                assert_eq!(&g[..], &w[..]);
            }
            b(wal.append(b"goes on", true)).unwrap();
            drop((wal, s));
            end(client, false);
        }
    });
}

/// Splits a replayed WAL into payloads (each starts with its 8-byte id and has the length
/// `lens` says) and checks every id appears once.
fn payload_ids(records: &[(Position, Bytes)], lens: &BTreeMap<u64, usize>) -> Vec<u64> {
    let mut ids = Vec::new();
    for (_, r) in records {
        let mut at = 0;
        while at < r.len() {
            let id = u64::from_le_bytes(r[at..at + 8].try_into().unwrap());
            let len = lens[&id];
            assert_eq!(&r[at..at + len], &payload(id, len - 8)[..]);
            ids.push(id);
            at += len;
        }
    }
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len(), "a payload appears twice");
    ids
}

#[test]
fn group_commit_shares_records_and_syncs() {
    bounded(120, || {
        let rt = runtime(2);
        let client = b(Client::open(
            rt.handle(),
            "mem:zones=16,zone_size=1M",
            ziob::ZiobConfig::default(),
        ))
        .unwrap();
        let s = space(&client);
        let wal = b(Wal::open(&s, 0)).unwrap();
        let mut lens = BTreeMap::new();
        // 200 writers at once on one thread, all with sync: they share records and syncs.
        let writers = (0..200u64).map(|id| {
            let p = payload(id, (id as usize * 13) % 500);
            lens.insert(id, p.len());
            let wal = wal.clone();
            async move { (id, wal.append(&p, true).await.unwrap()) }
        });
        let positions = b(join_all(writers));
        let st = wal.stats();
        assert_eq!(st.payloads, 200);
        assert!(st.records < 200, "{st:?}");
        assert!(st.syncs <= st.records, "{st:?}");
        let records = replay(&wal);
        assert_eq!(records.len() as u64, st.records);
        let ids = payload_ids(&records, &lens);
        assert_eq!(ids.len(), 200);
        // Each writer's position is the record holding its payload.
        let record_of: BTreeMap<u64, Position> = records
            .iter()
            .flat_map(|(p, r)| {
                let mut at = 0;
                let mut v = Vec::new();
                while at < r.len() {
                    let id = u64::from_le_bytes(r[at..at + 8].try_into().unwrap());
                    v.push((id, *p));
                    at += lens[&id];
                }
                v
            })
            .collect();
        for (id, pos) in positions {
            assert_eq!(record_of[&id], pos, "payload {id}");
        }

        // Writers on 8 threads, mixed sync: every payload once, each thread's in order.
        let mut lens2 = BTreeMap::new();
        for t in 0..8u64 {
            for i in 0..60u64 {
                let id = 1000 + t * 100 + i;
                lens2.insert(id, payload(id, (i as usize * 7) % 300).len());
            }
        }
        let before = wal.end();
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let wal = wal.clone();
                std::thread::spawn(move || {
                    for i in 0..60u64 {
                        let id = 1000 + t * 100 + i;
                        let p = payload(id, (i as usize * 7) % 300);
                        b(wal.append(&p, i % 3 == 0)).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let records = b(wal.replay_all(before)).unwrap();
        let ids = payload_ids(&records, &lens2);
        assert_eq!(ids.len(), 480);
        for t in 0..8u64 {
            let mine: Vec<u64> = ids
                .iter()
                .copied()
                .filter(|id| (id - 1000) / 100 == t)
                .collect();
            assert!(mine.windows(2).all(|w| w[0] < w[1]), "thread {t}: {mine:?}");
        }
        drop((wal, s));
        b(client.close()).unwrap();
    });
}

#[test]
fn dropped_writers_neither_stall_nor_lose_the_others() {
    bounded(120, || {
        let rt = runtime(2);
        let client = b(Client::open(
            rt.handle(),
            "mem:zones=16,zone_size=1M",
            ziob::ZiobConfig::default(),
        ))
        .unwrap();
        let s = space(&client);
        let wal = b(Wal::open(&s, 0)).unwrap();
        let mut lens = BTreeMap::new();
        let mut rng = Rng(9);
        for round in 0..20u64 {
            // Start 30 writers (polled once each), drop some of them, finish the rest.
            let mut futs: Vec<_> = (0..30u64)
                .map(|i| {
                    let id = round * 100 + i;
                    let p = payload(id, 100);
                    lens.insert(id, p.len());
                    let wal = wal.clone();
                    Box::pin(maybe_done(
                        async move { (id, wal.append(&p, i % 2 == 0).await) },
                    ))
                })
                .collect();
            b(async {
                for f in futs.iter_mut() {
                    let _ = futures::poll!(f.as_mut());
                }
            });
            let mut kept = Vec::new();
            let mut dropped = Vec::new();
            for f in futs {
                if rng.below(3) == 0 {
                    dropped.push(f);
                } else {
                    kept.push(f);
                }
            }
            drop(dropped);
            b(join_all(kept.iter_mut()));
            for mut f in kept {
                let (id, r) = f.as_mut().take_output().unwrap();
                r.unwrap_or_else(|e: WalError| panic!("payload {id}: {e}"));
            }
        }
        b(wal.sync()).unwrap();
        // Every kept payload is there once (dropped ones may be too).
        let ids = payload_ids(&replay(&wal), &lens);
        assert!(ids.len() >= 20 * 30 * 2 / 3 - 60, "{}", ids.len());
        drop((wal, s));
        b(client.close()).unwrap();
    });
}

#[test]
fn truncation_drops_old_zones_only() {
    bounded(120, || {
        let rt = runtime(1);
        let client = b(Client::open(
            rt.handle(),
            "mem:zones=16,zone_size=64K",
            ziob::ZiobConfig::default(),
        ))
        .unwrap();
        let s = space(&client);
        let wal = b(Wal::open(&s, 0)).unwrap();
        let mut positions = Vec::new();
        for i in 0..100u64 {
            positions.push(b(wal.append(&payload(i, 3000), false)).unwrap());
        }
        let zones = wal.log().zones().len();
        assert!(zones >= 4, "{zones} zones");
        let cut = positions[70];
        b(wal.truncate_before(cut)).unwrap();
        assert!(wal.log().zones().len() < zones);
        assert!(wal.start() <= cut);
        let got = replay(&wal);
        let first = got.iter().position(|(p, _)| *p == cut).unwrap();
        assert_eq!(got.len() - first, 30);
        // Before the start is an error, not silently nothing.
        assert!(b(wal.replay_all(positions[0])).is_err());
        drop((wal, s));
        b(client.close()).unwrap();
    });
}

#[test]
fn an_oversized_payload_is_a_typed_error() {
    let rt = runtime(1);
    let client = b(Client::open(
        rt.handle(),
        "mem:zones=4,zone_size=64K",
        ziob::ZiobConfig::default(),
    ))
    .unwrap();
    let s = space(&client);
    let wal = b(Wal::open(&s, 0)).unwrap();
    let big = vec![0u8; wal.max_payload_bytes() as usize + 1];
    assert!(matches!(
        b(wal.append(&big, false)),
        Err(WalError::TooLarge { .. })
    ));
    // The largest payload is fine.
    b(wal.append(&big[1..], true)).unwrap();
    drop((wal, s));
    b(client.close()).unwrap();
}
