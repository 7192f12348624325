//! Torn crashes, searched by seed: a power loss that keeps some of the device cache's writes
//! and loses others, zone by zone (`MemDevice::crash_keeping`, each zone a random prefix of
//! what it took since the last flush), after a device op that failed at a random point (a
//! planned `Fault::FailOp` — a data write-back, a journal write, a zone reset... — or a
//! `Fault::FailFlush`, aimed at the moment between a journal batch and its cache flush). In
//! half the rounds the device's zone commands persist only their zone's state
//! (`MemDevice::set_zone_actions_flush(false)`), so a finish can outlive the data before it.
//!
//! A sync writes its data zones back, journals its extents and flushes the device's cache
//! once for both, so such a crash can keep the journal's last batch and lose part of the
//! data it names. After every remount (read-only first, then read-write): `fsck` is clean,
//! every acknowledged create and delete holds, every file has at least its acknowledged
//! synced size and its content is a prefix of what was appended. The loop must have cut a
//! file at least once ([`ziob_zonefs::MountReport::files_cut`]; checked from 80 rounds on):
//! without the mount's cut, those rounds fail (`fsck` finds extents past the write pointer,
//! the read-write mount refuses). `ZONEFS_TORN_ROUNDS` sets the rounds (default 80).

mod support;

use std::collections::BTreeMap;

use support::{b, bounded, check_after_crash, content, runtime, Known, Rng};
use ziob::backends::{AnyDevice, Fault, MemDevice};
use ziob::{Client, Geometry, ZiobConfig};
use ziob_zonefs::{MkfsOptions, WriteLifetime, ZoneFs};

/// Zones of the device (2 journal zones, the rest data) and their size.
const ZONES: u32 = 24;
const ZONE_BYTES: u64 = 64 << 10;
/// Operations per crash at most; the planned fault is one of the first `FAULT_WINDOW` device
/// ops after the mount, or one of its first `FLUSH_WINDOW` cache flushes.
const OPS: u64 = 1500;
const FAULT_WINDOW: u64 = 500;
const FLUSH_WINDOW: u64 = 60;

/// Opens an instance over `mem` (buffered or not, on `cores` cores).
fn client_over(rt: &ziob::Runtime, mem: &MemDevice, buffered: bool) -> Client {
    let config = ZiobConfig {
        buffered,
        ..ZiobConfig::default()
    };
    b(Client::with_device(
        rt.handle(),
        AnyDevice::Mem(mem.clone()),
        config,
    ))
    .unwrap()
}

/// Random operations until one fails (the planned fault) or `OPS` ran.
fn work(fs: &ZoneFs, rng: &mut Rng, known: &mut BTreeMap<String, Known>) {
    const LIFETIMES: [WriteLifetime; 4] = [
        WriteLifetime::Wal,
        WriteLifetime::Short,
        WriteLifetime::Medium,
        WriteLifetime::Long,
    ];
    let total = b(fs.df()).total_bytes;
    for i in 0..OPS {
        let name = format!("f{}", rng.next() % 8);
        let live = known.get(&name).is_some_and(|k| k.deleted.is_none());
        let full = b(fs.df()).used_bytes > total / 2;
        let res = if !live {
            known.insert(name.clone(), Known::default());
            let lt = LIFETIMES[(rng.next() % 4) as usize];
            let r = if i % 3 == 0 {
                b(fs.create_unsynced(&name, lt))
            } else {
                b(fs.create(&name, lt))
            };
            // An unsynced create is durable only with a later commit: not acknowledged.
            if r.is_ok() && i % 3 != 0 {
                known.get_mut(&name).unwrap().created = true;
            }
            r
        } else {
            match if full { 0 } else { rng.next() % 11 } {
                0 => {
                    known.get_mut(&name).unwrap().deleted = Some(false);
                    let r = b(fs.delete(&name));
                    if r.is_ok() {
                        known.get_mut(&name).unwrap().deleted = Some(true);
                    }
                    r
                }
                1..=3 => {
                    let size = known[&name].appended;
                    let r = b(fs.sync(&name));
                    if r.is_ok() {
                        // A sync makes the create durable too.
                        let k = known.get_mut(&name).unwrap();
                        k.synced = size;
                        k.created = true;
                    }
                    r
                }
                4 => {
                    let sizes: Vec<(String, u64)> = known
                        .iter()
                        .filter(|(_, k)| k.deleted.is_none())
                        .map(|(n, k)| (n.clone(), k.appended))
                        .collect();
                    let r = b(fs.sync_all());
                    if r.is_ok() {
                        for (n, size) in sizes {
                            let k = known.get_mut(&n).unwrap();
                            k.synced = size;
                            k.created = true;
                        }
                    }
                    r
                }
                5 | 6 => {
                    // A sync racing a large append to another file: zones fill and are
                    // finished while the sync's batch waits for its cache flush.
                    let others: Vec<String> = known
                        .iter()
                        .filter(|(n, k)| **n != name && k.deleted.is_none())
                        .map(|(n, _)| n.clone())
                        .collect();
                    if others.is_empty() {
                        continue;
                    }
                    let other = others[(rng.next() % others.len() as u64) as usize].clone();
                    let size = known[&name].appended;
                    let len = 1 + rng.next() % 48_000;
                    let k = known.get_mut(&other).unwrap();
                    k.appended += len;
                    let data = content(&other, k.appended - len, len);
                    let (synced, appended) = b(futures::future::join(
                        fs.sync(&name),
                        fs.append(&other, &data),
                    ));
                    if synced.is_ok() {
                        let k = known.get_mut(&name).unwrap();
                        k.synced = size;
                        k.created = true;
                    }
                    synced.and(appended)
                }
                _ => {
                    let len = 1 + rng.next() % 12_000;
                    let k = known.get_mut(&name).unwrap();
                    k.appended += len;
                    let from = k.appended - len;
                    b(fs.append(&name, &content(&name, from, len)))
                }
            }
        };
        if res.is_err() {
            return;
        }
    }
}

