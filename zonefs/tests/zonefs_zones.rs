//! Zone use: files of one lifetime class share a zone and classes do not; deleting or
//! renaming over files resets every zone left without live data (on the device, too); the
//! active-zone limit the instance presents (buffer off) is never exceeded.

mod support;

use support::{b, bounded, end, formatted, open, runtime, EmuFile};
use ziob::ZoneState;
use ziob_zonefs::{FsError, MkfsOptions, WriteLifetime, ZoneFs, ZoneUse};

const ZONE_BYTES: u64 = 64 << 10;

fn zones_of(fs: &ZoneFs) -> Vec<(u32, ZoneUse, u64, u64)> {
    b(fs.zones())
}

/// Data zones holding live data.
fn live_zones(fs: &ZoneFs) -> Vec<u32> {
    zones_of(fs)
        .into_iter()
        .filter(|z| z.3 > 0)
        .map(|z| z.0)
        .collect()
}

#[test]
fn delete_and_rename_over_reset_zones_and_classes_are_apart() {
    for buffered in [true, false] {
        let file = EmuFile::create("reset", 32, ZONE_BYTES, None);
        let spec = file.spec();
        bounded(120, move || {
            let rt = runtime(2);
            let (client, fs) = formatted(&rt, &spec, buffered);
            // Two WAL files and two long-lived files, interleaved, each over several zones.
            let names = ["wal1", "wal2", "sst1", "sst2"];
            let lts = [
                WriteLifetime::Wal,
                WriteLifetime::Wal,
                WriteLifetime::Long,
                WriteLifetime::Long,
            ];
            for (n, lt) in names.iter().zip(lts) {
                b(fs.create(n, lt)).unwrap();
            }
            let chunk = vec![7u8; 20_000];
            for _ in 0..5 {
                for n in names {
                    b(fs.append(n, &chunk)).unwrap();
                }
            }
            for n in names {
                b(fs.sync(n)).unwrap();
            }
            let df = b(fs.df());
            assert_eq!(df.used_bytes, 4 * 100_000);
            let amp = df.space_amplification();
            assert!((1.0..2.0).contains(&amp), "space amplification {amp}");
            assert_eq!(
                df.free_bytes + df.used_bytes + df.reclaimable_bytes,
                df.total_bytes,
                "{df:?}"
            );
            let before = live_zones(&fs);
            assert!(before.len() >= 8, "{before:?}");
            // Delete both WAL files: every zone they used is reset, on the device too.
            b(fs.delete("wal1")).unwrap();
            b(fs.delete("wal2")).unwrap();
            let after = live_zones(&fs);
            assert!(after.len() < before.len());
            let report = b(client.report(0, 32)).unwrap();
            for (z, usage, written, live) in zones_of(&fs) {
                if live == 0 {
                    assert_eq!(usage, ZoneUse::Free, "zone {z}");
                    assert_eq!(written, 0);
                    assert_eq!(
                        report[z as usize].state,
                        ZoneState::Empty,
                        "zone {z} on the device"
                    );
                }
            }
            // The SST zones were untouched: they hold exactly the SST data.
            let sst_live: u64 = zones_of(&fs).iter().map(|z| z.3).sum();
            assert_eq!(sst_live, 200_000);
            // Rename over: sst1 replaces sst2; sst2's zones that held only its data are reset.
            b(fs.rename("sst1", "sst2")).unwrap();
            assert_eq!(b(fs.df()).used_bytes, 100_000);
            assert!(!b(fs.exists("sst1")).unwrap());
            assert_eq!(b(fs.read_at("sst2", 0, 200_000)).unwrap().len(), 100_000);
            b(fs.delete("sst2")).unwrap();
            assert!(live_zones(&fs).is_empty());
            let report = b(client.report(2, 30)).unwrap();
            assert!(
                report.iter().all(|z| z.state == ZoneState::Empty),
                "every data zone empty after every file is gone: {report:?}"
            );
            let df = b(fs.df());
            assert_eq!((df.used_bytes, df.reclaimable_bytes), (0, 0));
            assert_eq!(df.free_zones, 30);
            assert_eq!(df.free_bytes, df.total_bytes);
            assert_eq!(df.space_amplification(), 1.0);
            drop(fs);
            end(client, false);
        });
    }
}

