//! A file system over the first zones of a device (`MkfsOptions::zone_count`): a
//! `ziob::zonelog::LogSpace` on the zones past it keeps its records through zonefs mkfs
//! (also forced), mount, an overwrite run with garbage collection, remounts and fsck; every
//! zone zonefs uses lies below its zone count. Bad ranges are typed errors. And the
//! active-zone budget: with the buffer off on a device with an active-zone limit, the zones
//! zonefs leaves to others (`reserved_active_zones`, recorded by mkfs) let the space's logs
//! and every lifetime class write at once; without the reservation they do not fit.

mod support;

use std::collections::VecDeque;

use support::{b, bounded, end, open, runtime, EmuFile, Rng};
use ziob::zonelog::{LogSpace, LogSpaceOptions, Position};
use ziob::Client;
use ziob_zonefs::{FsError, MkfsOptions, WriteLifetime, ZoneFs};

const ZONES: u32 = 28;
const ZONE_BYTES: u64 = 64 << 10;
/// The file system's zones: `0..FS_ZONES`; the log space has `FS_ZONES..ZONES`.
const FS_ZONES: u32 = 16;

fn ranged(force: bool) -> MkfsOptions {
    MkfsOptions {
        force,
        zone_count: Some(FS_ZONES),
        ..MkfsOptions::default()
    }
}

fn space(client: &Client) -> LogSpace {
    b(LogSpace::open(
        client.clone(),
        LogSpaceOptions {
            zones: FS_ZONES..ZONES,
            ..LogSpaceOptions::default()
        },
    ))
    .unwrap()
}

fn record(log: usize, i: usize) -> Vec<u8> {
    let n = 100 + (i * 37 + log * 11) % 3000;
    (0..n)
        .map(|k| (k as u8) ^ (i as u8) ^ (log as u8 * 7))
        .collect()
}

/// Appends `count` records to `wal-<log>` for each of `logs` logs (several zones each), synced.
fn fill_logs(space: &LogSpace, logs: usize, count: usize) -> Vec<Position> {
    let mut starts = Vec::new();
    for l in 0..logs {
        let log = b(space.open_log(&format!("wal-{l}"))).unwrap();
        starts.push(log.start());
        for i in 0..count {
            b(log.append(&record(l, i))).unwrap();
        }
        b(log.sync()).unwrap();
    }
    starts
}

/// Reads every log back and compares it with what `fill_logs` wrote; no zone of the space
/// was found foreign, cut or reset.
fn check_logs(space: &LogSpace, logs: usize, count: usize) {
    let rec = space.recovery();
    assert!(rec.unknown_zones.is_empty(), "{rec:?}");
    assert!(rec.reset_zones.is_empty(), "{rec:?}");
    assert_eq!(rec.dropped_bytes, 0, "{rec:?}");
    for l in 0..logs {
        let log = b(space.open_log(&format!("wal-{l}"))).unwrap();
        let got = b(log.read_from(log.start(), count + 1)).unwrap();
        assert_eq!(got.len(), count, "log {l}");
        for (i, (_, r)) in got.iter().enumerate() {
            assert_eq!(&r[..], &record(l, i)[..], "log {l} record {i}");
        }
        for z in log.zones() {
            assert!((FS_ZONES..ZONES).contains(&z), "log zone {z}");
        }
    }
}

/// Every zone zonefs tracks is below its zone count.
fn check_fs_zones(fs: &ZoneFs) {
    assert_eq!(fs.zone_count(), FS_ZONES);
    let zones = b(fs.zones());
    assert_eq!(zones.len() as u32, FS_ZONES - 2, "data zones 2..{FS_ZONES}");
    for (z, _, _, _) in zones {
        assert!(z < FS_ZONES, "zonefs zone {z}");
    }
    let fsck = b(fs.fsck()).unwrap();
    assert!(fsck.is_clean(), "{:?}", fsck.problems);
    assert!(fsck.zones.iter().all(|c| c.zone < FS_ZONES));
    let df = b(fs.df());
    assert_eq!(df.total_bytes, (FS_ZONES - 2) as u64 * ZONE_BYTES);
}

fn content(n: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|o| (n.wrapping_mul(131) ^ (o % 253)) as u8)
        .collect()
}

