//! The metadata journal: rollover across small reserved zones under many metadata operations
//! (with remounts and crashes in between), and the typed errors for devices that hold no file
//! system, something else, or a damaged one — never a silent reformat.

mod support;

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use support::{b, bounded, end, formatted, open, runtime, EmuFile};
use ziob::backends::mem::{Fault, MemDevice};
use ziob::backends::AnyDevice;
use ziob::zonelog::{LogSpace, LogSpaceOptions};
use ziob::{Client, Geometry, ZiobConfig};
use ziob_zonefs::{FsError, MkfsOptions, WriteLifetime, ZoneFs};

const ZONES: u32 = 16;
const ZONE_BYTES: u64 = 32 << 10;

#[test]
fn journal_rolls_over_small_reserved_zones() {
    for (journal_zones, buffered) in [(2, true), (3, false), (4, true)] {
        // Many data zones: every sync pads a block (GC is not what this test is about).
        let file = EmuFile::create("roll", 128, ZONE_BYTES, None);
        let spec = file.spec();
        bounded(180, move || {
            let rt = runtime(2);
            let mut client = open(&rt, &spec, buffered);
            b(ZoneFs::mkfs(
                &client,
                MkfsOptions {
                    journal_zones,
                    force: false,
                    ..MkfsOptions::default()
                },
            ))
            .unwrap();
            let mut fs = b(ZoneFs::mount(client.clone())).unwrap();
            // Each delta takes a block (it is flushed on its own); a 32 KiB zone holds 7.
            let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
            for i in 0..300u32 {
                let p = format!("dir{}/f{}", i % 3, i % 17);
                if model.contains_key(&p) {
                    if i % 2 == 0 {
                        b(fs.delete(&p)).unwrap();
                        model.remove(&p);
                    } else {
                        let q = format!("dir{}/r{}", i % 5, i % 7);
                        b(fs.rename(&p, &q)).unwrap();
                        let v = model.remove(&p).unwrap();
                        model.insert(q, v);
                    }
                } else {
                    b(fs.create(&p, WriteLifetime::Short)).unwrap();
                    let data = i.to_le_bytes().repeat(1 + i as usize % 5);
                    b(fs.append(&p, &data)).unwrap();
                    b(fs.sync(&p)).unwrap();
                    model.insert(p, data);
                }
                if i % 97 == 96 {
                    // Every third of the way, a crash: metadata is durable as it returned.
                    drop(fs);
                    end(client, i % 2 == 0);
                    client = open(&rt, &spec, buffered);
                    fs = b(ZoneFs::mount(client.clone())).unwrap();
                }
            }
            drop(fs);
            end(client, true);
            let client = open(&rt, &spec, buffered);
            let fs = b(ZoneFs::mount(client.clone())).unwrap();
            let rep = fs.mount_report().clone();
            assert!(
                rep.generation > 40,
                "the journal rolled many times: {rep:?}"
            );
            assert!(rep.journal_zone < journal_zones);
            for (p, data) in &model {
                assert_eq!(&b(fs.read_at(p, 0, 1000)).unwrap()[..], &data[..], "{p}");
            }
            let mut all = Vec::new();
            for d in b(fs.list("")).unwrap() {
                for f in b(fs.list(&d)).unwrap() {
                    all.push(format!("{d}/{f}"));
                }
            }
            all.sort();
            assert_eq!(all, model.keys().cloned().collect::<Vec<_>>());
            drop(fs);
            end(client, false);
        });
    }
}

#[test]
fn empty_foreign_and_formatted_devices() {
    let file = EmuFile::create("foreign", ZONES, ZONE_BYTES, None);
    let spec = file.spec();
    bounded(120, move || {
        let rt = runtime(1);
        // Empty: not formatted.
        let client = open(&rt, &spec, true);
        let r = b(ZoneFs::mount(client.clone()));
        assert!(matches!(r, Err(FsError::NotFormatted)), "{r:?}");
        // A zone log on it: foreign, for mount and mkfs alike.
        let space = b(LogSpace::open(client.clone(), LogSpaceOptions::default())).unwrap();
        let log = b(space.open_log("wal")).unwrap();
        b(log.append(b"record")).unwrap();
        b(log.sync()).unwrap();
        drop((log, space));
        let r = b(ZoneFs::mount(client.clone()));
        assert!(matches!(r, Err(FsError::Foreign { .. })), "{r:?}");
        let r = b(ZoneFs::mkfs(&client, MkfsOptions::default()));
        assert!(
            matches!(&r, Err(FsError::DeviceInUse { found }) if found.contains("data in zone")),
            "{r:?}"
        );
        // Forced: formatted; then a second mkfs finds the file system.
        b(ZoneFs::mkfs(
            &client,
            MkfsOptions {
                force: true,
                ..MkfsOptions::default()
            },
        ))
        .unwrap();
        let fs = b(ZoneFs::mount(client.clone())).unwrap();
        b(fs.create("x", WriteLifetime::NotSet)).unwrap();
        let r = b(ZoneFs::mkfs(&client, MkfsOptions::default()));
        assert!(
            matches!(&r, Err(FsError::DeviceInUse { found }) if found.contains("file system")),
            "{r:?}"
        );
        assert!(b(fs.exists("x")).unwrap(), "a refused mkfs changes nothing");
        let r = b(ZoneFs::mkfs(
            &client,
            MkfsOptions {
                journal_zones: 1,
                force: true,
                ..MkfsOptions::default()
            },
        ));
        assert!(matches!(r, Err(FsError::Config(_))), "{r:?}");
        drop(fs);
        end(client, false);
    });
}

