//! The store's device layout and open: an absent `emu:` path is created (default geometry
//! too), a blank device formatted (zonefs on `0..F`, the logs on `F..N`), a store reopened
//! with its shard count (a mismatch is typed), an interrupted format done again; a zonefs
//! made the RocksDB plugin's way, random foreign bytes, a zonefs without STORE and a damaged
//! STORE are typed errors and leave the device byte-identical. With the buffer off the active
//! zones of zonefs and the logs fit the device's limit together.

mod durable_support;

use durable_support::{b, bounded, end, open, runtime, EmuPath, Rng};
use kv_demo::manifest::ManifestOptions;
use kv_demo::store::{
    log_zones, table_path, Opened, Store, StoreError, StoreMeta, StoreOptions, DEFAULT_EMU_ZONES,
    DEFAULT_EMU_ZONE_BYTES, FORMAT_MARKER, STORE_FILE,
};
use kv_demo::version_edit::{FileMeta, VersionEdit};
use ziob::{Client, Geometry, Position, ZiobConfig};
use ziob_zonefs::{MkfsOptions, WriteLifetime, ZoneFs};

const ZONES: u32 = 32;
const ZONE_BYTES: u64 = 1 << 20;

fn opts(shards: Option<usize>) -> StoreOptions {
    StoreOptions {
        shards,
        wal_bytes_per_shard: 1 << 20,
        emu_zones: ZONES,
        emu_zone_bytes: ZONE_BYTES,
        manifest: ManifestOptions::default(),
    }
}

/// [`Store::open_spec`], retried while the device is still held by an instance that was
/// just closed (its release may lag).
fn open_spec(rt: &ziob::Runtime, spec: &str, o: &StoreOptions) -> Result<Store, StoreError> {
    for _ in 0..80 {
        match b(Store::open_spec(
            rt.handle(),
            spec,
            ZiobConfig::default(),
            o,
        )) {
            Err(StoreError::Ziob(ziob::ZiobError::Device(ziob::backends::DeviceError::Busy {
                ..
            }))) => std::thread::sleep(std::time::Duration::from_millis(250)),
            r => return r,
        }
    }
    panic!("{spec} stays busy")
}

#[test]
fn create_format_reopen() {
    let path = EmuPath::new("store-create");
    let spec = path.spec();
    bounded(120, move || {
        let rt = runtime(2);
        let store = open_spec(&rt, &spec, &opts(Some(2))).unwrap();
        assert_eq!(store.opened(), Opened::Formatted);
        assert_eq!(store.client().geometry().zone_count, ZONES);
        let logs = log_zones(&Geometry::new(ZONES, ZONE_BYTES), 2, 1 << 20).unwrap();
        assert_eq!(logs, 2 * (2 + 1 + 2));
        assert_eq!(store.fs().zone_count(), ZONES - logs);
        assert_eq!(store.logs().zones(), ZONES - logs..ZONES);
        assert_eq!(
            store.logs().logs(),
            ["manifest-0", "manifest-1", "wal-0", "wal-1"]
        );
        assert!(!b(store.fs().exists(FORMAT_MARKER)).unwrap());
        // Data in every part.
        let fs = store.fs().clone();
        b(fs.create(&table_path(1, 7), WriteLifetime::Short)).unwrap();
        b(fs.append(&table_path(1, 7), b"table bytes")).unwrap();
        drop(fs);
        let pos = b(store.wal(1).append(b"wal payload", true)).unwrap();
        b(store.manifest(1).apply(&VersionEdit {
            added: vec![FileMeta {
                number: 7,
                level: 0,
                size: 11,
                entries: 1,
                smallest: "a".into(),
                largest: "b".into(),
            }],
            next_file_number: Some(8),
            ..VersionEdit::default()
        }))
        .unwrap();
        b(store.close()).unwrap();

        for shards in [None, Some(2)] {
            let store = open_spec(&rt, &spec, &opts(shards)).unwrap();
            assert_eq!(store.opened(), Opened::Existing);
            assert_eq!(store.shards(), 2);
            assert_eq!(
                &b(store.fs().read_at(&table_path(1, 7), 0, 100)).unwrap()[..],
                b"table bytes"
            );
            let recs = b(store.wal(1).replay_all(Position::ZERO)).unwrap();
            assert_eq!(recs, vec![(pos, bytes::Bytes::from_static(b"wal payload"))]);
            assert!(b(store.wal(0).replay_all(Position::ZERO))
                .unwrap()
                .is_empty());
            let st = b(store.manifest(1).state());
            assert_eq!(st.files.len(), 1);
            assert_eq!(st.next_file_number, 8);
            assert_eq!(b(store.manifest(0).state()).next_file_number, 1);
            b(store.close()).unwrap();
        }
        let r = open_spec(&rt, &spec, &opts(Some(3)));
        assert!(
            matches!(
                r,
                Err(StoreError::ShardMismatch {
                    store: 2,
                    requested: 3
                })
            ),
            "{r:?}"
        );
        // The default: one shard per runtime core.
        let path2 = EmuPath::new("store-cores");
        let store = open_spec(&rt, &path2.spec(), &opts(None)).unwrap();
        assert_eq!(store.shards(), 2);
        b(store.close()).unwrap();
    });
}

