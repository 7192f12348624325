//! `fsck` and the read-only mount: a healthy file system checks clean (read-write and
//! read-only, after clean closes and crashes); a read-only mount writes nothing to the device
//! and refuses writes; injected damage — a journal delta naming bytes past a zone's write
//! pointer before the journal's last batch, a delta making two files share bytes, a data
//! zone reset under its files — is refused by the read-write mount and found by `fsck` on a
//! read-only one, while such a delta in the last batch (a crash before its cache flush) cuts
//! the file instead. `df` reports
//! free / used / reclaimable / space amplification consistently on both.

mod support;

use support::{b, bounded, end, open, runtime, EmuFile};
use ziob::zonelog::encode_record;
use ziob::Client;
use ziob_zonefs::records::{Delta, Extent};
use ziob_zonefs::{FileCut, FsError, FsckProblem, MkfsOptions, WriteLifetime, ZoneFs};

const ZONES: u32 = 24;
const ZONE_BYTES: u64 = 64 << 10;

/// Formats and fills a device: files `a` (20 000 bytes, Long) and `b` (5 000 bytes, Long),
/// synced, plus `c` (Short) deleted; clean close. Returns the current journal zone.
fn populate(rt: &ziob::Runtime, spec: &str, buffered: bool) -> u32 {
    let client = open(rt, spec, buffered);
    b(ZoneFs::mkfs(&client, MkfsOptions::default())).unwrap();
    let fs = b(ZoneFs::mount(client.clone())).unwrap();
    for (p, n, lt) in [
        ("db/a", 20_000, WriteLifetime::Long),
        ("db/b", 5_000, WriteLifetime::Long),
        ("c", 70_000, WriteLifetime::Short),
    ] {
        b(fs.create(p, lt)).unwrap();
        b(fs.append(p, &vec![p.len() as u8; n])).unwrap();
        b(fs.sync(p)).unwrap();
    }
    b(fs.delete("c")).unwrap();
    let rep = b(fs.fsck()).unwrap();
    assert!(rep.is_clean(), "{rep:#?}");
    assert_eq!((rep.files, rep.live_bytes), (2, 25_000));
    let zone = rep.journal_zone;
    drop(fs);
    end(client, false);
    zone
}

/// Byte offset of zone 0 in an emu file of `zones` zones (docs/format.md, "Regions").
fn file_zone0(zones: u32) -> usize {
    let slot = (24 + 16 * zones as usize + 4).div_ceil(4096) * 4096;
    (4096 + 2 * slot).div_ceil(4096) * 4096
}

/// Appends `delta` as a journal record to journal zone `zone` (as a later commit would).
fn inject(client: &Client, zone: u32, delta: &Delta) {
    let mut rec = Vec::new();
    encode_record(&mut rec, &delta.encode());
    let bs = client.geometry().block_size_bytes as usize;
    rec.resize(rec.len().div_ceil(bs) * bs, 0);
    b(client.append(zone, rec.into())).unwrap();
    b(client.flush(zone)).unwrap();
}

/// The first 4 KiB of the one zone holding live data (`populate` leaves db/a at its start,
/// db/b after it).
fn first_block(fs: &ZoneFs) -> Extent {
    let rep = b(fs.fsck()).unwrap();
    let live: Vec<_> = rep.zones.iter().filter(|z| z.live > 0).collect();
    assert_eq!(live.len(), 1, "{live:?}");
    Extent {
        zone: live[0].zone,
        offset: 0,
        len: 4096,
    }
}

