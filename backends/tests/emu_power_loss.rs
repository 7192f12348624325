//! Power loss for emu, searched: a seeded run of writes, resets and flushes keeps the device
//! file's image after every completed flush. A power loss while flush `k + 1` ran leaves, for
//! every 512-byte sector that differs between images `k` and `k + 1`, either one (a drive with
//! a volatile cache persists the writes issued since the last completed `fdatasync` in any
//! order, each sector whole). The test builds such mixed images at random (table and data
//! sectors alike), opens each and checks that the device is exactly as after flush `k` or
//! after flush `k + 1`, every byte below every write pointer the one written.
//!
//! A flush that writes the table with one `fdatasync` relies on the table's data checks: an
//! open that trusted a newest table without them would put write pointers past data that
//! never landed (this test then fails). A flush that `fdatasync`s the data before it writes
//! the table (a table without checks) is modelled as such: first data sectors in any mix with
//! the old table, then the new data with table sectors in any mix. Which of the two a flush
//! is, the test's own model says (and checks against the table written). Set
//! `ZIOB_POWER_LOSS_SEED` to replay a seed and `ZIOB_POWER_LOSS_SEEDS` for more seeds.

use std::os::unix::fs::FileExt;
use std::path::Path;

use ziob_backends::emu::format::{self, Layout};
use ziob_backends::{
    EmuDevice, Geometry, LatencyModel, ZoneAction, ZoneInfo, ZoneState, ZoneTarget, ZonedDevice,
};
use ziob_runtime::DmaBuf;

mod support;
use support::{on_core, Rng};

const ZONES: u32 = 40;
const ZONE_BYTES: u64 = 128 << 10;
const BS: u64 = 4096;
const SECTOR: usize = 512;
/// Completed flushes and zone actions per seed.
const FLUSHES: usize = 24;
/// Mixed images opened per pair of consecutive flushes.
const MIXES: usize = 6;

/// The byte at `offset` of `zone` written in the zone's `generation` (resets since creation).
fn byte(zone: u32, generation: u64, offset: u64) -> u8 {
    let x = (u64::from(zone) * 131 + generation * 71 + (offset / BS) * 7 + offset) % 251;
    x as u8 + 1
}

/// The device after a completed flush: what a report says (opened zones come back Closed) and
/// each zone's generation.
#[derive(Clone, Debug, PartialEq)]
struct State {
    report: Vec<ZoneInfo>,
    generations: Vec<u64>,
}

/// A completed flush (or zone action): the file image after it, the state, and whether the
/// model says its table was written with one `fdatasync` and data checks.
struct Flushed {
    image: Vec<u8>,
    state: State,
    one_sync: bool,
}

async fn state_of(dev: &EmuDevice, generations: &[u64]) -> State {
    let report = dev
        .report_all()
        .await
        .unwrap()
        .into_iter()
        .map(|mut z| {
            if z.state.is_open() {
                z.state = ZoneState::Closed;
            }
            z
        })
        .collect();
    State {
        report,
        generations: generations.to_vec(),
    }
}

/// What decides how the next table is written (the model of `docs/format.md`, "Write
/// ordering and crash semantics", 3, kept apart from the device's own bookkeeping).
#[derive(Default)]
struct SyncModel {
    /// A table was written since the device was opened.
    table_since_open: bool,
    /// Bytes the zones grew by since the last table.
    grown_bytes: u64,
    /// One of those writes was longer than a checked write (64 KiB).
    long_write: bool,
}

impl SyncModel {
    fn wrote(&mut self, len: u64) {
        self.grown_bytes += len;
        self.long_write |= len > 64 << 10;
    }

    /// A table was written: whether with one fdatasync (and checks for the grown zones).
    fn table_written(&mut self) -> bool {
        let one = self.table_since_open && !self.long_write && self.grown_bytes <= 1 << 20;
        *self = SyncModel {
            table_since_open: true,
            ..SyncModel::default()
        };
        one
    }
}

/// Zones the run writes: spread over both sectors of the table, with zone 30's entry across
/// the sector boundary (its check in the first sector, its written bytes in the second).
const WRITTEN_ZONES: [u32; 6] = [0, 7, 14, 30, 35, 39];