#[test]
fn the_default_geometry_is_created() {
    let path = EmuPath::new("store-default");
    let spec = path.spec();
    bounded(120, move || {
        let rt = runtime(1);
        let o = StoreOptions {
            shards: Some(1),
            ..StoreOptions::default()
        };
        let store = open_spec(&rt, &spec, &o).unwrap();
        let g = store.client().geometry();
        assert_eq!(
            (g.zone_count, g.zone_size_bytes),
            (DEFAULT_EMU_ZONES, DEFAULT_EMU_ZONE_BYTES)
        );
        // 1 shard: manifest 2 + WAL 1 + 2 zones of logs.
        assert_eq!(store.fs().zone_count(), DEFAULT_EMU_ZONES - 5);
        b(store.close()).unwrap();
    });
}

/// Opens `dev` as a store; it must fail as `check` says and leave the file byte-identical
/// (through [`Store::open_spec`]); through [`Store::open`] on a read-write client it must
/// fail alike and leave every zone's data and state as they were (closing a read-write emu
/// instance rewrites its zone table's sequence number, nothing else).
fn refused(dev: &EmuPath, check: impl Fn(&StoreError) -> bool) {
    let before = dev.bytes();
    let rt = runtime(1);
    match open_spec(&rt, &dev.spec(), &opts(None)) {
        Err(e) => assert!(check(&e), "unexpected error: {e:?}"),
        Ok(s) => panic!("opened as {:?}", s.opened()),
    }
    assert!(dev.bytes() == before, "the device file changed");

    let client = open(&rt, &dev.spec(), true);
    let report = b(client.report(0, ZONES)).unwrap();
    match b(Store::open(client.clone(), &opts(None))) {
        Err(e) => assert!(check(&e), "unexpected error: {e:?}"),
        Ok(s) => panic!("opened as {:?}", s.opened()),
    }
    assert_eq!(b(client.report(0, ZONES)).unwrap(), report);
    end(client, false);
    let data = dev.zone_offset(ZONES, ZONE_BYTES, 0) as usize;
    assert!(dev.bytes()[data..] == before[data..], "zone data changed");
}