#[test]
fn classes_use_separate_zones() {
    let file = EmuFile::create("classes", 32, ZONE_BYTES, None);
    let spec = file.spec();
    bounded(120, move || {
        let rt = runtime(1);
        let (client, fs) = formatted(&rt, &spec, true);
        for lt in WriteLifetime::ALL {
            for i in 0..2 {
                let p = format!("{lt:?}/{i}");
                b(fs.create(&p, lt)).unwrap();
                b(fs.append(&p, b"data")).unwrap();
            }
        }
        // One open zone per class (7), each holding that class's two files.
        let open: Vec<_> = zones_of(&fs)
            .into_iter()
            .filter(|z| matches!(z.1, ZoneUse::Open(_)))
            .collect();
        assert_eq!(open.len(), 7, "{open:?}");
        assert!(open.iter().all(|z| z.3 == 8), "{open:?}");
        drop(fs);
        end(client, false);
    });
}

#[test]
fn active_zone_limit_is_kept_without_the_buffer() {
    // Written with the buffer first (more class slots than the limit leaves without it),
    // too: the remount without it takes back at most its own slots' zones.
    for (limit, first_buffered) in [(2u32, false), (3, false), (5, false), (5, true)] {
        let file = EmuFile::create("limit", 40, ZONE_BYTES, Some(limit));
        let spec = file.spec();
        bounded(120, move || {
            let rt = runtime(2);
            let (client, fs) = formatted(&rt, &spec, first_buffered);
            let active = |client: &ziob::Client| {
                b(client.report(0, 40))
                    .unwrap()
                    .iter()
                    .filter(|z| z.state.is_active())
                    .count() as u32
            };
            for round in 0..6 {
                for lt in WriteLifetime::ALL {
                    let p = format!("{lt:?}/{round}");
                    b(fs.create(&p, lt)).unwrap();
                    b(fs.append(&p, &vec![round as u8; 9000])).unwrap();
                    b(fs.sync(&p)).unwrap();
                    let n = active(&client);
                    assert!(first_buffered || n <= limit, "{n} active zones > {limit}");
                    if round % 2 == 1 {
                        b(fs.delete(&format!("{lt:?}/{}", round - 1))).unwrap();
                    }
                }
            }
            drop(fs);
            end(client, false);
            // And after a remount.
            let client = open(&rt, &spec, false);
            let fs = b(ZoneFs::mount(client.clone())).unwrap();
            assert!(active(&client) <= limit);
            for lt in WriteLifetime::ALL {
                let p = format!("{lt:?}/5");
                assert_eq!(
                    b(fs.read_at(&p, 0, 10_000)).unwrap()[..],
                    vec![5u8; 9000][..]
                );
            }
            // Appends after the remount (to the zones it took back, and new ones) keep
            // the limit too.
            for lt in WriteLifetime::ALL {
                let p = format!("{lt:?}/after");
                b(fs.create(&p, lt)).unwrap();
                b(fs.append(&p, &vec![7u8; 9000])).unwrap();
                b(fs.sync(&p)).unwrap();
                let n = active(&client);
                assert!(n <= limit, "after the remount: {n} active zones > {limit}");
            }
            assert!(b(fs.fsck()).unwrap().is_clean());
            drop(fs);
            end(client, false);
        });
    }
}

#[test]
fn a_limit_of_one_active_zone_is_a_config_error() {
    let file = EmuFile::create("limit1", 8, ZONE_BYTES, Some(1));
    let spec = file.spec();
    bounded(60, move || {
        let rt = runtime(1);
        let client = open(&rt, &spec, false);
        let r = b(ZoneFs::mkfs(&client, MkfsOptions::default()));
        assert!(matches!(r, Err(FsError::Config(_))), "{r:?}");
        end(client, false);
    });
}

