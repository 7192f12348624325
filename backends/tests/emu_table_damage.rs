//! A damaged zone-table slot: damage to the newest slot is a `Corrupt` error naming the slot
//! (never a silent rollback to the older table), unless it is explainable as a table write
//! torn by a crash; damage to the older slot is reported and the newest table used. The rule
//! is in `docs/format.md` ("Choosing the table").

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use ziob_backends::emu::format::{self, Layout};
use ziob_backends::{EmuDevice, ErrorKind, Geometry, LatencyModel, ZoneInfo, ZonedDevice};
use ziob_runtime::DmaBuf;

const ZONES: u32 = 64;

fn on_core<T: Send + 'static, F: std::future::Future<Output = T> + 'static>(
    f: impl FnOnce() -> F + Send + 'static,
) -> T {
    let rt = ziob_runtime::Runtime::builder().cores(1).build().unwrap();
    rt.block_on(f).unwrap()
}

fn geometry() -> Geometry {
    Geometry::new(ZONES, 256 << 10)
}

/// A device whose last two flushes wrote sequence 3 (slot 1, the newest: zones 0 and 40 with
/// data) and sequence 2 (slot 0: zone 0 only). Returns the path and the reports of both.
fn make_device(dir: &Path) -> (PathBuf, Vec<ZoneInfo>, Vec<ZoneInfo>) {
    let path = dir.join("dev.zns");
    let p = path.clone();
    let (older, newest) = on_core(move || async move {
        let d = EmuDevice::create(&p, &geometry()).await.unwrap();
        d.write(0, 0, DmaBuf::from_slice(&[1; 8192]))
            .await
            .0
            .unwrap();
        d.flush().await.unwrap(); // sequence 2, slot 0
        let older = d.report_all().await.unwrap();
        d.write(40, 0, DmaBuf::from_slice(&[2; 4096]))
            .await
            .0
            .unwrap();
        d.flush().await.unwrap(); // sequence 3, slot 1
        (older, d.report_all().await.unwrap())
    });
    let closed = |zones: Vec<ZoneInfo>| {
        zones
            .into_iter()
            .map(|mut z| {
                if z.state.is_open() {
                    z.state = ziob_backends::ZoneState::Closed;
                }
                z
            })
            .collect()
    };
    (path, closed(older), closed(newest))
}

fn slot_bytes(path: &Path, slot: u64) -> Vec<u8> {
    let layout = Layout::for_geometry(&geometry());
    let f = std::fs::File::open(path).unwrap();
    let mut b = vec![0; layout.table_slot_bytes as usize];
    f.read_exact_at(&mut b, layout.slot_offset(slot)).unwrap();
    b
}

fn patch(path: &Path, offset: u64, bytes: &[u8]) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset).unwrap();
}

/// Bytes 24.. of a slot are the entries: state (1), data check blocks (3) and CRC-32C (4),
/// written bytes (8).
fn entry_byte(zone: u32, field_offset: u64) -> u64 {
    24 + 16 * u64::from(zone) + field_offset
}

#[test]
fn a_damaged_newest_slot_is_a_corrupt_error_naming_the_slot() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _, _) = make_device(dir.path());
    let layout = Layout::for_geometry(&geometry());
    let newest = layout.slot_offset(1);
    // Each of these flips gives an entry no table write produces: a reserved byte, an
    // unaligned written byte count, a count past the capacity.
    for (zone, field, value) in [(3, 2, 0x01u8), (40, 8, 0x01), (0, 14, 0x40), (63, 5, 0x80)] {
        let at = newest + entry_byte(zone, field);
        let good = slot_bytes(&path, 1)[entry_byte(zone, field) as usize];
        patch(&path, at, &[good ^ value]);
        let p = path.clone();
        let e = on_core(
            move || async move { EmuDevice::open(&p, LatencyModel::default()).await.err() },
        )
        .unwrap_or_else(|| panic!("zone {zone} byte {field}: a damaged newest slot opened"));
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
        let text = e.to_string();
        assert!(text.contains("slot 1 is damaged"), "{text}");
        assert!(text.contains("checksum mismatch"), "{text}");
        assert!(text.contains("sequence 3"), "{text}");
        patch(&path, at, &[good]);
    }
}