#[test]
fn a_zonefs_of_the_rocksdb_plugin_is_refused_untouched() {
    bounded(120, || {
        let dev = EmuPath::create("store-plugin", ZONES, ZONE_BYTES);
        let rt = runtime(1);
        let client = open(&rt, &dev.spec(), true);
        // What the RocksDB plugin does: mkfs over the whole device, then its files.
        b(ZoneFs::mkfs(&client, MkfsOptions::default())).unwrap();
        let fs = b(ZoneFs::mount(client.clone())).unwrap();
        b(fs.create("rocksdb/000001.log", WriteLifetime::Wal)).unwrap();
        b(fs.append("rocksdb/000001.log", &[7u8; 5000])).unwrap();
        b(fs.sync_all()).unwrap();
        drop(fs);
        end(client, false);
        refused(&dev, |e| matches!(e, StoreError::NotAStore { .. }));
        // An empty zonefs over the whole device too.
        let dev = EmuPath::create("store-plugin-empty", ZONES, ZONE_BYTES);
        let client = open(&rt, &dev.spec(), true);
        b(ZoneFs::mkfs(&client, MkfsOptions::default())).unwrap();
        end(client, false);
        refused(&dev, |e| matches!(e, StoreError::NotAStore { .. }));
    });
}

#[test]
fn foreign_bytes_are_refused_untouched() {
    bounded(120, || {
        let mut rng = Rng(0xf00d);
        for round in 0..4 {
            let dev = EmuPath::create("store-foreign", ZONES, ZONE_BYTES);
            let rt = runtime(1);
            let client = open(&rt, &dev.spec(), true);
            // Random bytes in random zones (zone 0 in half the rounds).
            let zones: Vec<u32> = if round % 2 == 0 {
                vec![0, 1 + rng.below(ZONES as u64 - 1) as u32]
            } else {
                vec![2 + rng.below(ZONES as u64 - 2) as u32]
            };
            for z in zones {
                let data: Vec<u8> = (0..4096 * (1 + rng.below(4)))
                    .map(|_| rng.next() as u8)
                    .collect();
                b(client.append(z, data.into())).unwrap();
                b(client.flush(z)).unwrap();
            }
            end(client, false);
            refused(&dev, |e| matches!(e, StoreError::Foreign { .. }));
        }
    });
}

#[test]
fn a_zonefs_without_store_or_with_a_bad_store_is_refused_untouched() {
    bounded(120, || {
        let rt = runtime(1);
        // A ranged zonefs holding a file of someone else, no STORE.
        let dev = EmuPath::create("store-nostore", ZONES, ZONE_BYTES);
        let client = open(&rt, &dev.spec(), true);
        b(ZoneFs::mkfs(
            &client,
            MkfsOptions {
                zone_count: Some(20),
                ..MkfsOptions::default()
            },
        ))
        .unwrap();
        let fs = b(ZoneFs::mount(client.clone())).unwrap();
        b(fs.create("theirs", WriteLifetime::Long)).unwrap();
        drop(fs);
        end(client, false);
        refused(&dev, |e| matches!(e, StoreError::NotAStore { .. }));

        // A store whose STORE file is damaged (bad checksum, bad magic, wrong length, 0
        // shards).
        let bad_stores: [Vec<u8>; 4] = [
            {
                let mut s = StoreMeta { shards: 2 }.encode();
                s[13] ^= 1;
                s.to_vec()
            },
            {
                let mut s = StoreMeta { shards: 2 }.encode();
                s[0] = b'X';
                s.to_vec()
            },
            StoreMeta { shards: 2 }.encode()[..20].to_vec(),
            StoreMeta { shards: 0 }.encode().to_vec(),
        ];
        for bad in bad_stores {
            let path = EmuPath::new("store-bad");
            let store = open_spec(&rt, &path.spec(), &opts(Some(2))).unwrap();
            let fs = store.fs().clone();
            b(fs.delete(STORE_FILE)).unwrap();
            b(fs.create(STORE_FILE, WriteLifetime::Extreme)).unwrap();
            b(fs.append(STORE_FILE, &bad)).unwrap();
            b(fs.sync(STORE_FILE)).unwrap();
            drop(fs);
            b(store.close()).unwrap();
            refused(&path, |e| matches!(e, StoreError::Corrupt { .. }));
        }
    });
}

