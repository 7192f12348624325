//! emu's zero-ahead and inline writes: zeros written ahead of a zone's short writes never land
//! on data, whatever the writes in flight, resets, hole punches, flushes and reopens around
//! them, through `O_DIRECT` and through the page cache (where short writes are copied inline
//! while the zeros go through io_uring); and the zeros really allocate the host blocks ahead
//! of the writes.
//!
//! The seeded test prints its seed; `ZIOB_SEED=N` replays one seed, `ZIOB_SEEDS=N` runs N.
//! Devices live under /var/tmp: /tmp is often a tmpfs, which refuses `O_DIRECT`.

use std::os::fd::AsRawFd;
use std::path::Path;

use ziob_backends::emu::format;
use ziob_backends::{EmuDevice, Geometry, ZoneAction, ZoneTarget, ZonedDevice};
use ziob_runtime::DmaBuf;

mod support;
use support::{on_core, open_emu as open, payload, seeds, Rng};

const BS: u64 = 4096;
const MIB: u64 = 1 << 20;

fn geometry() -> Geometry {
    let mut g = Geometry::new(4, 4 * MIB);
    g.max_append_bytes = 512 << 10;
    g
}

/// Where each zone's first byte past its host data is (`SEEK_HOLE` from the zone start).
fn first_hole(path: &Path, dev: &EmuDevice, zone: u32) -> u64 {
    let f = std::fs::File::open(path).unwrap();
    let layout = format::Layout::for_geometry(dev.geometry());
    let zone_start = layout.data_offset_bytes + u64::from(zone) * dev.geometry().zone_size_bytes;
    // SAFETY: lseek on a descriptor `f` owns; no memory is passed.
    let hole = unsafe { libc::lseek(f.as_raw_fd(), zone_start as libc::off_t, libc::SEEK_HOLE) };
    assert!(hole >= 0, "{}", std::io::Error::last_os_error());
    hole as u64 - zone_start
}

/// Waits (on the runtime's timer) until the device has zeroed at least `bytes` ahead.
async fn zeroed_at_least(dev: &EmuDevice, bytes: u64) {
    for _ in 0..30_000 {
        if dev.zeroed_ahead_bytes() >= bytes {
            return;
        }
        ziob_runtime::sleep(std::time::Duration::from_millis(1))
            .await
            .unwrap();
    }
    panic!(
        "zeroed {} bytes ahead, expected at least {bytes}",
        dev.zeroed_ahead_bytes()
    );
}

#[test]
fn a_short_write_allocates_the_next_window_and_a_long_one_does_not() {
    for direct in [true, false] {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let path = dir.path().join("d.zns");
        on_core(move || async move {
            drop(EmuDevice::create(&path, &geometry()).await.unwrap());
            let dev = open(&path, direct).await;
            dev.append(0, DmaBuf::from_slice(&payload(1, BS)))
                .await
                .0
                .unwrap();
            zeroed_at_least(&dev, MIB).await;
            assert_eq!(
                dev.zeroed_ahead_bytes(),
                MIB,
                "one window (direct={direct})"
            );
            assert!(
                first_hole(&path, &dev, 0) >= BS + MIB,
                "the window past the write is allocated (direct={direct})"
            );
            // A reopen finds it allocated and zeroes nothing again until the writes come
            // close to its end.
            drop(dev);
            let dev = open(&path, direct).await;
            for id in 10..14 {
                dev.append(0, DmaBuf::from_slice(&payload(id, BS)))
                    .await
                    .0
                    .unwrap();
            }
            assert_eq!(dev.zeroed_ahead_bytes(), 0, "reopened (direct={direct})");
            // A long write starts nothing.
            dev.append(1, DmaBuf::from_slice(&payload(2, 256 << 10)))
                .await
                .0
                .unwrap();
            assert_eq!(first_hole(&path, &dev, 1), 256 << 10);
            // Turned off: nothing either.
            let dev = dev.zero_ahead(false);
            dev.append(2, DmaBuf::from_slice(&payload(3, BS)))
                .await
                .0
                .unwrap();
            assert_eq!(dev.zeroed_ahead_bytes(), 0);
            assert_eq!(first_hole(&path, &dev, 2), BS);
        });
    }
}