/// A seeded run: returns every completed flush and zone action (index 0: right after
/// creation). Sometimes reopens the device in between (its first table after an open is
/// written with two fdatasyncs).
async fn run(path: &Path, seed: u64) -> Vec<Flushed> {
    let mut rng = Rng(seed | 1);
    let mut dev = EmuDevice::create(path, &Geometry::new(ZONES, ZONE_BYTES))
        .await
        .unwrap();
    let mut generations = vec![0u64; ZONES as usize];
    let mut wps = vec![0u64; ZONES as usize];
    let mut model = SyncModel::default();
    let image = || std::fs::read(path).unwrap();
    let mut out = vec![Flushed {
        image: image(),
        state: state_of(&dev, &generations).await,
        one_sync: false,
    }];
    while out.len() <= FLUSHES {
        if rng.below(6) == 0 {
            drop(dev);
            dev = EmuDevice::open(path, LatencyModel::default())
                .await
                .unwrap();
            model.table_since_open = false;
        }
        // A few writes to a few zones, mostly short (a flush then writes its table with one
        // fdatasync), sometimes longer than a checked write (then with two).
        for _ in 0..1 + rng.below(4) {
            let zone = WRITTEN_ZONES[rng.below(WRITTEN_ZONES.len() as u64) as usize];
            let room = (ZONE_BYTES - wps[zone as usize]) / BS;
            if room == 0 {
                continue;
            }
            let blocks = if rng.below(8) == 0 {
                17 + rng.below(8)
            } else {
                1 + rng.below(3)
            }
            .min(room);
            let at = wps[zone as usize];
            let g = generations[zone as usize];
            let data: Vec<u8> = (at..at + blocks * BS).map(|o| byte(zone, g, o)).collect();
            dev.write(zone, at, DmaBuf::from_slice(&data))
                .await
                .0
                .unwrap();
            wps[zone as usize] += blocks * BS;
            model.wrote(blocks * BS);
        }
        let before = out.last().expect("the creation image").image.clone();
        let syncs = dev.fdatasyncs();
        dev.flush().await.unwrap();
        let flushed = image();
        // The first flush after an open writes a table even with nothing changed.
        let one_sync = flushed != before && model.table_written();
        expect_syncs(&dev, syncs, flushed != before, one_sync);
        out.push(Flushed {
            image: flushed,
            state: state_of(&dev, &generations).await,
            one_sync,
        });
        let written = WRITTEN_ZONES.into_iter().filter(|&z| wps[z as usize] > 0);
        let written: Vec<u32> = written.collect();
        if !written.is_empty() && rng.below(4) == 0 {
            // A reset writes a table of its own (no data to check).
            let zone = written[rng.below(written.len() as u64) as usize];
            let syncs = dev.fdatasyncs();
            dev.zone_action(ZoneAction::Reset, ZoneTarget::One(zone))
                .await
                .unwrap();
            generations[zone as usize] += 1;
            wps[zone as usize] = 0;
            let one_sync = model.table_written();
            expect_syncs(&dev, syncs, true, one_sync);
            out.push(Flushed {
                image: image(),
                state: state_of(&dev, &generations).await,
                one_sync,
            });
        }
    }
    out
}

/// Checks the `fdatasync`s a flush or zone action issued since `before`: none when it wrote
/// no table, one for a table written with one, two otherwise.
fn expect_syncs(dev: &EmuDevice, before: u64, wrote_table: bool, one_sync: bool) {
    let want = match (wrote_table, one_sync) {
        (false, _) => 0,
        (true, true) => 1,
        (true, false) => 2,
    };
    assert_eq!(
        dev.fdatasyncs() - before,
        want,
        "fdatasyncs of a table write"
    );
}

/// Opens the image at `path`: the candidate state it is in (checking every byte below every
/// write pointer against the pattern of that state's generation) and whether the open
/// reported falling back from a torn newest table.
async fn open_and_check(path: &Path, candidates: &[&State]) -> Result<(State, bool), String> {
    let dev = EmuDevice::open(path, LatencyModel::default())
        .await
        .map_err(|e| format!("open failed: {e}"))?;
    let fell_back = dev.recovery().is_some_and(|r| r.torn_newest_write);
    let report = state_of(&dev, &[]).await.report;
    let Some(state) = candidates.iter().find(|s| s.report == report) else {
        return Err(format!(
            "the device is in neither state: {:?}",
            report
                .iter()
                .map(|z| (z.index, z.state, z.write_pointer_bytes))
                .filter(|&(_, s, wp)| s != ZoneState::Empty || wp != 0)
                .collect::<Vec<_>>()
        ));
    };
    for z in &report {
        let len = z.write_pointer_bytes.min(ZONE_BYTES) as usize;
        if len == 0 {
            continue;
        }
        let (res, buf) = dev.read(z.index, 0, len, DmaBuf::with_capacity(len)).await;
        res.map_err(|e| format!("read of zone {}: {e}", z.index))?;
        let g = state.generations[z.index as usize];
        if let Some(at) = (0..len).find(|&o| buf[o] != byte(z.index, g, o as u64)) {
            return Err(format!(
                "zone {} (write pointer {}): byte {at} is {}, written {}",
                z.index,
                z.write_pointer_bytes,
                buf[at],
                byte(z.index, g, at as u64)
            ));
        }
    }
    Ok(((*state).clone(), fell_back))
}

