//! The device lock of an emu file: one `flock` per file per process.
//!
//! Processes exclude each other: a read-write open takes an exclusive lock, a read-only open a
//! shared one, and a conflicting open is [`DeviceError::Busy`]. Opens within one process share
//! the process's lock, with one rule of their own: at most one read-write device per file per
//! process (two would keep two zone tables and each flush would undo the other's writes), so a
//! second read-write open while the first device (or a clone of it) lives is
//! [`DeviceError::Busy`] (after the same retrying as a conflict with another process: a device
//! whose last clones are held by its writes, flushes, zone actions or zeros written ahead in
//! flight goes away once they complete; only
//! then can a reopen be sure none of them lands after it); read-only opens share with
//! anything. A test that reopens a device to
//! simulate a crash drops the first one before. A read-write open upgrades a shared lock the
//! process holds; when the upgrade fails (another process reads the file), the shared lock is
//! taken again at once, so the process's read-only devices stay protected (Linux drops the
//! shared lock of a failed non-blocking upgrade; only a writer that got the file in that
//! instant could take it, and then the failure is logged).
//!
//! The lock is taken on a descriptor of its own, which no I/O ever uses: the kernel releases a
//! `flock` with the last reference to its open file description, and the io_uring of a killed
//! process keeps references to the files of its in-flight ops until it is torn down. The lock
//! descriptor has none, so it goes the moment the process dies.

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::emu::open::{io_err, OpenMode};
use crate::limits::EMU_LOCK_RETRY;
use crate::model::error::{DeviceError, Result};

/// A file's identity: device and inode numbers.
type FileKey = (u64, u64);

/// The locks this process holds, by file.
static LOCKS: Mutex<BTreeMap<FileKey, Weak<DeviceLock>>> = Mutex::new(BTreeMap::new());

fn locks() -> std::sync::MutexGuard<'static, BTreeMap<FileKey, Weak<DeviceLock>>> {
    LOCKS.lock().unwrap_or_else(|p| p.into_inner())
}

/// This process's lock on one emu file; released when the last device sharing it is dropped.
pub(crate) struct DeviceLock {
    key: FileKey,
    /// The descriptor the `flock` is on (used for nothing else).
    file: std::fs::File,
    /// Whether the lock is exclusive (else shared).
    exclusive: Mutex<bool>,
    /// Whether a read-write device of this process has the file open ([`DeviceClaim`]).
    writer: AtomicBool,
}

/// A device's share of its process's lock: held by the device (all its clones) and released
/// with it. A read-write device's claim is the process's only one ([`DeviceLock::writer`]).
pub(crate) struct DeviceClaim {
    lock: Arc<DeviceLock>,
    writer: bool,
}

impl Drop for DeviceClaim {
    fn drop(&mut self) {
        if self.writer {
            self.lock.writer.store(false, Ordering::Release);
        }
    }
}

impl Drop for DeviceLock {
    fn drop(&mut self) {
        let mut map = locks();
        if map.get(&self.key).is_some_and(|w| w.strong_count() == 0) {
            map.remove(&self.key);
        }
        // Closing `file` releases the flock.
    }
}

/// Outcome of one non-blocking `flock` attempt.
enum Attempt {
    Taken,
    Conflict,
}

fn try_flock(path: &Path, f: &std::fs::File, exclusive: bool) -> Result<Attempt> {
    let op = if exclusive {
        libc::LOCK_EX
    } else {
        libc::LOCK_SH
    } | libc::LOCK_NB;
    loop {
        // SAFETY: flock on a descriptor `f` owns; no memory is passed.
        if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
            return Ok(Attempt::Taken);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) => return Ok(Attempt::Conflict),
            _ => return Err(io_err(path, "flock", e)),
        }
    }
}

/// Takes (or shares) this process's lock on the file `io` is open on, for `mode`. A conflict
/// with another process is retried for up to [`EMU_LOCK_RETRY`] (sleeping on the runtime),
/// then reported as [`DeviceError::Busy`]; so is a read-write open while this process has a
/// read-write device on the file (retried as long: a device whose last clones are held by its
/// writes still in flight goes away when they complete).
pub(crate) async fn acquire(
    path: &Path,
    io: &std::fs::File,
    mode: OpenMode,
) -> Result<DeviceClaim> {
    let meta = io.metadata().map_err(|e| io_err(path, "stat", e))?;
    let key = (meta.dev(), meta.ino());
    let exclusive = mode == OpenMode::ReadWrite;
    let start = std::time::Instant::now();
    loop {
        let mut writer_here = false;
        if let Some(lock) = try_acquire(path, key, exclusive)? {
            if !(exclusive && lock.writer.swap(true, Ordering::AcqRel)) {
                return Ok(DeviceClaim {
                    lock,
                    writer: exclusive,
                });
            }
            writer_here = true;
        }
        if start.elapsed() >= EMU_LOCK_RETRY {
            let holder = if writer_here {
                "this process has it open read-write already (drop that device first)"
            } else if exclusive {
                "another process has it open (a read-write open needs it alone)"
            } else {
                "another process has it open read-write"
            };
            return Err(DeviceError::Busy {
                path: path.display().to_string(),
                holder: holder.into(),
            });
        }
        let _ = ziob_runtime::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// One attempt: `None` on a conflict with another process.
fn try_acquire(path: &Path, key: FileKey, exclusive: bool) -> Result<Option<Arc<DeviceLock>>> {
    let mut map = locks();
    if let Some(lock) = map.get(&key).and_then(Weak::upgrade) {
        let mut held_exclusive = lock.exclusive.lock().unwrap_or_else(|p| p.into_inner());
        if exclusive && !*held_exclusive {
            match try_flock(path, &lock.file, true)? {
                Attempt::Taken => *held_exclusive = true,
                Attempt::Conflict => {
                    // The failed upgrade dropped the shared lock: take it back for the
                    // process's read-only devices.
                    if !matches!(try_flock(path, &lock.file, false), Ok(Attempt::Taken)) {
                        tracing::error!(path = %path.display(), "lost the shared lock of the read-only devices after a failed upgrade (a writer took the file)");
                    }
                    return Ok(None);
                }
            }
        }
        drop(held_exclusive);
        return Ok(Some(lock));
    }
    // A descriptor of its own for the lock (read-only is enough for both lock kinds).
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| io_err(path, "open (for the lock)", e))?;
    let meta = file.metadata().map_err(|e| io_err(path, "stat", e))?;
    if (meta.dev(), meta.ino()) != key {
        return Err(DeviceError::Busy {
            path: path.display().to_string(),
            holder: "the file was replaced while it was being opened".into(),
        });
    }
    match try_flock(path, &file, exclusive)? {
        Attempt::Conflict => Ok(None),
        Attempt::Taken => {
            let lock = Arc::new(DeviceLock {
                key,
                file,
                exclusive: Mutex::new(exclusive),
                writer: AtomicBool::new(false),
            });
            map.insert(key, Arc::downgrade(&lock));
            Ok(Some(lock))
        }
    }
}