/// Creates, fills, syncs and deletes files until `target` bytes are written (several times
/// the file system's size: garbage collection must run); the live files read back.
fn overwrite(fs: &ZoneFs, seed: u64, target: u64) {
    let mut rng = Rng(seed);
    let mut live: VecDeque<(u64, usize)> = VecDeque::new();
    let (mut written, mut n) = (0u64, 0u64);
    while written < target {
        let size = 2000 + (rng.next() % 24_000) as usize;
        let name = format!("f/{n}");
        let class = WriteLifetime::ALL[2 + (rng.next() % 3) as usize];
        b(fs.create(&name, class)).unwrap();
        let data = content(n, size);
        for piece in data.chunks(7000) {
            b(fs.append(&name, piece)).unwrap();
        }
        b(fs.sync(&name)).unwrap();
        written += size as u64;
        live.push_back((n, size));
        n += 1;
        while live.len() > 6 {
            let i = (rng.next() % live.len() as u64) as usize;
            let (victim, _) = live.remove(i).unwrap();
            b(fs.delete(&format!("f/{victim}"))).unwrap();
        }
    }
    for (f, size) in &live {
        let got = b(fs.read_at(&format!("f/{f}"), 0, *size)).unwrap();
        assert!(got[..] == content(*f, *size)[..], "file {f}");
    }
}

#[test]
fn a_log_space_past_the_file_system_survives_mkfs_mount_gc_and_fsck() {
    for buffered in [true, false] {
        let file = EmuFile::create("range", ZONES, ZONE_BYTES, None);
        let spec = file.spec();
        bounded(300, move || {
            let rt = runtime(2);
            let client = open(&rt, &spec, buffered);
            // The logs first: zonefs mkfs must neither refuse nor erase them.
            let logs = space(&client);
            fill_logs(&logs, 3, 40);
            drop(logs);
            b(ZoneFs::mkfs(&client, ranged(false))).unwrap();
            // A forced mkfs erases only the file system's zones too.
            b(ZoneFs::mkfs(&client, ranged(true))).unwrap();
            let fs = b(ZoneFs::mount(client.clone())).unwrap();
            check_fs_zones(&fs);
            // Several times the file system's data zones: garbage collection runs.
            overwrite(&fs, 7, 5 * (FS_ZONES as u64 - 2) * ZONE_BYTES);
            b(fs.gc(4)).unwrap();
            assert!(b(fs.stats()).gc_zones > 0, "{:?}", b(fs.stats()));
            check_fs_zones(&fs);
            b(fs.sync_all()).unwrap();
            drop(fs);
            end(client, false);

            // Reopen both: the logs are intact, the file system is clean.
            let client = open(&rt, &spec, buffered);
            let fs = b(ZoneFs::mount(client.clone())).unwrap();
            assert!(fs.mount_report().zones_reset.iter().all(|&z| z < FS_ZONES));
            check_fs_zones(&fs);
            let ro = b(ZoneFs::mount_read_only(client.clone())).unwrap();
            assert!(b(ro.fsck()).unwrap().is_clean());
            drop(ro);
            let logs = space(&client);
            check_logs(&logs, 3, 40);
            // And the logs go on next to the file system.
            let wal = b(logs.open_log("wal-0")).unwrap();
            b(wal.append(b"more")).unwrap();
            b(wal.sync()).unwrap();
            overwrite(&fs, 8, 2 * (FS_ZONES as u64 - 2) * ZONE_BYTES);
            check_fs_zones(&fs);
            drop((fs, wal, logs));
            end(client, false);
        });
    }
}

#[test]
fn the_whole_device_stays_the_default() {
    let rt = runtime(1);
    let client = b(Client::open(
        rt.handle(),
        "mem:zones=10,zone_size=64K",
        ziob::ZiobConfig::default(),
    ))
    .unwrap();
    b(ZoneFs::mkfs(&client, MkfsOptions::default())).unwrap();
    let fs = b(ZoneFs::mount(client.clone())).unwrap();
    assert_eq!(fs.zone_count(), 10);
    assert_eq!(b(fs.zones()).len(), 8);
    drop(fs);
    b(client.close()).unwrap();
}