/// First byte of the data region (header and the two one-block table slots before it).
const DATA_OFFSET: usize = 3 * 4096;

/// The newest table in `image`: its slot and entries.
fn newest_table(image: &[u8]) -> (u64, Vec<format::TableEntry>) {
    let layout = Layout::for_geometry(&Geometry::new(ZONES, ZONE_BYTES));
    assert_eq!(layout.data_offset_bytes as usize, DATA_OFFSET);
    (0..2u64)
        .filter_map(|slot| {
            let at = layout.slot_offset(slot) as usize;
            let bytes = &image[at..at + layout.table_slot_bytes as usize];
            format::decode_table(bytes, ZONES).ok().map(|t| (slot, t))
        })
        .max_by_key(|(_, (seq, _))| *seq)
        .map(|(slot, (_, entries))| (slot, entries))
        .expect("a valid table")
}

/// Checks that the table of `new` has a data check exactly for the zones that grew since
/// `old` when the model says it was written with one fdatasync, and none otherwise.
fn check_mode(old: &Flushed, new: &Flushed) {
    let (_, entries) = newest_table(&new.image);
    for (o, n) in old.state.report.iter().zip(&new.state.report) {
        let grew = n.write_pointer_bytes > o.write_pointer_bytes
            && n.state != ZoneState::Empty
            && old.image != new.image;
        let has = entries[n.index as usize].check.is_some();
        assert_eq!(
            has,
            grew && new.one_sync,
            "zone {}: data check {has}, the model expects one fdatasync: {}",
            n.index,
            new.one_sync
        );
    }
}

fn check_seed(seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let run_path = dir.path().join("run.zns");
    let p = run_path.clone();
    let flushes = on_core(move || async move { run(&p, seed).await });
    let crash_path = dir.path().join("crash.zns");
    std::fs::write(&crash_path, &flushes[0].image).unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&crash_path)
        .unwrap();
    let layout = Layout::for_geometry(&Geometry::new(ZONES, ZONE_BYTES));
    let mut rng = Rng(seed.wrapping_mul(31) | 1);
    let (mut checked_flushes, mut fallbacks) = (0, 0);
    for k in 0..flushes.len() - 1 {
        let (old, new) = (&flushes[k], &flushes[k + 1]);
        assert_eq!(old.image.len(), new.image.len());
        check_mode(old, new);
        let sector =
            |img: &[u8], s: usize| -> Vec<u8> { img[s * SECTOR..(s + 1) * SECTOR].to_vec() };
        let differ: Vec<usize> = (0..old.image.len() / SECTOR)
            .filter(|&s| sector(&old.image, s) != sector(&new.image, s))
            .collect();
        let one_sync = new.one_sync;
        let data_differs = differ.iter().any(|&s| s * SECTOR >= DATA_OFFSET);
        checked_flushes += usize::from(one_sync && data_differs);
        // The sectors of the slot the new table went to.
        let (new_slot, _) = newest_table(&new.image);
        let slot_start = layout.slot_offset(new_slot) as usize / SECTOR;
        let slot_sectors = slot_start..slot_start + layout.table_slot_bytes as usize / SECTOR;
        // The crash file holds image k here.
        for mix in 0..MIXES {
            // Mixes 0 and 1: every table sector new and every data sector old, or the other
            // way round (the first only with one fdatasync); then random mixes with a random
            // share of new sectors (with two, of data sectors under the old table, or of
            // table sectors over the new data).
            let share = rng.below(101);
            let data_first = rng.below(2) == 0;
            let chosen: Vec<usize> = differ
                .iter()
                .copied()
                .filter(|&s| {
                    let table = s * SECTOR < DATA_OFFSET;
                    match (mix, one_sync) {
                        (0, true) => table,
                        (0, false) | (1, _) => !table,
                        (_, true) => rng.below(100) < share,
                        (_, false) if data_first => !table && rng.below(100) < share,
                        (_, false) => !table || rng.below(100) < share,
                    }
                })
                .collect();
            for &s in &chosen {
                f.write_all_at(&sector(&new.image, s), (s * SECTOR) as u64)
                    .unwrap();
            }
            let cp = crash_path.clone();
            let candidates = (old.state.clone(), new.state.clone());
            let got = on_core(move || async move {
                open_and_check(&cp, &[&candidates.0, &candidates.1]).await
            });
            let what = || {
                format!(
                    "seed {seed}: power loss during flush {} ({} of {} changed sectors new, \
                     mix {mix}, one fdatasync: {one_sync})",
                    k + 1,
                    chosen.len(),
                    differ.len()
                )
            };
            let (state, fell_back) = got.unwrap_or_else(|e| {
                panic!("{}: {e} (ZIOB_POWER_LOSS_SEED={seed} replays)", what())
            });
            // The new table landed whole but the state is the old one: only a failed data
            // check explains that, and the open must say so.
            let table_landed = differ
                .iter()
                .filter(|s| slot_sectors.contains(s))
                .all(|s| chosen.contains(s));
            if table_landed && state == old.state && old.state != new.state {
                assert!(fell_back, "{}: a silent fall back", what());
                fallbacks += 1;
            }
            for &s in &chosen {
                f.write_all_at(&sector(&old.image, s), (s * SECTOR) as u64)
                    .unwrap();
            }
            // An open that fell back rewrote the rejected table: back to image k there too.
            f.write_all_at(&old.image[..DATA_OFFSET], 0).unwrap();
        }
        for &s in &differ {
            f.write_all_at(&sector(&new.image, s), (s * SECTOR) as u64)
                .unwrap();
        }
    }
    // The crash file holds the last image: it opens as the last state.
    let cp = crash_path.clone();
    let last = flushes.last().expect("flushes").state.clone();
    let want = last.clone();
    let (state, fell_back) = on_core(move || async move { open_and_check(&cp, &[&want]).await })
        .unwrap_or_else(|e| panic!("seed {seed}: the last image: {e}"));
    assert_eq!(
        (state, fell_back),
        (last, false),
        "seed {seed}: the last image"
    );
    assert!(
        checked_flushes >= FLUSHES / 3,
        "seed {seed}: only {checked_flushes} flushes wrote data and a table with one fdatasync"
    );
    assert!(
        fallbacks > 0,
        "seed {seed}: no open fell back from a torn flush"
    );
}