#[test]
fn healthy_file_systems_check_clean_and_read_only_writes_nothing() {
    for buffered in [true, false] {
        let file = EmuFile::create("fsck-clean", ZONES, ZONE_BYTES, None);
        let spec = file.spec();
        let path = file.0.clone();
        bounded(120, move || {
            let rt = runtime(2);
            populate(&rt, &spec, buffered);
            // The emu file's zone data (its table region changes on every open and close).
            let data_at = file_zone0(ZONES);
            let before = std::fs::read(&path).unwrap()[data_at..].to_vec();
            let client = open(&rt, &spec, buffered);
            let report_before = b(client.report(0, ZONES)).unwrap();
            let fs = b(ZoneFs::mount_read_only(client.clone())).unwrap();
            assert!(b(fs.is_read_only()));
            assert_eq!(b(fs.list("")).unwrap(), vec!["db".to_string()]);
            assert_eq!(b(fs.list("db")).unwrap(), vec!["a", "b"]);
            assert_eq!(&b(fs.read_at("db/b", 0, 10)).unwrap()[..], &[4u8; 10]);
            let rep = b(fs.fsck()).unwrap();
            assert!(rep.is_clean(), "{rep:#?}");
            assert_eq!((rep.files, rep.extents, rep.live_bytes), (2, 2, 25_000));
            // 3 creates, 3 syncs, 1 delete since the mount's roll.
            assert_eq!((rep.deltas_replayed, rep.journal_cut.as_deref()), (7, None));
            let df = b(fs.df());
            assert_eq!(df.used_bytes, 25_000);
            assert_eq!(df.free_zones, ZONES - 2 - 1, "{df:?}");
            assert!(df.space_amplification() > 1.0);
            for r in [
                b(fs.create("x", WriteLifetime::Short)),
                b(fs.append("db/a", b"x")),
                b(fs.sync("db/a")),
                b(fs.sync_all()),
                b(fs.delete("db/a")),
                b(fs.rename("db/a", "db/z")),
            ] {
                assert!(matches!(r, Err(FsError::ReadOnly { .. })), "{r:?}");
            }
            assert_eq!(b(client.report(0, ZONES)).unwrap(), report_before);
            drop(fs);
            end(client, false);
            assert!(
                std::fs::read(&path).unwrap()[data_at..] == before[..],
                "a read-only mount changed zone data"
            );
            // A read-write mount of the same device: same figures, clean.
            let client = open(&rt, &spec, buffered);
            let fs = b(ZoneFs::mount(client.clone())).unwrap();
            let rep = b(fs.fsck()).unwrap();
            assert!(rep.is_clean(), "{rep:#?}");
            let df = b(fs.df());
            assert_eq!(df.used_bytes, 25_000);
            assert_eq!(
                df.occupied_bytes(),
                df.used_bytes + df.reclaimable_bytes,
                "{df:?}"
            );
            // Unsynced data then a crash: the read-only mount finds its zone written but
            // unreferenced, which is no problem (a read-write mount resets it).
            b(fs.create("u", WriteLifetime::Extreme)).unwrap();
            b(fs.append("u", &[1; 9000])).unwrap();
            b(client.flush(b(fs.zones()).iter().find(|z| z.3 == 9000).unwrap().0)).unwrap();
            drop(fs);
            end(client, true);
            let client = open(&rt, &spec, buffered);
            let fs = b(ZoneFs::mount_read_only(client.clone())).unwrap();
            let rep = b(fs.fsck()).unwrap();
            assert!(rep.is_clean(), "{rep:#?}");
            assert_eq!(rep.files, 3);
            drop(fs);
            end(client, false);
        });
    }
}