/// Runs one seed: batches of appends in flight together (mostly short, some long), resets
/// with and without hole punches, flushes and reopens; every zone's data is then compared
/// with what was written.
async fn run_seed(path: &Path, seed: u64, direct: bool) -> u64 {
    let mut rng = Rng(seed | 1);
    drop(EmuDevice::create(path, &geometry()).await.unwrap());
    let mut dev = open(path, direct).await;
    let zones = geometry().zone_count;
    let cap = geometry().zone_capacity_bytes;
    let mut model: Vec<Vec<u8>> = vec![Vec::new(); zones as usize];
    let mut zeroed = 0;
    let mut id = 0u64;
    for _step in 0..120 {
        match rng.below(20) {
            0 => {
                let zone = rng.below(u64::from(zones)) as u32;
                check_zone(&dev, zone, &model[zone as usize]).await;
                let discard = rng.below(2) == 0;
                dev = dev.discard_on_reset(discard);
                dev.zone_action(ZoneAction::Reset, ZoneTarget::One(zone))
                    .await
                    .unwrap();
                model[zone as usize].clear();
            }
            1 => dev.flush().await.unwrap(),
            2 => {
                dev.flush().await.unwrap();
                zeroed += dev.zeroed_ahead_bytes();
                drop(dev);
                dev = open(path, direct).await;
            }
            _ => {
                let zone = rng.below(u64::from(zones)) as u32;
                let batch = 1 + rng.below(8);
                let mut room = cap - model[zone as usize].len() as u64;
                let mut writes = Vec::new();
                for _ in 0..batch {
                    let blocks = if rng.below(8) == 0 {
                        64 + rng.below(64)
                    } else {
                        1 + rng.below(16)
                    };
                    let len = (blocks * BS).min(room);
                    if len == 0 {
                        break;
                    }
                    room -= len;
                    id += 1;
                    writes.push((id, len));
                }
                // Appends, or writes at the offsets the batch's writes before them end at
                // (issued, and so reserved, in order).
                let appending = rng.below(2) == 0;
                let mut at = model[zone as usize].len() as u64;
                let ops = writes.iter().map(|&(id, len)| {
                    let dev = dev.clone();
                    let offset = at;
                    at += len;
                    async move {
                        let data = DmaBuf::from_slice(&payload(id, len));
                        if appending {
                            dev.append(zone, data).await.0
                        } else {
                            dev.write(zone, offset, data).await.0.map(|()| offset)
                        }
                    }
                });
                let landed = futures::future::join_all(ops).await;
                let mut placed: Vec<(u64, u64, u64)> = landed
                    .into_iter()
                    .zip(&writes)
                    .map(|(at, &(id, len))| (at.expect("append"), id, len))
                    .collect();
                placed.sort_unstable();
                let data = &mut model[zone as usize];
                for (at, id, len) in placed {
                    assert_eq!(at, data.len() as u64, "appends land back to back");
                    data.extend_from_slice(&payload(id, len));
                }
            }
        }
    }
    zeroed += dev.zeroed_ahead_bytes();
    for zone in 0..zones {
        check_zone(&dev, zone, &model[zone as usize]).await;
    }
    zeroed
}

/// Checks that `zone` holds exactly `want` below its write pointer.
async fn check_zone(dev: &EmuDevice, zone: u32, want: &[u8]) {
    let info = dev.report_zones(zone, 1).await.unwrap()[0];
    assert_eq!(info.write_pointer_bytes, want.len() as u64, "zone {zone}");
    if want.is_empty() {
        return;
    }
    let (r, buf) = dev
        .read(zone, 0, want.len(), DmaBuf::with_capacity(want.len()))
        .await;
    r.unwrap();
    if let Some(at) = buf.iter().zip(want).position(|(a, b)| a != b) {
        panic!(
            "zone {zone}: byte {at} of {} is not the one written",
            want.len()
        );
    }
}

#[test]
fn zeros_written_ahead_never_land_on_data() {
    for direct in [true, false] {
        let mut zeroed = 0;
        for seed in seeds(6) {
            let dir = tempfile::tempdir_in("/var/tmp").unwrap();
            let path = dir.path().join("d.zns");
            eprintln!("seed {seed} direct={direct} (ZIOB_SEED={seed} replays)");
            zeroed += on_core(move || async move { run_seed(&path, seed, direct).await });
        }
        assert!(
            zeroed > 0,
            "direct={direct}: nothing zeroed ahead, the test tests nothing"
        );
    }
}
