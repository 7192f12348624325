//! Zero-ahead: writing zeros into a zone's host blocks ahead of its short writes.
//!
//! The device file is sparse: the first write to a block makes the host filesystem allocate
//! it, and the `fdatasync` of a flush then also commits that allocation (on ext4 a journal
//! commit: 203 µs against 133 µs for a 4 KiB write, table write and `fdatasync` over blocks
//! written before, measured on this project's machine). A zone that takes short writes (a
//! synced log: one block per flush) pays that on every flush. So when a write of at most
//! [`TRIGGER_WRITE_BYTES_MAX`] reaches within [`LOOKAHEAD_BYTES`] of where the zone's host
//! blocks are known written, the device writes zeros over the next [`WINDOW_BYTES`] past
//! its write pointer, in the background; the allocation is then committed once per window.
//!
//! Zeros never land on data: a window starts at or past the zone's write pointer when it is
//! planned, and a write that would reach into a window still being zeroed waits until the
//! zeroing has completed ([`ZeroAhead::holds_back`]). Bytes past the write pointer are not
//! data (reads return zeros there), so neither the zone table nor a crash can tell the
//! difference.

use std::ops::Range;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::task::Waker;

use ziob_runtime::DmaBuf;

use crate::emu::format::Layout;
use crate::emu::EmuDevice;
use crate::model::geometry::Geometry;
use crate::model::state::PersistedZone;

/// Writes longer than this do not start zeroing: long writes (table files, the buffer's
/// write-back runs) allocate in large extents anyway, and zeroing ahead of them would double
/// the bytes written to the host.
const TRIGGER_WRITE_BYTES_MAX: u64 = 64 * 1024;
/// A short write whose end comes this close to the end of the zone's written host blocks
/// starts zeroing the next window (so the window is ready before the writes reach it).
const LOOKAHEAD_BYTES: u64 = 512 * 1024;
/// Bytes zeroed at a time.
const WINDOW_BYTES: u64 = 1024 * 1024;

/// One zone's host blocks.
#[derive(Clone, Debug, Default)]
struct ZoneBlocks {
    /// Host blocks `[0, written_to)` of the zone are known written (allocated, not holes).
    written_to: u64,
    /// The window being zeroed, if any.
    zeroing: Option<Range<u64>>,
    /// Counts the hole punches over the zone: a window zeroed across one is not counted as
    /// written.
    punches: u64,
}

/// A window to zero, planned by [`ZeroAhead::plan`]; report its end with
/// [`ZeroAhead::finished`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Job {
    /// The zone.
    pub(super) zone: u32,
    /// Bytes from the zone start.
    pub(super) range: Range<u64>,
    /// The zone's punch count when it was planned.
    punches: u64,
}

/// How far, in bytes from the start of zone `zone`, its host blocks are written at open: up
/// to the first hole at or past its write pointer (`SEEK_HOLE`; blocks past the write pointer
/// hold zeros written ahead or data from before a reset), at most its capacity. A filesystem
/// that does not track holes reports one only at the end of the file: every zone then counts
/// as written to its capacity, and nothing is zeroed ahead. The write pointer if `lseek`
/// fails.
pub(super) fn host_written_to(
    f: &std::fs::File,
    layout: &Layout,
    geometry: &Geometry,
    zone: usize,
    z: &PersistedZone,
) -> u64 {
    let zone_start = layout.data_offset_bytes + zone as u64 * geometry.zone_size_bytes;
    let Ok(from) = libc::off_t::try_from(zone_start + z.written_bytes) else {
        return z.written_bytes;
    };
    // SAFETY: lseek on a descriptor `f` owns; no memory is passed. It moves the descriptor's
    // file position, which no I/O on it uses (all of it is positioned).
    let hole = unsafe { libc::lseek(f.as_raw_fd(), from, libc::SEEK_HOLE) };
    u64::try_from(hole)
        .ok()
        .and_then(|hole| hole.checked_sub(zone_start))
        .map_or(z.written_bytes, |w| {
            w.clamp(
                z.written_bytes,
                geometry.zone_capacity_bytes.max(z.written_bytes),
            )
        })
}

/// How a zeroing job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The zeros were written.
    Written,
    /// The host refused them (`ENOSPC`, say): planning turns off.
    Failed,
    /// The task was dropped (runtime shutdown) before the write completed.
    Abandoned,
}

/// Per zone, which host blocks are written and which window is being zeroed (kept under the
/// controller lock).
#[derive(Debug)]
pub(super) struct ZeroAhead {
    zones: Vec<ZoneBlocks>,
    /// Zone capacity, bytes.
    capacity: u64,
    /// Windows start and end on multiples of this (the block size, at least 4 KiB: an
    /// `O_DIRECT` write needs the host's block alignment).
    align: u64,
    /// Off: nothing is planned (spec option `zero_ahead=0`, or a zeroing write failed).
    enabled: bool,
}