/// A class placed on a core opens only zones that core owns while one is free, buffer on
/// and off; moved to another core, its next zones are that core's; a class left alone takes
/// the lowest free zones (here the other core's, between the placed class's).
#[test]
fn a_class_placed_on_a_core_takes_that_cores_zones() {
    for buffered in [true, false] {
        let file = EmuFile::create("placed", 32, ZONE_BYTES, None);
        let spec = file.spec();
        bounded(120, move || {
            let rt = runtime(2);
            let (client, fs) = formatted(&rt, &spec, buffered);
            let owner = |z: u32| client.owner_core(z);
            fs.place_class_on_core(WriteLifetime::Long, Some(1));
            b(fs.create("long", WriteLifetime::Long)).unwrap();
            b(fs.create("short", WriteLifetime::Short)).unwrap();
            let chunk = vec![7u8; 30_000];
            let mut short_zones = std::collections::BTreeSet::new();
            for _ in 0..8 {
                b(fs.append("long", &chunk)).unwrap();
                b(fs.append("short", &chunk)).unwrap();
                for (z, usage, _, _) in zones_of(&fs) {
                    if let ZoneUse::Open(slot) = usage {
                        let long = slot == fs.slot_of(WriteLifetime::Long);
                        if long {
                            assert_eq!(owner(z), 1, "zone {z} of the class placed on core 1");
                        } else {
                            short_zones.insert(z);
                        }
                    }
                }
            }
            // Left alone, the other class took the lowest free zones: the ones between.
            let first_data = zones_of(&fs)[0].0;
            let expected: std::collections::BTreeSet<u32> = (0..short_zones.len() as u32)
                .map(|i| first_data + first_data % 2 + 2 * i)
                .collect();
            assert_eq!(short_zones, expected);
            let open_long = || {
                zones_of(&fs).into_iter().find_map(|(z, u, _, _)| {
                    (u == ZoneUse::Open(fs.slot_of(WriteLifetime::Long))).then_some(z)
                })
            };
            // The zone open at the move is kept; the ones after are core 0's.
            let kept = open_long();
            fs.place_class_on_core(WriteLifetime::Long, Some(0));
            let mut after = std::collections::BTreeSet::new();
            for _ in 0..6 {
                b(fs.append("long", &chunk)).unwrap();
                after.extend(open_long().filter(|&z| Some(z) != kept));
            }
            assert!(!after.is_empty());
            assert!(
                after.iter().all(|&z| owner(z) == 0),
                "after the move: {after:?}"
            );
            b(fs.sync("long")).unwrap();
            end(client, false);
        });
    }
}

