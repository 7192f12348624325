//! emu's write-behind: through the page cache, a data write that fills a MiB of the device
//! file starts that MiB's write-back, so its pages are clean before any flush; the data reads
//! back and survives a flush and a reopen; `write_behind(false)` and `O_DIRECT` start none.
//!
//! Whether pages are dirty comes from `cachestat(2)` (Linux 6.5). Where it is missing or
//! refused, or the file system does not report dirty pages (tmpfs, overlayfs: checked first
//! with a plain file), that part is skipped (said on stderr) and only the device's counter
//! is checked.
//! The seeded test prints its seed; `ZIOB_SEED=N` replays one seed, `ZIOB_SEEDS=N` runs N.
//! Devices live under /var/tmp: /tmp is often a tmpfs, which has no write-back.

use std::ops::Range;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use ziob_backends::emu::format;
use ziob_backends::{EmuDevice, Geometry, LatencyModel, ZonedDevice};
use ziob_runtime::DmaBuf;

mod support;
use support::{on_core, open_emu as open, payload, seeds, Rng};

const BS: u64 = 4096;
const MIB: u64 = 1 << 20;
const ZONES: u32 = 4;
const ZONE_BYTES: u64 = 8 * MIB;

fn geometry() -> Geometry {
    let mut g = Geometry::new(ZONES, ZONE_BYTES);
    g.max_append_bytes = 1 << 20;
    g
}

/// The page-cache pages of `range` of the file that are dirty or under write-back, from
/// `cachestat(2)`; `None` where the kernel has no `cachestat` (before Linux 6.5).
fn unwritten_pages(path: &Path, range: &Range<u64>) -> Option<u64> {
    /// `cachestat`'s number on every architecture (Linux 6.5's unified table).
    const SYS_CACHESTAT: libc::c_long = 451;
    #[repr(C)]
    struct CachestatRange {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Cachestat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    let f = std::fs::File::open(path).unwrap();
    let r = CachestatRange {
        off: range.start,
        len: range.end - range.start,
    };
    let mut cs = Cachestat::default();
    // SAFETY: cachestat reads `r` and writes `cs`, both live locals of the kernel's layout.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            f.as_raw_fd(),
            &r as *const CachestatRange,
            &mut cs as *mut Cachestat,
            0u32,
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        // Missing (before Linux 6.5) or refused (a container's seccomp filter).
        assert!(
            matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)),
            "cachestat: {e}"
        );
        return None;
    }
    Some(cs.nr_dirty + cs.nr_writeback)
}

/// Whether `cachestat` shows the dirty pages of a file in `dir` (not so on tmpfs, or on
/// overlayfs whose pages belong to the file underneath): 1 MiB written with `pwrite` must
/// show as unwritten right after.
fn dirty_pages_visible(dir: &Path) -> bool {
    use std::os::unix::fs::FileExt;
    let path = dir.join("probe");
    let f = std::fs::File::create(&path).unwrap();
    f.write_all_at(&payload(0, MIB), 0).unwrap();
    let seen = unwritten_pages(&path, &(0..MIB)).is_some_and(|n| n > 0);
    drop(f);
    std::fs::remove_file(&path).unwrap();
    seen
}

/// The MiB chunks of the device file (aligned in the file) that each zone's writes filled,
/// given `written` bytes from each zone's start: the writes start the write-back of each
/// chunk they fill (a chunk across two zones by the later zone's writes, see
/// `emu::write_behind`). Returns that byte count and the chunks wholly within one zone's data,
/// whose pages are all written back then (the pages of a chunk across two zones the earlier
/// zone wrote after the later one filled it wait for a flush).
fn filled_chunks(layout: &format::Layout, written: &[u64]) -> (u64, Vec<Range<u64>>) {
    let (mut bytes, mut within) = (0, Vec::new());
    for (zone, &w) in written.iter().enumerate() {
        let start = layout.data_offset_bytes + zone as u64 * ZONE_BYTES;
        let end = (start + w) / MIB * MIB;
        let first = start / MIB * MIB;
        if w > 0 && end > first {
            bytes += end - first;
            let inside = start.div_ceil(MIB) * MIB;
            if end > inside {
                within.push(inside..end);
            }
        }
    }
    (bytes, within)
}

/// Waits until `cond` holds, checking every millisecond for up to 10 s (less than the 30 s
/// after which the kernel writes dirty pages back by itself).
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(10), "never: {what}");
        ziob_runtime::sleep(Duration::from_millis(1)).await.unwrap();
    }
}