#[test]
fn a_power_loss_during_a_flush_leaves_the_state_before_or_after_it() {
    let seeds: Vec<u64> = match std::env::var("ZIOB_POWER_LOSS_SEED") {
        Ok(s) => vec![s.parse().expect("ZIOB_POWER_LOSS_SEED is a number")],
        Err(_) => {
            let n: u64 = std::env::var("ZIOB_POWER_LOSS_SEEDS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(4);
            (1..=n).collect()
        }
    };
    for seed in seeds {
        check_seed(seed);
    }
}

/// A table write whose `fdatasync` failed may still land (it is in the page cache). A zone
/// action after it that brings the zones back to the last durable table must write its table
/// all the same: here a reset of the zone the failed flush wrote, which would otherwise be
/// undone on reopen.
#[test]
fn a_reset_after_a_failed_table_sync_is_not_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.zns");
    let p = path.clone();
    on_core(move || async move {
        let dev = EmuDevice::create(&p, &Geometry::new(ZONES, ZONE_BYTES))
            .await
            .unwrap();
        for zone in [0, 7] {
            let data = vec![byte(zone, 0, 0); BS as usize];
            dev.write(zone, 0, DmaBuf::from_slice(&data))
                .await
                .0
                .unwrap();
            dev.flush().await.unwrap();
        }
        // Nothing changed: the table is written again without data checks.
        dev.flush().await.unwrap();
        let data = vec![byte(30, 0, 0); BS as usize];
        dev.write(30, 0, DmaBuf::from_slice(&data)).await.0.unwrap();
        dev.fail_table_sync(libc::EIO);
        let e = dev.flush().await.unwrap_err();
        assert!(e.to_string().contains("injected"), "{e}");
        dev.zone_action(ZoneAction::Reset, ZoneTarget::One(30))
            .await
            .unwrap();
        drop(dev);
        let dev = EmuDevice::open(&p, LatencyModel::default()).await.unwrap();
        let z = dev.report_all().await.unwrap()[30];
        assert_eq!(
            (z.state, z.write_pointer_bytes),
            (ZoneState::Empty, 0),
            "the completed reset was undone"
        );
    });
}