#[test]
fn torn_crashes_keep_synced_data_and_cut_only_the_last_batch() {
    let rounds: u64 = std::env::var("ZONEFS_TORN_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(80);
    bounded(60 + rounds * 10, move || {
        let mut g = Geometry::new(ZONES, ZONE_BYTES);
        g.max_active_zones = Some(12);
        g.max_open_zones = Some(12);
        let (mut files_cut, mut bytes_cut) = (0usize, 0u64);
        for round in 0..rounds {
            let mut rng = Rng(round * 0x9E37_79B9 + 17);
            let buffered = round % 2 == 0;
            let rt = runtime(1 + (round / 2 % 2) as usize);
            let mem = MemDevice::new("mem:torn", &g).unwrap();
            // In alternate blocks of four rounds, zone commands (finish, reset) persist only
            // their zone's state: a finish may then outlive the writes before it.
            mem.set_zone_actions_flush(round / 4 % 2 == 0);
            let client = client_over(&rt, &mem, buffered);
            b(ZoneFs::mkfs(&client, MkfsOptions::default())).unwrap();
            let mut known = BTreeMap::new();
            // Two faults per round: two crashes and remounts on one device.
            for crash in 0..2 {
                let client = if crash == 0 {
                    client.clone()
                } else {
                    client_over(&rt, &mem, buffered)
                };
                let fs = b(ZoneFs::mount(client.clone())).unwrap();
                // Any op, or (aimed at the moment between a batch and its flush) a flush.
                mem.inject(if rng.next().is_multiple_of(2) {
                    Fault::FailOp {
                        op_index: mem.op_count() + rng.next() % FAULT_WINDOW,
                    }
                } else {
                    Fault::FailFlush {
                        flush_index: mem.flush_count() + rng.next() % FLUSH_WINDOW,
                    }
                });
                work(&fs, &mut rng, &mut known);
                drop(fs);
                b(client.with_ziob(|z| async move { z.abandon().await })).unwrap();
                mem.clear_faults();
                // Each zone keeps a random number of its new blocks.
                let bs = g.block_size_bytes;
                mem.crash_keeping(|_, durable, written| {
                    durable + bs * (rng.next() % ((written - durable) / bs + 1))
                });
                let client = client_over(&rt, &mem, buffered);
                let ro = b(ZoneFs::mount_read_only(client.clone()))
                    .unwrap_or_else(|e| panic!("round {round}.{crash}: read-only mount: {e}"));
                let rep = b(ro.fsck()).unwrap();
                assert!(rep.is_clean(), "round {round}.{crash}: {:#?}", rep.problems);
                for c in &ro.mount_report().files_cut {
                    assert!(c.kept < c.journaled, "{c:?}");
                    files_cut += 1;
                    bytes_cut += c.journaled - c.kept;
                }
                let cutting = !ro.mount_report().files_cut.is_empty();
                drop(ro);
                let mut client = client;
                if cutting || rng.next().is_multiple_of(3) {
                    // The read-write mount fails part-way (a fault among its first ops: a
                    // reset, a finish, the journal roll) and the power goes again: the next
                    // mount must find what this one would have (files cut, nothing else).
                    // Always when it is to cut files, where the order of its steps matters.
                    mem.inject(Fault::FailOp {
                        op_index: mem.op_count() + rng.next() % 24,
                    });
                    drop(b(ZoneFs::mount(client.clone())));
                    b(client.with_ziob(|z| async move { z.abandon().await })).unwrap();
                    mem.clear_faults();
                    mem.crash_keeping(|_, durable, written| {
                        durable + bs * (rng.next() % ((written - durable) / bs + 1))
                    });
                    client = client_over(&rt, &mem, buffered);
                }
                let fs = b(ZoneFs::mount(client.clone()))
                    .unwrap_or_else(|e| panic!("round {round}.{crash}: mount: {e}"));
                let rep = b(fs.fsck()).unwrap();
                assert!(rep.is_clean(), "round {round}.{crash}: {:#?}", rep.problems);
                check_after_crash(&fs, &mut known, &format!("round {round}.{crash}"));
                drop(fs);
                b(client.close()).unwrap();
            }
        }
        eprintln!("{rounds} rounds: {files_cut} files cut by {bytes_cut} bytes in all");
        // 80 rounds cut about 8 files (the read-only mount's count); fewer rounds may cut
        // none by chance.
        assert!(
            files_cut > 0 || rounds < 80,
            "no round cut a file: the search never hit a crash between a batch and its flush"
        );
    });
}
