//! Power loss for emu, searched: a seeded run of writes, resets and flushes keeps the device
//! file's image after every completed flush. A power loss while flush `k + 1` ran leaves, for
//! every 512-byte sector that differs between images `k` and `k + 1`, either one (a drive with
//! a volatile cache persists the writes issued since the last completed `fdatasync` in any
//! order, each sector whole). The test builds such mixed images at random (table and data
//! sectors alike), opens each and checks that the device is exactly as after flush `k` or
//! after flush `k + 1`, every byte below every write pointer the one written.
//!
//! A flush that writes the table with one `fdatasync` relies on the table's data checks: an
//! open that trusted a newest table without them would put write pointers past data that never
//! landed (this test then fails). A flush that `fdatasync`s the data before it writes the
//! table (a table without checks) is modelled as such: first data sectors in any mix with the
//! old table, then the new data with table sectors in any mix. Set `ZIOB_POWER_LOSS_SEED` to replay a seed and
//! `ZIOB_POWER_LOSS_SEEDS` for more seeds.

use std::os::unix::fs::FileExt;
use std::path::Path;

use ziob_backends::emu::format::{self, Layout};
use ziob_backends::{
    EmuDevice, Geometry, LatencyModel, ZoneAction, ZoneInfo, ZoneState, ZoneTarget, ZonedDevice,
};
use ziob_runtime::DmaBuf;

const ZONES: u32 = 40;
const ZONE_BYTES: u64 = 128 << 10;
const BS: u64 = 4096;
const SECTOR: usize = 512;
/// Completed flushes per seed.
const FLUSHES: usize = 24;
/// Mixed images opened per pair of consecutive flushes.
const MIXES: usize = 6;

/// xorshift64*: deterministic from the seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn on_core<T: Send + 'static, F: std::future::Future<Output = T> + 'static>(
    f: impl FnOnce() -> F + Send + 'static,
) -> T {
    let rt = ziob_runtime::Runtime::builder().cores(1).build().unwrap();
    rt.block_on(f).unwrap()
}

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

/// A seeded run: returns the file image and the state after every completed flush (index 0:
/// right after creation).
async fn run(path: &Path, seed: u64) -> Vec<(Vec<u8>, State)> {
    let mut rng = Rng(seed | 1);
    let dev = EmuDevice::create(path, &Geometry::new(ZONES, ZONE_BYTES))
        .await
        .unwrap();
    let mut generations = vec![0u64; ZONES as usize];
    let mut wps = vec![0u64; ZONES as usize];
    let image = || std::fs::read(path).unwrap();
    let mut out = vec![(image(), state_of(&dev, &generations).await)];
    while out.len() <= FLUSHES {
        // A few writes to a few zones, mostly short (a flush then writes its table with one
        // fdatasync), sometimes longer than a checked write (then with two).
        for _ in 0..1 + rng.below(4) {
            let zone = rng.below(u64::from(ZONES.min(6))) as u32 * 7 % ZONES;
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
        }
        if rng.below(5) == 0 {
            // A reset is a flush of its own.
            let zone = (0..ZONES)
                .find(|&z| wps[z as usize] > 0 && rng.below(2) == 0)
                .unwrap_or(0);
            dev.flush().await.unwrap();
            out.push((image(), state_of(&dev, &generations).await));
            dev.zone_action(ZoneAction::Reset, ZoneTarget::One(zone))
                .await
                .unwrap();
            generations[zone as usize] += 1;
            wps[zone as usize] = 0;
        } else {
            dev.flush().await.unwrap();
        }
        out.push((image(), state_of(&dev, &generations).await));
    }
    out
}

/// Opens the image at `path` and returns its state, checking every byte below every write
/// pointer against the pattern of the generation `expect` gives the zone (the state's own
/// generations are unknown until the report says which state it is).
async fn open_and_check(path: &Path, candidates: &[&State]) -> Result<State, String> {
    let dev = EmuDevice::open(path, LatencyModel::default())
        .await
        .map_err(|e| format!("open failed: {e}"))?;
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
    Ok((*state).clone())
}

/// First byte of the data region (header and the two one-block table slots before it).
const DATA_OFFSET: usize = 3 * 4096;

/// Whether the table `image` holds newest was written with one `fdatasync`: every zone whose
/// data grew since `old` has a data check.
fn written_with_one_sync(image: &[u8], old: &State, new: &State) -> bool {
    let g = Geometry::new(ZONES, ZONE_BYTES);
    let layout = Layout::for_geometry(&g);
    assert_eq!(layout.data_offset_bytes as usize, DATA_OFFSET);
    let (_, entries) = (0..2u64)
        .filter_map(|slot| {
            let at = layout.slot_offset(slot) as usize;
            format::decode_table(&image[at..at + layout.table_slot_bytes as usize], ZONES).ok()
        })
        .max_by_key(|(seq, _)| *seq)
        .expect("a valid table");
    old.report.iter().zip(&new.report).all(|(o, n)| {
        n.write_pointer_bytes <= o.write_pointer_bytes || entries[n.index as usize].check.is_some()
    })
}

fn check_seed(seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let run_path = dir.path().join("run.zns");
    let p = run_path.clone();
    let flushes = on_core(move || async move { run(&p, seed).await });
    let crash_path = dir.path().join("crash.zns");
    std::fs::write(&crash_path, &flushes[0].0).unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&crash_path)
        .unwrap();
    let mut rng = Rng(seed.wrapping_mul(31) | 1);
    let mut one_sync_flushes = 0;
    for k in 0..flushes.len() - 1 {
        let (old, old_state) = &flushes[k];
        let (new, new_state) = &flushes[k + 1];
        assert_eq!(old.len(), new.len());
        let differ: Vec<usize> = (0..old.len() / SECTOR)
            .filter(|&s| old[s * SECTOR..(s + 1) * SECTOR] != new[s * SECTOR..(s + 1) * SECTOR])
            .collect();
        let one_sync = written_with_one_sync(new, old_state, new_state);
        one_sync_flushes += usize::from(one_sync && old != new);
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
                f.write_all_at(&new[s * SECTOR..(s + 1) * SECTOR], (s * SECTOR) as u64)
                    .unwrap();
            }
            let cp = crash_path.clone();
            let candidates = (old_state.clone(), new_state.clone());
            let got = on_core(move || async move {
                open_and_check(&cp, &[&candidates.0, &candidates.1]).await
            });
            if let Err(e) = got {
                panic!(
                    "seed {seed}: power loss during flush {} ({} of {} changed sectors new, \
                     mix {mix}): {e} (ZIOB_POWER_LOSS_SEED={seed} replays)",
                    k + 1,
                    chosen.len(),
                    differ.len()
                );
            }
            for &s in &chosen {
                f.write_all_at(&old[s * SECTOR..(s + 1) * SECTOR], (s * SECTOR) as u64)
                    .unwrap();
            }
        }
        for &s in &differ {
            f.write_all_at(&new[s * SECTOR..(s + 1) * SECTOR], (s * SECTOR) as u64)
                .unwrap();
        }
    }
    assert!(
        one_sync_flushes >= FLUSHES / 2,
        "seed {seed}: only {one_sync_flushes} of {FLUSHES} flushes wrote their table with one \
         fdatasync"
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