#[test]
fn bad_ranges_are_typed_errors() {
    let rt = runtime(1);
    let client = b(Client::open(
        rt.handle(),
        "mem:zones=10,zone_size=64K",
        ziob::ZiobConfig::default(),
    ))
    .unwrap();
    for (zone_count, journal_zones) in [(11, 2), (2, 2), (4, 4), (0, 2)] {
        let r = b(ZoneFs::mkfs(
            &client,
            MkfsOptions {
                zone_count: Some(zone_count),
                journal_zones,
                ..MkfsOptions::default()
            },
        ));
        assert!(matches!(r, Err(FsError::Config(_))), "{zone_count}: {r:?}");
    }
    let r = b(ZoneFs::mkfs(
        &client,
        MkfsOptions {
            reserved_active_zones: 70_000,
            ..MkfsOptions::default()
        },
    ));
    assert!(matches!(r, Err(FsError::Config(_))), "{r:?}");
    // The smallest range: the journal and one data zone.
    b(ZoneFs::mkfs(
        &client,
        MkfsOptions {
            zone_count: Some(3),
            ..MkfsOptions::default()
        },
    ))
    .unwrap();
    let fs = b(ZoneFs::mount(client.clone())).unwrap();
    assert_eq!(b(fs.zones()).len(), 1);
    drop(fs);
    b(client.close()).unwrap();
}

/// Zonefs writes a file in every lifetime class while 2 zone logs of a space past it append
/// across zones, buffer off, on a device allowing `MAX_ACTIVE` active zones.
const MAX_ACTIVE: u32 = 6;

fn budget_run(reserved: u32) -> Result<usize, String> {
    let rt = runtime(1);
    let spec = format!("mem:zones={ZONES},zone_size=64K,max_active={MAX_ACTIVE}");
    let client = crate::support::open(&rt, &spec, false);
    b(ZoneFs::mkfs(
        &client,
        MkfsOptions {
            zone_count: Some(FS_ZONES),
            reserved_active_zones: reserved,
            ..MkfsOptions::default()
        },
    ))
    .map_err(|e| e.to_string())?;
    let fs = b(ZoneFs::mount(client.clone())).map_err(|e| e.to_string())?;
    let most = fs.max_active_zones();
    let logs = space(&client);
    let wal = b(logs.open_log("wal-0")).map_err(|e| e.to_string())?;
    let manifest = b(logs.open_log("manifest-0")).map_err(|e| e.to_string())?;
    let result = (|| {
        for round in 0..3u64 {
            for (i, class) in WriteLifetime::ALL.iter().enumerate() {
                let name = format!("{round}/{i}");
                b(fs.create(&name, *class)).map_err(|e| e.to_string())?;
                b(fs.append(&name, &content(i as u64, 12_000))).map_err(|e| e.to_string())?;
                b(fs.sync(&name)).map_err(|e| e.to_string())?;
            }
            for log in [&wal, &manifest] {
                for k in 0..8 {
                    b(log.append(&record(round as usize, k * 3))).map_err(|e| e.to_string())?;
                }
                b(log.sync()).map_err(|e| e.to_string())?;
            }
        }
        let fsck = b(fs.fsck()).map_err(|e| e.to_string())?;
        assert!(fsck.is_clean(), "{:?}", fsck.problems);
        Ok(most)
    })();
    drop((fs, wal, manifest, logs));
    let _ = b(client.close());
    result
}

#[test]
fn reserved_active_zones_leave_room_for_the_logs() {
    bounded(120, || {
        // 6 active zones, 2 left to the logs: zonefs keeps the journal, 2 class slots and
        // the GC slot.
        assert_eq!(budget_run(2), Ok(4));
        // Without the reservation zonefs takes all 6 and the logs' or the classes' zones do
        // not fit (the check above is not vacuous).
        let r = budget_run(0);
        assert!(r.is_err(), "{r:?}");
        // A reservation leaving zonefs fewer than 2 active zones is refused at mkfs.
        assert!(budget_run(5).unwrap_err().contains("active"));
    });
}

#[test]
fn the_reservation_is_recorded_and_needs_a_limit() {
    bounded(120, || {
        let rt = runtime(1);
        let spec = format!("mem:zones={ZONES},zone_size=64K,max_active={MAX_ACTIVE}");
        for buffered in [false, true] {
            let client = open(&rt, &spec, buffered);
            b(ZoneFs::mkfs(
                &client,
                MkfsOptions {
                    reserved_active_zones: 3,
                    ..MkfsOptions::default()
                },
            ))
            .unwrap();
            for round in 0..3 {
                // Every mount (the journal rolled each time) keeps the reservation; with the
                // buffer on the instance presents no limit, so all 7 classes get a slot.
                let fs = b(ZoneFs::mount(client.clone())).unwrap();
                let want = if buffered { 1 + 7 + 1 } else { 3 };
                assert_eq!(fs.max_active_zones(), want, "buffered {buffered}");
                b(fs.create(&format!("x{round}"), WriteLifetime::Short)).unwrap();
                drop(fs);
            }
            b(client.close()).unwrap();
        }
    });
}