#[test]
fn missing_logs() {
    bounded(120, || {
        let rt = runtime(1);
        let path = EmuPath::new("store-nolog");
        let store = open_spec(&rt, &path.spec(), &opts(Some(2))).unwrap();
        b(store.logs().remove_log("manifest-1")).unwrap();
        let client = store.client().clone();
        drop(store);
        b(client.close()).unwrap();
        drop(client);
        let r = open_spec(&rt, &path.spec(), &opts(None));
        assert!(
            matches!(
                r,
                Err(StoreError::Manifest(
                    kv_demo::manifest::ManifestError::Missing { .. }
                ))
            ),
            "{r:?}"
        );
        // A WAL whose zones are all gone (its newest zone's header never durable, the older
        // ones truncated: a crash can do that) is made again, empty.
        let store_path = EmuPath::new("store-nowal");
        let store = open_spec(&rt, &store_path.spec(), &opts(Some(2))).unwrap();
        b(store.logs().remove_log("wal-0")).unwrap();
        let client = store.client().clone();
        drop(store);
        b(client.close()).unwrap();
        drop(client);
        let store = open_spec(&rt, &store_path.spec(), &opts(None)).unwrap();
        assert_eq!(store.opened(), Opened::Existing);
        assert!(b(store.wal(0).replay_all(Position::ZERO))
            .unwrap()
            .is_empty());
        b(store.close()).unwrap();
        let store = open_spec(&rt, &store_path.spec(), &opts(None)).unwrap();
        assert!(store.logs().logs().contains(&"wal-0".to_string()));
        b(store.close()).unwrap();
    });
}

/// A crash cut the WAL before the manifest's replay start (its records were in tables but
/// not durable in the WAL): the store moves the start back to the WAL's end, so records
/// appended after the reopen are replayed by the next one.
#[test]
fn a_wal_cut_before_the_replay_start_moves_the_start_back() {
    bounded(120, || {
        let rt = runtime(1);
        let path = EmuPath::new("store-walcut");
        let store = open_spec(&rt, &path.spec(), &opts(Some(1))).unwrap();
        let wal = store.wal(0).clone();
        b(wal.append(b"durable", true)).unwrap();
        b(wal.append(b"lost in the crash", false)).unwrap();
        // The manifest says everything before the end is in tables.
        let past = wal.end();
        b(store.manifest(0).apply(&VersionEdit {
            wal_start: Some(past.into_raw()),
            ..VersionEdit::default()
        }))
        .unwrap();
        let client = store.client().clone();
        drop((wal, store));
        end(client, true);
        let store = open_spec(&rt, &path.spec(), &opts(None)).unwrap();
        let start = b(store.manifest(0).state()).wal_start;
        assert!(
            start <= store.wal(0).end(),
            "{start} > {}",
            store.wal(0).end()
        );
        assert!(b(store.wal(0).replay_all(start)).unwrap().is_empty());
        let pos = b(store.wal(0).append(b"after the crash", true)).unwrap();
        assert!(pos >= start);
        b(store.close()).unwrap();
        let store = open_spec(&rt, &path.spec(), &opts(None)).unwrap();
        let start = b(store.manifest(0).state()).wal_start;
        let recs = b(store.wal(0).replay_all(start)).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(&recs[0].1[..], b"after the crash");
        b(store.close()).unwrap();
    });
}