/// A remount goes on appending to the zone each class left partly written (instead of
/// finishing it and giving up the rest of its capacity): after a clean close or a crash,
/// with the buffer on and off; what was not synced before a crash is dead space there, and
/// every synced byte reads back, also after a further remount.
#[test]
fn a_remount_appends_to_the_zone_each_class_left_partly_written() {
    for (buffered, crash) in [(true, false), (true, true), (false, false), (false, true)] {
        let file = EmuFile::create("adopt", 32, ZONE_BYTES, None);
        let spec = file.spec();
        bounded(120, move || {
            let rt = runtime(1);
            let (client, fs) = formatted(&rt, &spec, buffered);
            let a: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
            let w = vec![3u8; 5_000];
            b(fs.create("a", WriteLifetime::Long)).unwrap();
            b(fs.append("a", &a)).unwrap();
            b(fs.sync("a")).unwrap();
            b(fs.create("w", WriteLifetime::Wal)).unwrap();
            b(fs.append("w", &w)).unwrap();
            b(fs.sync("w")).unwrap();
            if crash {
                b(fs.create("lost", WriteLifetime::Long)).unwrap();
                b(fs.append("lost", &[9u8; 3_000])).unwrap();
            }
            let zone_of = |fs: &ZoneFs, live: u64| {
                zones_of(fs)
                    .into_iter()
                    .find(|z| z.3 == live)
                    .map(|z| z.0)
                    .expect("a zone with that many live bytes")
            };
            // (Unsynced bytes are live until the crash: "lost" shares a's zone.)
            let za = zone_of(&fs, if crash { 13_000 } else { 10_000 });
            let zw = zone_of(&fs, 5_000);
            drop(fs);
            end(client, crash);

            let client = open(&rt, &spec, buffered);
            let fs = b(ZoneFs::mount(client.clone())).unwrap();
            for z in [za, zw] {
                let (_, usage, written, _) =
                    zones_of(&fs)[z as usize - zones_of(&fs)[0].0 as usize];
                assert!(
                    matches!(usage, ZoneUse::Open(_)) && written < ZONE_BYTES,
                    "buffered {buffered} crash {crash}: zone {z} not adopted: {usage:?}, {written} written"
                );
            }
            let df = b(fs.df());
            assert!(
                df.reclaimable_bytes < ZONE_BYTES / 4,
                "buffered {buffered} crash {crash}: the zones' rest given up: {df:?}"
            );
            let more = vec![5u8; 10_000];
            b(fs.create("b", WriteLifetime::Long)).unwrap();
            b(fs.append("b", &more)).unwrap();
            b(fs.sync("b")).unwrap();
            assert_eq!(zone_of(&fs, 20_000), za, "b went to a's zone");
            assert!(b(fs.fsck()).unwrap().is_clean());
            drop(fs);
            end(client, false);

            let client = open(&rt, &spec, buffered);
            let fs = b(ZoneFs::mount(client.clone())).unwrap();
            assert_eq!(b(fs.read_at("a", 0, 20_000)).unwrap(), a);
            assert_eq!(b(fs.read_at("b", 0, 20_000)).unwrap(), more);
            assert_eq!(b(fs.read_at("w", 0, 20_000)).unwrap(), w);
            if crash {
                // Its creation was journaled; its bytes were never synced.
                assert!(b(fs.read_at("lost", 0, 20_000)).unwrap().is_empty());
            }
            assert!(b(fs.fsck()).unwrap().is_clean());
            drop(fs);
            end(client, false);
        });
    }
}

/// Where the free zones after a mount would be below GC's threshold, no zone is taken back
/// (GC moves data out of closed zones only): every partly written zone is finished.
#[test]
fn a_nearly_full_device_takes_back_no_zone_at_mount() {
    let file = EmuFile::create("adopt-full", 10, ZONE_BYTES, None);
    let spec = file.spec();
    bounded(120, move || {
        let rt = runtime(1);
        let (client, fs) = formatted(&rt, &spec, true);
        for lt in WriteLifetime::ALL {
            let p = format!("{lt:?}");
            b(fs.create(&p, lt)).unwrap();
            b(fs.append(&p, &[1u8; 5000])).unwrap();
            b(fs.sync(&p)).unwrap();
        }
        let df = b(fs.df());
        assert!(df.free_zones * 5 < df.data_zones, "{df:?}");
        drop(fs);
        end(client, false);
        let client = open(&rt, &spec, true);
        let fs = b(ZoneFs::mount(client.clone())).unwrap();
        let open_zones: Vec<_> = zones_of(&fs)
            .into_iter()
            .filter(|z| matches!(z.1, ZoneUse::Open(_)))
            .collect();
        assert!(open_zones.is_empty(), "taken back: {open_zones:?}");
        for lt in WriteLifetime::ALL {
            assert_eq!(
                b(fs.read_at(&format!("{lt:?}"), 0, 9000)).unwrap(),
                vec![1u8; 5000]
            );
        }
        drop(fs);
        end(client, false);
    });
}