impl ZeroAhead {
    /// Zones whose host blocks are written up to `written` bytes each (from
    /// [`host_written_to`] at open).
    pub(super) fn new(written: impl IntoIterator<Item = u64>, capacity: u64, block: u64) -> Self {
        ZeroAhead {
            zones: written
                .into_iter()
                .map(|written_to| ZoneBlocks {
                    written_to,
                    ..ZoneBlocks::default()
                })
                .collect(),
            capacity,
            align: block.max(4096),
            enabled: true,
        }
    }

    /// Turns planning on or off (windows being zeroed still complete).
    pub(super) fn set_enabled(&mut self, on: bool) {
        self.enabled = on;
    }

    /// Whether planning is on.
    pub(super) fn enabled(&self) -> bool {
        self.enabled
    }

    /// After a write of `len` bytes was reserved in `zone` up to `end` (the zone's write
    /// pointer now): the window to zero next, marked as being zeroed, if the write is short,
    /// comes within [`LOOKAHEAD_BYTES`] of the written host blocks and no window of the zone
    /// is being zeroed.
    pub(super) fn plan(&mut self, zone: u32, end: u64, len: u64) -> Option<Job> {
        if !self.enabled || len > TRIGGER_WRITE_BYTES_MAX {
            return None;
        }
        let capacity_end = self.capacity / self.align * self.align;
        let z = self.zones.get_mut(zone as usize)?;
        if z.zeroing.is_some() || end.saturating_add(LOOKAHEAD_BYTES) <= z.written_to {
            return None;
        }
        let start = z.written_to.max(end).div_ceil(self.align) * self.align;
        let stop = start.saturating_add(WINDOW_BYTES).min(capacity_end);
        if start >= stop {
            return None;
        }
        z.zeroing = Some(start..stop);
        Some(Job {
            zone,
            range: start..stop,
            punches: z.punches,
        })
    }

    /// Whether a write of `len` bytes at `at` (the zone's write pointer) must wait: it
    /// reaches into the window being zeroed.
    pub(super) fn holds_back(&self, zone: u32, at: u64, len: u64) -> bool {
        self.zones
            .get(zone as usize)
            .and_then(|z| z.zeroing.as_ref())
            .is_some_and(|w| at < w.end && at.saturating_add(len) > w.start)
    }

    /// A zeroing job ended. A failed one turns planning off: the host refuses (`ENOSPC`,
    /// say), and writes go on into unallocated blocks.
    pub(super) fn finished(&mut self, job: &Job, outcome: Outcome) {
        let Some(z) = self.zones.get_mut(job.zone as usize) else {
            return;
        };
        if z.zeroing.as_ref() == Some(&job.range) {
            z.zeroing = None;
        }
        if outcome == Outcome::Failed {
            self.enabled = false;
        } else if outcome == Outcome::Written && z.punches == job.punches {
            // The blocks between the written ones and the window belong to writes reserved
            // before it was planned. Counting them as written is a hint only: if one of those
            // writes fails, its blocks are allocated by a later write.
            z.written_to = z.written_to.max(job.range.end);
        }
    }

    /// Data was written to `zone` up to `end`.
    pub(super) fn wrote(&mut self, zone: u32, end: u64) {
        if let Some(z) = self.zones.get_mut(zone as usize) {
            z.written_to = z.written_to.max(end);
        }
    }

    /// The host blocks of `zone` past `write_pointer` (rounded up to the alignment) that are
    /// written, if any and if no window of the zone is being zeroed: space to give back when
    /// the host filesystem is full (see [`ZeroAhead::gave_back`]).
    pub(super) fn give_back(&self, zone: u32, write_pointer: u64) -> Option<Range<u64>> {
        let z = self.zones.get(zone as usize)?;
        let start = write_pointer.div_ceil(self.align) * self.align;
        (z.zeroing.is_none() && start < z.written_to).then_some(start..z.written_to)
    }

    /// A hole was punched over `range` of `zone` (from [`ZeroAhead::give_back`]).
    pub(super) fn gave_back(&mut self, zone: u32, range: Range<u64>) {
        if let Some(z) = self.zones.get_mut(zone as usize) {
            z.written_to = z.written_to.min(range.start);
            z.punches += 1;
        }
    }

    /// A hole was punched over the whole zone: none of its blocks is written.
    pub(super) fn punched(&mut self, zone: u32) {
        if let Some(z) = self.zones.get_mut(zone as usize) {
            z.written_to = 0;
            z.punches += 1;
        }
    }
}

/// Ends a zeroing job when dropped: marks it finished with its outcome and wakes the
/// zone's writes waiting for it, also when the runtime drops the task unfinished or before
/// it ever ran (the guard is made before the task is spawned).
struct Zeroing {
    dev: EmuDevice,
    job: Job,
    outcome: Outcome,
}