#[test]
fn a_corrupt_newest_snapshot_is_an_error_not_a_fallback() {
    let file = EmuFile::create("corrupt", ZONES, ZONE_BYTES, None);
    let spec = file.spec();
    let spec2 = spec.clone();
    let current = bounded(60, move || {
        let rt = runtime(1);
        let (client, fs) = formatted(&rt, &spec, true);
        b(fs.create("kept", WriteLifetime::Long)).unwrap();
        drop(fs);
        end(client, false);
        // Remount: the journal rolls to a fresh zone holding a snapshot with "kept".
        let client = open(&rt, &spec, true);
        let fs = b(ZoneFs::mount(client.clone())).unwrap();
        let current = (fs.mount_report().journal_zone + 1) % 2;
        drop(fs);
        end(client, false);
        current
    });
    // Flip a byte inside the snapshot's payload (superblock record: 12 + 48 bytes, then the
    // snapshot frame's 12-byte header).
    let at = file.zone_offset(ZONES as u64, ZONE_BYTES, current as u64) + 60 + 12 + 3;
    file.poke(at, &[0xEE]);
    bounded(60, move || {
        let rt = runtime(1);
        let client = open(&rt, &spec2, true);
        let r = b(ZoneFs::mount(client.clone()));
        assert!(
            matches!(&r, Err(FsError::Corrupt { reason }) if reason.contains("snapshot")),
            "{r:?}"
        );
        end(client, false);
    });
}

/// A metadata call that finds the ZIOB instance closed under the file system fails with
/// `Closed`, and so does every call after it — a read included: a closed instance is not a
/// damaged journal (kv-demo maps `Closed` to its own `Closed` for reads that its close
/// overtook, and a table deleted as the store closes must not turn them into `Corrupt`).
#[test]
fn a_journal_write_on_a_closed_instance_is_closed_not_corrupt() {
    let file = EmuFile::create("closed-under", ZONES, ZONE_BYTES, None);
    let spec = file.spec();
    bounded(60, move || {
        let rt = runtime(2);
        let (client, fs) = formatted(&rt, &spec, true);
        for p in ["a", "b"] {
            b(fs.create(p, WriteLifetime::Short)).unwrap();
            b(fs.append(p, b"bytes")).unwrap();
            b(fs.sync(p)).unwrap();
        }
        b(client.close()).unwrap();
        let closed = |r: Result<_, FsError>, what: &str| match r {
            Err(FsError::Ziob(ziob::ZiobError::Closed)) => {}
            other => panic!("{what} on a closed instance: {other:?}"),
        };
        closed(b(fs.delete("a")).map(drop), "the delete");
        closed(b(fs.read_at("b", 0, 5)).map(drop), "a read after it");
        closed(b(fs.create("c", WriteLifetime::Short)), "a create after it");
    });
}