#[test]
fn an_interrupted_format_is_done_again() {
    bounded(120, || {
        let rt = runtime(1);
        let f = ZONES - log_zones(&Geometry::new(ZONES, ZONE_BYTES), 2, 1 << 20).unwrap();
        for with_marker in [false, true] {
            let dev = EmuPath::create("store-interrupted", ZONES, ZONE_BYTES);
            let client = open(&rt, &dev.spec(), true);
            b(ZoneFs::mkfs(
                &client,
                MkfsOptions {
                    zone_count: Some(f),
                    ..MkfsOptions::default()
                },
            ))
            .unwrap();
            if with_marker {
                // The marker, and a log the format had made.
                let fs = b(ZoneFs::mount(client.clone())).unwrap();
                b(fs.create(FORMAT_MARKER, WriteLifetime::Extreme)).unwrap();
                let space = b(ziob::LogSpace::open(
                    client.clone(),
                    ziob::LogSpaceOptions {
                        zones: f..ZONES,
                        ..Default::default()
                    },
                ))
                .unwrap();
                let m = b(space.open_log("manifest-0")).unwrap();
                b(m.append(b"half a format")).unwrap();
                b(m.sync()).unwrap();
            }
            let store = b(Store::open(client.clone(), &opts(Some(2)))).unwrap();
            assert_eq!(store.opened(), Opened::Reformatted);
            assert_eq!(b(store.manifest(0).state()).next_file_number, 1);
            assert!(!b(store.fs().exists(FORMAT_MARKER)).unwrap());
            drop(store);
            end(client, false);
            let client = open(&rt, &dev.spec(), true);
            let store = b(Store::open(client.clone(), &opts(None))).unwrap();
            assert_eq!(store.opened(), Opened::Existing);
            drop(store);
            end(client, false);
        }
    });
}

#[test]
fn unfit_devices_are_config_errors() {
    let rt = runtime(1);
    // Logs would need more than half the zones.
    let client = b(Client::open(
        rt.handle(),
        "mem:zones=16,zone_size=1M",
        ZiobConfig::default(),
    ))
    .unwrap();
    let r = b(Store::open(client.clone(), &opts(Some(4))));
    assert!(matches!(r, Err(StoreError::Config(_))), "{r:?}");
    // Nothing was written: the device is still blank and formats with fewer shards.
    let s = b(Store::open(client.clone(), &opts(Some(1)))).unwrap();
    assert_eq!(s.opened(), Opened::Formatted);
    drop(s);
    b(client.close()).unwrap();
}

#[test]
fn the_active_zone_budget_fits_with_the_buffer_off() {
    bounded(120, || {
        let rt = runtime(1);
        let spec = "mem:zones=40,zone_size=256K,max_active=6";
        // 3 shards: 6 logs leave zonefs nothing.
        let client = open(&rt, spec, false);
        let o = |shards| StoreOptions {
            wal_bytes_per_shard: 256 << 10,
            ..opts(Some(shards))
        };
        let r = b(Store::open(client.clone(), &o(3)));
        assert!(matches!(r, Err(StoreError::Config(_))), "{r:?}");
        b(client.close()).unwrap();
        // 2 shards: 4 logs, 2 zones for zonefs (journal + one data slot).
        let client = open(&rt, spec, false);
        let store = b(Store::open(client.clone(), &o(2))).unwrap();
        assert_eq!(store.fs().max_active_zones(), 2);
        let fs = store.fs().clone();
        for round in 0..6u64 {
            for (i, class) in [
                WriteLifetime::Short,
                WriteLifetime::Long,
                WriteLifetime::Wal,
            ]
            .iter()
            .enumerate()
            {
                let path = table_path(i % 2, round * 10 + i as u64);
                b(fs.create(&path, *class)).unwrap();
                b(fs.append(&path, &vec![round as u8; 100_000])).unwrap();
                b(fs.sync(&path)).unwrap();
            }
            for shard in 0..2 {
                for k in 0..10u8 {
                    b(store.wal(shard).append(&[k; 3000], k % 3 == 0)).unwrap();
                }
                b(store.manifest(shard).apply(&VersionEdit {
                    last_seq: Some(round),
                    ..VersionEdit::default()
                }))
                .unwrap();
            }
        }
        let fsck = b(fs.fsck()).unwrap();
        assert!(fsck.is_clean(), "{:?}", fsck.problems);
        drop((fs, store));
        b(client.close()).unwrap();
    });
}