impl Drop for Zeroing {
    fn drop(&mut self) {
        let waiters: Vec<Waker> = {
            let mut c = self.dev.controller();
            c.zero_ahead.finished(&self.job, self.outcome);
            c.take_waiters(self.job.zone)
        };
        waiters.into_iter().for_each(Waker::wake);
    }
}

impl EmuDevice {
    /// The host filesystem is full: stops zeroing ahead and gives back the space of every
    /// zone's host blocks past its write pointer (zeros written ahead, or data from before
    /// a reset), so that a write that failed for want of space the zeros took can be tried
    /// again. Returns whether it punched anything. Done under the controller mutex, so no
    /// write can be reserved past a write pointer meanwhile (its `fallocate`s hold it, once
    /// per write that finds the filesystem full). It punches stale data past the write
    /// pointers also when zeroing ahead is off.
    pub(super) fn give_back_space_ahead(&self) -> bool {
        let mut c = self.controller();
        if c.zero_ahead.enabled() {
            tracing::warn!(path = %self.inner.path.display(), "the host filesystem is full: zeroing ahead of short writes turned off, the space past the write pointers given back");
        }
        c.zero_ahead.set_enabled(false);
        let mut punched = false;
        for zone in 0..self.inner.geometry.zone_count {
            let Ok(info) = c.table.info(zone) else {
                continue;
            };
            let Some(range) = c.zero_ahead.give_back(zone, info.write_pointer_bytes) else {
                continue;
            };
            if let Err(e) = self.punch_hole(zone, range.clone()) {
                tracing::debug!(path = %self.inner.path.display(), zone, error = %e, "the filesystem does not punch holes");
                return punched;
            }
            c.zero_ahead.gave_back(zone, range);
            punched = true;
        }
        punched
    }

    /// Writes `job`'s zeros in a task of its own on this core.
    pub(super) fn start_zeroing(&self, job: Job) {
        let zeroing = Zeroing {
            dev: self.clone(),
            job,
            outcome: Outcome::Abandoned,
        };
        ziob_runtime::spawn(zeroing.run()).detach();
    }
}