#[test]
fn fsck_finds_a_delta_past_the_write_pointer() {
    let file = EmuFile::create("fsck-wp", ZONES, ZONE_BYTES, None);
    let spec = file.spec();
    bounded(120, move || {
        let rt = runtime(1);
        let jz = populate(&rt, &spec, true);
        let client = open(&rt, &spec, true);
        // File ids: db/a = 0, db/b = 1. Give db/b 8 KiB more in an empty data zone.
        let bad = Extent {
            zone: ZONES - 1,
            offset: 0,
            len: 8192,
        };
        inject(
            &client,
            jz,
            &Delta::Sync {
                id: 1,
                extents: vec![bad],
            },
        );
        // As the journal's last batch (no batch after it says it was flushed) it is what a
        // crash between a sync's journal write and its cache flush leaves: the mount cuts
        // db/b back to the 5,000 bytes the device holds (read-only here: nothing written).
        let fs = b(ZoneFs::mount_read_only(client.clone())).unwrap();
        assert_eq!(
            fs.mount_report().files_cut,
            vec![FileCut {
                path: "db/b".into(),
                journaled: 5_000 + 8192,
                kept: 5_000
            }]
        );
        assert_eq!(b(fs.size("db/b")).unwrap(), 5_000);
        let rep = b(fs.fsck()).unwrap();
        assert!(rep.is_clean(), "{:#?}", rep.problems);
        drop(fs);
        // Once a later batch follows it, its data was flushed before that batch was written:
        // data missing there is damage, refused and reported.
        inject(&client, jz, &Delta::BatchStart);
        let r = b(ZoneFs::mount(client.clone()));
        assert!(matches!(r, Err(FsError::Corrupt { .. })), "{r:?}");
        let fs = b(ZoneFs::mount_read_only(client.clone())).unwrap();
        assert!(fs.mount_report().files_cut.is_empty());
        let rep = b(fs.fsck()).unwrap();
        assert!(!rep.is_clean());
        assert_eq!(rep.deltas_replayed, 8);
        assert!(
            rep.problems
                .contains(&FsckProblem::ExtentBeyondWritePointer {
                    path: "db/b".into(),
                    extent: bad,
                    write_pointer: 0,
                }),
            "{:#?}",
            rep.problems
        );
        // And an extent past the zone's capacity.
        let out = Extent {
            zone: 3,
            offset: ZONE_BYTES - 10,
            len: 20,
        };
        drop(fs);
        inject(
            &client,
            jz,
            &Delta::Sync {
                id: 0,
                extents: vec![out],
            },
        );
        let fs = b(ZoneFs::mount_read_only(client.clone())).unwrap();
        let rep = b(fs.fsck()).unwrap();
        assert!(
            rep.problems.contains(&FsckProblem::ExtentOutOfBounds {
                path: "db/a".into(),
                extent: out,
            }),
            "{:#?}",
            rep.problems
        );
        drop(fs);
        end(client, false);
    });
}

#[test]
fn fsck_finds_overlapping_extents() {
    let file = EmuFile::create("fsck-overlap", ZONES, ZONE_BYTES, None);
    let spec = file.spec();
    bounded(120, move || {
        let rt = runtime(1);
        let jz = populate(&rt, &spec, true);
        let client = open(&rt, &spec, true);
        let fs = b(ZoneFs::mount_read_only(client.clone())).unwrap();
        let a = first_block(&fs);
        drop(fs);
        // db/b (id 1) claims bytes db/a holds.
        inject(
            &client,
            jz,
            &Delta::Sync {
                id: 1,
                extents: vec![a],
            },
        );
        // The read-write mount accepts it (the bytes are written) and fsck finds it there too.
        let fs = b(ZoneFs::mount(client.clone())).unwrap();
        let rep = b(fs.fsck()).unwrap();
        assert!(
            rep.problems.iter().any(
                |p| matches!(p, FsckProblem::OverlappingExtents { zone, .. } if *zone == a.zone)
            ),
            "{:#?}",
            rep.problems
        );
        drop(fs);
        end(client, false);
    });
}

#[test]
fn fsck_finds_a_zone_reset_under_its_files() {
    let file = EmuFile::create("fsck-reset", ZONES, ZONE_BYTES, None);
    let spec = file.spec();
    bounded(120, move || {
        let rt = runtime(1);
        populate(&rt, &spec, false);
        let client = open(&rt, &spec, false);
        let fs = b(ZoneFs::mount_read_only(client.clone())).unwrap();
        let zone = first_block(&fs).zone;
        drop(fs);
        b(client.reset(zone)).unwrap();
        let r = b(ZoneFs::mount(client.clone()));
        assert!(matches!(r, Err(FsError::Corrupt { .. })), "{r:?}");
        let fs = b(ZoneFs::mount_read_only(client.clone())).unwrap();
        let rep = b(fs.fsck()).unwrap();
        let beyond: Vec<_> = rep
            .problems
            .iter()
            .filter_map(|p| match p {
                FsckProblem::ExtentBeyondWritePointer { path, extent, .. }
                    if extent.zone == zone =>
                {
                    Some(path.as_str())
                }
                _ => None,
            })
            .collect();
        assert_eq!(beyond, vec!["db/a", "db/b"], "{:#?}", rep.problems);
        // The zone counts as free again and its bytes as lost in df.
        assert_eq!(b(fs.df()).used_bytes, 0);
        drop(fs);
        end(client, false);
    });
}