/// Waits 200 ms: where nothing may be started, time for a wrongly started write-back to
/// be counted before the check.
async fn settle() {
    ziob_runtime::sleep(Duration::from_millis(200))
        .await
        .unwrap();
}

/// One seed: appends of random lengths (4 KiB to 1 MiB) to random zones of a page-cache
/// device, with write-behind on or off. On: every MiB the writes filled is counted and (where
/// `cachestat` shows dirty pages) its pages are clean before any flush. Off: nothing is
/// counted. Either way the data reads back, before and after a flush and a reopen.
fn run_seed(seed: u64, write_behind: bool) {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let pages_checked = dirty_pages_visible(dir.path());
    if !pages_checked {
        eprintln!("cachestat(2) missing or blind to dirty pages here: page state not checked");
    }
    let path = dir.path().join("d.zns");
    on_core(move || async move {
        drop(EmuDevice::create(&path, &geometry()).await.unwrap());
        let dev = open(&path, false).await.write_behind(write_behind);
        let layout = format::Layout::for_geometry(dev.geometry());
        let mut rng = Rng(seed);
        let mut written = vec![0u64; ZONES as usize];
        // (zone, offset, payload id, length) of every write.
        let mut log = Vec::new();
        // Fill the zones to random depths.
        for id in 0..(20 + rng.below(40)) {
            let zone = rng.below(u64::from(ZONES)) as u32;
            let room = ZONE_BYTES - written[zone as usize];
            if room == 0 {
                continue;
            }
            let len = ((1 + rng.below(MIB / BS)) * BS).min(room);
            let (res, _) = dev
                .append(zone, DmaBuf::from_slice(&payload(id, len)))
                .await;
            assert_eq!(res.unwrap(), written[zone as usize], "seed {seed}");
            log.push((zone, written[zone as usize], id, len));
            written[zone as usize] += len;
        }
        let (expected, chunks) = filled_chunks(&layout, &written);
        if write_behind {
            eventually("every filled MiB counted", || {
                dev.written_behind_bytes() >= expected
            })
            .await;
            assert_eq!(dev.written_behind_bytes(), expected, "seed {seed}");
            if pages_checked {
                for r in &chunks {
                    eventually("a filled MiB written back before any flush", || {
                        unwritten_pages(&path, r) == Some(0)
                    })
                    .await;
                }
            }
        } else {
            // Time for a task that should not exist to count something.
            settle().await;
            assert_eq!(dev.written_behind_bytes(), 0, "seed {seed}");
        }
        assert_eq!(dev.fdatasyncs(), 0, "seed {seed}: no flush yet");
        // The data reads back, before and after a flush and a reopen.
        let check = |dev: EmuDevice, log: Vec<(u32, u64, u64, u64)>| async move {
            for &(zone, offset, id, len) in &log {
                let buf = DmaBuf::with_capacity(len as usize);
                let (res, buf) = dev.read(zone, offset, len as usize, buf).await;
                res.unwrap();
                assert!(
                    buf[..] == payload(id, len)[..],
                    "seed {seed}: zone {zone} at {offset}"
                );
            }
            dev
        };
        let dev = check(dev, log.clone()).await;
        dev.flush().await.unwrap();
        drop(dev);
        let dev = open(&path, false).await;
        let zones = dev.report_zones(0, ZONES).await.unwrap();
        for (zone, z) in zones.iter().enumerate() {
            assert_eq!(
                z.write_pointer_bytes, written[zone],
                "seed {seed} zone {zone}"
            );
        }
        drop(check(dev, log).await);
    });
}

#[test]
fn filled_mibs_are_written_back_before_a_flush() {
    for seed in seeds(4) {
        eprintln!("seed {seed}");
        run_seed(seed, true);
        run_seed(seed, false);
    }
}

#[test]
fn o_direct_starts_no_write_back() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let path = dir.path().join("d.zns");
    on_core(move || async move {
        drop(EmuDevice::create(&path, &geometry()).await.unwrap());
        let dev = EmuDevice::open(&path, LatencyModel::default())
            .await
            .unwrap();
        if !dev.is_direct() {
            eprintln!("this file system refuses O_DIRECT: skipped");
            return;
        }
        for zone in 0..ZONES {
            let (res, _) = dev
                .write(zone, 0, DmaBuf::from_slice(&payload(7, 3 * MIB / 2)))
                .await;
            res.unwrap();
        }
        settle().await;
        assert_eq!(dev.written_behind_bytes(), 0);
    });
}