/// The other side of the test above: a journal write that the device fails (an injected
/// EIO) leaves the file system answering `Corrupt` ("remount"), not `Closed`.
#[test]
fn a_journal_write_the_device_fails_is_corrupt_not_closed() {
    bounded(60, || {
        let rt = runtime(2);
        let dev = MemDevice::new("mem:journal-eio", &Geometry::new(ZONES, ZONE_BYTES)).unwrap();
        let config = ZiobConfig {
            buffered: false,
            ..ZiobConfig::default()
        };
        let client = b(Client::with_device(
            rt.handle(),
            AnyDevice::Mem(dev.clone()),
            config,
        ))
        .unwrap();
        b(ZoneFs::mkfs(&client, MkfsOptions::default())).unwrap();
        let fs = b(ZoneFs::mount(client.clone())).unwrap();
        b(fs.create("a", WriteLifetime::Short)).unwrap();
        b(fs.append("a", b"bytes")).unwrap();
        b(fs.sync("a")).unwrap();
        // A reader opened before the failure fails after it as every read does.
        let reader = b(fs.open_reader("a")).unwrap();
        assert_eq!(&b(reader.read_at(0, 5)).unwrap()[..], b"bytes");
        // The next device op is the delete's journal append.
        dev.inject(Fault::FailOp {
            op_index: dev.op_count(),
        });
        let r = b(fs.delete("a"));
        assert!(
            matches!(r, Err(FsError::Ziob(_))),
            "the failed delete: {r:?}"
        );
        let r = b(fs.read_at("a", 0, 5));
        assert!(
            matches!(r, Err(FsError::Corrupt { .. })),
            "a read after it: {r:?}"
        );
        let r = b(reader.read_at(0, 5));
        assert!(
            matches!(r, Err(FsError::Corrupt { .. })),
            "a reader's read after it: {r:?}"
        );
        let mut out = [std::mem::MaybeUninit::uninit(); 5];
        let r = reader.read_now_into(0, &mut out);
        assert!(
            matches!(r, None | Some(Err(FsError::Corrupt { .. }))),
            "a reader's read at once after it: {r:?}"
        );
        drop(reader);
        drop(fs);
        b(client.close()).unwrap();
    });
}

/// Bytes the instance's shards have served to reads so far.
fn read_bytes(client: &Client) -> u64 {
    b(client.stats())
        .unwrap()
        .iter()
        .map(|s| s.read_bytes)
        .sum()
}

/// Every mount rolls the journal on and finishes the zone it leaves, whose write pointer is
/// then its capacity however little it holds. A mount reads only the records of such a zone
/// (it read each whole: 4 MiB of zeros here, 64 MiB on `emu`'s default geometry, at every
/// mount), and finds every file — whether the finished zone holds a block of records or
/// nearly a zone of them (seeded rounds of metadata operations, remounts and crashes).
#[test]
fn mounts_read_only_the_records_of_finished_journal_zones() {
    const ZONE: u64 = 4 << 20;
    let file = EmuFile::create("finished-journal", 24, ZONE, None);
    let spec = file.spec();
    bounded(300, move || {
        let rt = runtime(2);
        let mut client = open(&rt, &spec, true);
        b(ZoneFs::mkfs(&client, MkfsOptions::default())).unwrap();
        let mut fs = b(ZoneFs::mount(client.clone())).unwrap();
        let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        let mut rng = support::Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..8 {
            // Up to ~1,500 synced changes (a block of journal each): some rounds fill a
            // journal zone and roll on by themselves.
            let ops = if round == 0 { 0 } else { rng.next() % 1500 };
            for i in 0..ops {
                let p = format!("d{}/f{}", i % 7, rng.next() % 40);
                match model.entry(p) {
                    Entry::Occupied(e) => {
                        if rng.next().is_multiple_of(3) {
                            b(fs.delete(e.key())).unwrap();
                            e.remove();
                        }
                    }
                    Entry::Vacant(e) => {
                        b(fs.create(e.key(), WriteLifetime::Short)).unwrap();
                        let data = (round as u32 * 10_000 + i as u32).to_le_bytes().to_vec();
                        b(fs.append(e.key(), &data)).unwrap();
                        b(fs.sync(e.key())).unwrap();
                        e.insert(data);
                    }
                }
            }
            drop(fs);
            end(client, rng.next().is_multiple_of(2));
            client = open(&rt, &spec, true);
            let before = read_bytes(&client);
            fs = b(ZoneFs::mount(client.clone())).unwrap();
            let read = read_bytes(&client) - before;
            // The journal's two zones: never more than both whole; right after mkfs (one
            // finished zone holding two blocks, the current one a few) far less than one.
            assert!(
                read <= 2 * ZONE,
                "round {round}: the mount read {read} bytes"
            );
            if round == 0 {
                assert!(
                    read < ZONE / 2,
                    "the mount read {read} bytes of journal zones holding a few blocks"
                );
            }
            for (p, data) in &model {
                assert_eq!(
                    &b(fs.read_at(p, 0, 4)).unwrap()[..],
                    &data[..],
                    "round {round}: {p}"
                );
            }
            let mut all = Vec::new();
            for d in b(fs.list("")).unwrap() {
                for f in b(fs.list(&d)).unwrap() {
                    all.push(format!("{d}/{f}"));
                }
            }
            all.sort();
            assert_eq!(
                all,
                model.keys().cloned().collect::<Vec<_>>(),
                "round {round}"
            );
        }
        drop(fs);
        end(client, false);
    });
}