impl Zeroing {
    async fn run(mut self) {
        let dev = self.dev.clone();
        let zone = self.job.zone;
        let range = self.job.range.clone();
        let len = (range.end - range.start) as usize;
        let pos = dev.data_pos(zone, range.start);
        let (res, _) = dev.inner.file.write_all_at(DmaBuf::zeroed(len), pos).await;
        match res {
            Ok(()) => {
                dev.inner
                    .zeroed_ahead
                    .fetch_add(len as u64, Ordering::Relaxed);
                self.outcome = Outcome::Written;
            }
            Err(e) => {
                self.outcome = Outcome::Failed;
                tracing::warn!(
                    path = %dev.inner.path.display(),
                    zone,
                    error = %e,
                    "zeroing ahead of short writes failed; turned off for this device"
                );
                // Zeros that did land hold host space a write may need; no write is in the
                // window until it is marked finished.
                let _ = dev.punch_hole(zone, range);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    fn fresh(zones: usize) -> ZeroAhead {
        ZeroAhead::new(vec![0; zones], 64 * MIB, 4096)
    }

    #[test]
    fn a_short_write_plans_the_window_past_the_write_pointer() {
        let mut z = fresh(2);
        let job = z.plan(1, 8192, 4096).expect("planned");
        let first = 8192;
        assert_eq!(
            job.range,
            first..first + WINDOW_BYTES,
            "right past the write"
        );
        assert!(z.plan(1, 12288, 4096).is_none(), "one window at a time");
        assert!(z.holds_back(1, WINDOW_BYTES, 4096));
        assert!(
            z.holds_back(1, first - 4096, 8192),
            "reaches into the window"
        );
        assert!(!z.holds_back(1, first - 4096, 4096), "below the window");
        assert!(!z.holds_back(0, WINDOW_BYTES, 4096), "another zone");
        z.finished(&job, Outcome::Written);
        assert!(!z.holds_back(1, WINDOW_BYTES, 4096));
        // Far from the written end: nothing; close to it: the next window, right after.
        assert!(z.plan(1, 12288, 4096).is_none());
        let next = z.plan(1, WINDOW_BYTES, 4096).expect("next window");
        assert_eq!(next.range.start, first + WINDOW_BYTES);
    }

    #[test]
    fn long_writes_and_a_disabled_device_plan_nothing() {
        let mut z = fresh(1);
        assert!(z.plan(0, 256 * 1024, 256 * 1024).is_none());
        z.set_enabled(false);
        assert!(z.plan(0, 4096, 4096).is_none());
    }

    #[test]
    fn windows_stop_at_the_zone_capacity_and_are_aligned() {
        let mut z = ZeroAhead::new(vec![MIB + 512], 3 * MIB / 2 + 512, 512);
        let job = z.plan(0, MIB + 512, 512).expect("planned");
        assert_eq!(job.range, MIB + 4096..3 * MIB / 2);
        z.finished(&job, Outcome::Written);
        assert!(
            z.plan(0, 3 * MIB / 2, 512).is_none(),
            "nothing left to zero"
        );
    }

    #[test]
    fn a_punch_while_zeroing_keeps_the_blocks_unwritten() {
        let mut z = fresh(1);
        let job = z.plan(0, 4096, 4096).unwrap();
        z.punched(0);
        z.finished(&job, Outcome::Written);
        let again = z.plan(0, 4096, 4096).expect("zeroed again after the punch");
        assert_eq!(again.range.start, 4096);
    }

    #[test]
    fn space_given_back_is_past_the_write_pointer_and_not_being_zeroed() {
        let mut z = fresh(2);
        let job = z.plan(0, 4096, 4096).unwrap();
        assert_eq!(z.give_back(0, 4096), None, "being zeroed");
        z.finished(&job, Outcome::Written);
        let end = 4096 + WINDOW_BYTES;
        assert_eq!(z.give_back(0, 4000), Some(4096..end));
        z.gave_back(0, 4096..end);
        assert_eq!(z.give_back(0, 4096), None);
        assert_eq!(z.give_back(1, 0), None, "nothing written");
        z.wrote(1, 8192);
        assert_eq!(z.give_back(1, 0), Some(0..8192), "data from before a reset");
    }

    #[test]
    fn a_zeroing_task_dropped_before_it_ran_frees_its_window() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.zns");
        crate::emu::tests::on_core(move || async move {
            let g = crate::model::geometry::Geometry::new(2, 4 * MIB);
            let dev = EmuDevice::create(&path, &g).await.unwrap();
            let job = dev.controller().zero_ahead.plan(0, 4096, 4096).unwrap();
            let zeroing = Zeroing {
                dev: dev.clone(),
                job,
                outcome: Outcome::Abandoned,
            };
            // What a runtime shutdown does to a zeroing task still queued.
            drop(zeroing.run());
            let c = dev.controller();
            assert!(!c.zero_ahead.holds_back(0, 8192, 4096), "window still held");
            assert!(
                c.zero_ahead.enabled(),
                "an abandoned window is no host failure"
            );
        });
    }

    /// Bytes from the start of `zone` to the first hole at or past `offset` in `dev`'s file.
    fn hole_from(dev: &EmuDevice, zone: u32, offset: u64) -> u64 {
        let start = dev.data_pos(zone, 0);
        let f = std::fs::File::open(&dev.inner.path).unwrap();
        // SAFETY: lseek on a descriptor `f` owns; no memory is passed.
        let hole = unsafe {
            libc::lseek(
                f.as_raw_fd(),
                (start + offset) as libc::off_t,
                libc::SEEK_HOLE,
            )
        };
        assert!(hole >= 0, "{}", std::io::Error::last_os_error());
        hole as u64 - start
    }

    #[test]
    fn a_full_host_gets_the_space_past_the_write_pointers_back() {
        // /var/tmp: /tmp may be a tmpfs, whose holes work too but whose space is memory.
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let path = dir.path().join("d.zns");
        crate::emu::tests::on_core(move || async move {
            let g = crate::model::geometry::Geometry::new(2, 4 * MIB);
            let dev = EmuDevice::create(&path, &g).await.unwrap();
            let data = DmaBuf::from_slice(&[5; 4096]);
            dev.write_reserved(
                dev.reserve(0, 4096, |t| t.begin_append(0, 4096)).await,
                data,
            )
            .await
            .0
            .unwrap();
            while dev.zeroed_ahead_bytes() < WINDOW_BYTES {
                ziob_runtime::sleep(std::time::Duration::from_millis(1))
                    .await
                    .unwrap();
            }
            assert!(hole_from(&dev, 0, 0) >= 4096 + WINDOW_BYTES, "zeroed ahead");
            assert!(dev.give_back_space_ahead(), "something given back");
            assert_eq!(hole_from(&dev, 0, 0), 4096, "the data stays, the zeros go");
            assert!(!dev.controller().zero_ahead.enabled(), "turned off");
            assert!(!dev.give_back_space_ahead(), "nothing left to give back");
        });
    }

    #[test]
    fn a_failed_zeroing_turns_planning_off() {
        let mut z = fresh(1);
        let job = z.plan(0, 4096, 4096).unwrap();
        z.finished(&job, Outcome::Failed);
        assert!(!z.enabled());
        assert!(!z.holds_back(0, 8192, 4096));
        assert!(z.plan(0, 8192, 4096).is_none());
    }
}