/// Every single-bit flip of every byte of the newest slot's used bytes: the open either fails
/// with `Corrupt` naming the slot, or (only when the flip looks like a torn write) opens the
/// older table and says so in `recovery()`. Never a silent rollback, never the damaged table.
#[test]
fn no_bit_flip_of_the_newest_slot_rolls_back_silently() {
    let dir = tempfile::tempdir().unwrap();
    let (path, older, _) = make_device(dir.path());
    let layout = Layout::for_geometry(&geometry());
    let used = 24 + 16 * ZONES as usize + 4;
    let good = slot_bytes(&path, 1);
    let p = path.clone();
    let (errors, recovered) = on_core(move || async move {
        let (mut errors, mut recovered) = (0, 0);
        for (i, &byte) in good.iter().enumerate().take(used) {
            let bit = 1u8 << (i % 8);
            patch(&p, layout.slot_offset(1) + i as u64, &[byte ^ bit]);
            match EmuDevice::open(&p, LatencyModel::default()).await {
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::Corrupt, "byte {i}: {e}");
                    assert!(e.to_string().contains("slot 1"), "byte {i}: {e}");
                    errors += 1;
                }
                Ok(d) => {
                    let r = d
                        .recovery()
                        .unwrap_or_else(|| panic!("byte {i}: silent rollback"));
                    assert!(r.torn_newest_write, "byte {i}: {r}");
                    assert_eq!((r.damaged_slot, r.used_slot, r.used_sequence), (1, 0, 2));
                    assert_eq!(d.report_all().await.unwrap(), older, "byte {i}");
                    recovered += 1;
                }
            }
            patch(&p, layout.slot_offset(1) + i as u64, &[byte]);
        }
        (errors, recovered)
    });
    println!("{errors} flips refused as corrupt, {recovered} taken as torn writes");
    assert!(
        errors > recovered,
        "most flips are not explainable as torn writes"
    );
}

/// On a device whose table fits one sector nothing explains a damaged newest slot: even a
/// flip of its checksum (well-formed entries) is an error.
#[test]
fn a_one_sector_table_cannot_be_torn() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("small.zns");
    let p = path.clone();
    on_core(move || async move {
        let d = EmuDevice::create(&p, &Geometry::new(30, 256 << 10))
            .await
            .unwrap();
        d.write(2, 0, DmaBuf::from_slice(&[1; 4096]))
            .await
            .0
            .unwrap();
        d.flush().await.unwrap(); // sequence 2, slot 0
    });
    let layout = Layout::for_geometry(&Geometry::new(30, 256 << 10));
    let crc_at = layout.slot_offset(0) + 24 + 16 * 30;
    let mut crc = [0u8; 1];
    std::fs::File::open(&path)
        .unwrap()
        .read_exact_at(&mut crc, crc_at)
        .unwrap();
    patch(&path, crc_at, &[crc[0] ^ 0x01]);
    let p = path.clone();
    let e =
        on_core(move || async move { EmuDevice::open(&p, LatencyModel::default()).await.err() })
            .expect("a damaged one-sector newest slot opened");
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert!(e.to_string().contains("cannot tear"), "{e}");
}

#[test]
fn a_damaged_older_slot_is_reported_and_the_newest_table_used() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _, newest) = make_device(dir.path());
    let layout = Layout::for_geometry(&geometry());
    let at = layout.slot_offset(0) + entry_byte(7, 3);
    patch(&path, at, &[0x5A]);
    let p = path.clone();
    on_core(move || async move {
        let d = EmuDevice::open(&p, LatencyModel::default()).await.unwrap();
        let r = d.recovery().expect("the damage is reported").clone();
        assert!(!r.torn_newest_write);
        assert_eq!((r.damaged_slot, r.used_slot, r.used_sequence), (0, 1, 3));
        assert!(r.defect.contains("checksum mismatch"), "{r}");
        assert_eq!(
            r.to_string(),
            format!(
                "zone-table slot 0 is damaged ({}), taken as the older copy; using slot 1 (sequence 3)",
                r.defect
            )
        );
        assert_eq!(d.report_all().await.unwrap(), newest);
        // The next flush rewrites the damaged slot.
        d.flush().await.unwrap();
        drop(d);
        let d = EmuDevice::open(&p, LatencyModel::default()).await.unwrap();
        assert!(d.recovery().is_none());
    });
}

/// A crash while sequence 4 was being written over slot 0 (which held sequence 2): its first
/// 512-byte sector is new, the rest still old. The open uses sequence 3 and says why.
#[test]
fn a_torn_table_write_falls_back_with_a_recovery_note() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _, newest) = make_device(dir.path());
    let layout = Layout::for_geometry(&geometry());
    let old_slot0 = slot_bytes(&path, 0);
    // The table sequence 4 would hold: zone 40 with more data.
    let mut zones: Vec<_> = format::decode_table(&slot_bytes(&path, 1), ZONES)
        .unwrap()
        .1;
    zones[40].zone.written_bytes = 8192;
    let new_slot0 = format::encode_table(&layout, 4, &zones);
    let mut torn = old_slot0.clone();
    torn[..512].copy_from_slice(&new_slot0[..512]);
    patch(&path, layout.slot_offset(0), &torn);
    let p = path.clone();
    let want = newest.clone();
    on_core(move || async move {
        let d = EmuDevice::open(&p, LatencyModel::default()).await.unwrap();
        let r = d.recovery().expect("the torn write is reported").clone();
        assert!(r.torn_newest_write, "{r}");
        assert_eq!((r.damaged_slot, r.used_slot, r.used_sequence), (0, 1, 3));
        assert_eq!(d.report_all().await.unwrap(), want);
    });
    // Torn the other way (the header sector still old, sequence 2): the older copy.
    let mut torn = new_slot0;
    torn[..512].copy_from_slice(&old_slot0[..512]);
    patch(&path, layout.slot_offset(0), &torn);
    let p = path.clone();
    on_core(move || async move {
        let d = EmuDevice::open(&p, LatencyModel::default()).await.unwrap();
        let r = d.recovery().expect("the damage is reported");
        assert_eq!((r.damaged_slot, r.used_sequence), (0, 3));
        assert_eq!(d.report_all().await.unwrap(), newest);
    });
}

/// Rewrites table slot `slot` as sequence `sequence`, its entries changed by `change`.
fn rewrite_slot(
    path: &Path,
    slot: u64,
    sequence: u64,
    change: impl FnOnce(&mut Vec<format::TableEntry>),
) {
    let layout = Layout::for_geometry(&geometry());
    let (_, mut entries) = format::decode_table(&slot_bytes(path, slot), ZONES).unwrap();
    change(&mut entries);
    patch(
        path,
        layout.slot_offset(slot),
        &format::encode_table(&layout, sequence, &entries),
    );
}

/// Where zone `zone`'s data starts in the file.
fn data_at(zone: u32) -> u64 {
    let g = geometry();
    Layout::for_geometry(&g).data_offset_bytes + u64::from(zone) * g.zone_size_bytes
}

fn open_err(path: &Path) -> String {
    let p = path.to_path_buf();
    let e =
        on_core(move || async move { EmuDevice::open(&p, LatencyModel::default()).await.err() })
            .expect("the open is refused");
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    e.to_string()
}

/// `make_device`'s newest table (sequence 3) was written with one fdatasync and checks zone
/// 40's block. Its data not there: the open falls back to sequence 2, says so, and retires
/// the rejected table, so the same data landing later (written again, reaching the disk by
/// writeback) does not bring it back.
#[test]
fn a_failed_data_check_falls_back_once_and_for_all() {
    let dir = tempfile::tempdir().unwrap();
    let (path, older, _) = make_device(dir.path());
    let (_, newest_entries) = format::decode_table(&slot_bytes(&path, 1), ZONES).unwrap();
    assert!(
        newest_entries[40].check.is_some(),
        "sequence 3 checks zone 40"
    );
    patch(&path, data_at(40), &[0; 4096]);
    // A read-only open falls back too, and changes nothing.
    let p = path.clone();
    let want = older.clone();
    on_core(move || async move {
        let d = EmuDevice::open_read_only(&p, LatencyModel::default())
            .await
            .unwrap();
        let r = d.recovery().expect("the fall back is reported").clone();
        assert!(r.torn_newest_write && !r.retired, "{r}");
        assert_eq!(d.report_all().await.unwrap(), want);
    });
    assert_eq!(
        format::decode_table(&slot_bytes(&path, 1), ZONES).unwrap(),
        (3, newest_entries.clone()),
        "a read-only open wrote"
    );
    let p = path.clone();
    let want = older.clone();
    on_core(move || async move {
        let d = EmuDevice::open(&p, LatencyModel::default()).await.unwrap();
        let r = d.recovery().expect("the fall back is reported").clone();
        assert!(r.torn_newest_write && r.retired, "{r}");
        assert_eq!((r.damaged_slot, r.used_slot, r.used_sequence), (1, 0, 2));
        assert!(r.defect.contains("zone 40"), "{r}");
        assert!(r.to_string().ends_with("written over slot 1"), "{r}");
        assert_eq!(d.report_all().await.unwrap(), want);
    });
    // Slot 1 now holds sequence 3 with slot 0's zones and no checks.
    let (_, slot0) = format::decode_table(&slot_bytes(&path, 0), ZONES).unwrap();
    let (seq, slot1) = format::decode_table(&slot_bytes(&path, 1), ZONES).unwrap();
    assert_eq!((seq, &slot1), (3, &slot0));
    assert!(slot1.iter().all(|e| e.check.is_none()));
    patch(&path, data_at(40), &[2; 4096]);
    let p = path.clone();
    on_core(move || async move {
        let d = EmuDevice::open(&p, LatencyModel::default()).await.unwrap();
        assert_eq!(
            d.report_all().await.unwrap(),
            older,
            "the rejected table came back"
        );
    });
}

/// A failed data check falls back only to the table the torn flush started from, and only
/// with checks no table write could have produced refused before any data is read.
#[test]
fn a_failed_data_check_that_no_crash_explains_is_corrupt() {
    type Damage = fn(&Path);
    let cases: [(&str, Damage); 5] = [
        ("zone 0 grew without a check", |p| {
            rewrite_slot(p, 0, 2, |e| e[0].zone.written_bytes = 4096)
        }),
        ("the older slot holds sequence 0, not 2", |p| {
            rewrite_slot(p, 0, 0, |_| {})
        }),
        (
            "zone 40's check starts at byte 0, the older table's data ends at 4096",
            |p| rewrite_slot(p, 0, 2, |e| e[40].zone.written_bytes = 4096),
        ),
        ("fails its check too", |p| {
            rewrite_slot(p, 0, 2, |e| {
                e[0].check = Some(format::DataCheck {
                    blocks: 2,
                    crc32c: 7,
                })
            })
        }),
        ("zone 40 checks 2 blocks of 4096 bytes written", |p| {
            rewrite_slot(p, 1, 3, |e| e[40].check.as_mut().unwrap().blocks = 2)
        }),
    ];
    for (want, damage) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (path, _, _) = make_device(dir.path());
        patch(&path, data_at(40), &[0; 4096]);
        damage(&path);
        let e = open_err(&path);
        assert!(e.contains(want), "want {want:?}: {e}");
        assert!(e.contains("slot"), "{e}");
    }
}
