//! Memory touched before the timed work: [`prefault`] writes a block of the allocator's
//! memory once and frees it, so that the kernel's first touch of each page (a fault and a
//! page zeroed, 2 MiB at a time with transparent huge pages) is paid then, not by the first
//! writes that need the memory. [`keep_freed_memory`] (feature `mimalloc`) makes mimalloc
//! keep freed pages, without which the prefaulted pages go back to the kernel at once.
//!
//! On this project's VM the first touch of memory another process had just freed cost
//! a 100,000 × 1 KiB fillseq most of its time (kv-demo: docs/KV-BENCH.md section 15;
//! the RocksDB plugin: docs/ROCKSDB-BENCH.md section 3g). Users: the `kv-demo` binary's
//! `--prefault_memory` and the plugin's `prefault=` URI option.

use std::time::{Duration, Instant};

/// Bytes between two pages the prefault writes to (one byte each faults the page in).
const PAGE_BYTES: usize = 4096;

/// The prefault allocates its memory in pieces of at most this size, all held until every
/// one is written: mimalloc reserves its memory in arenas of 1 GiB, and a single allocation
/// larger than that may come from the kernel directly and go back on free. Not smaller:
/// the pages of 32 MiB pieces were reused by later allocations only in part (a plugin
/// mount's 152 MiB: 27 MiB of 58 MiB written afterwards still grew the resident memory,
/// against 0.2–4 MiB after one block).
const PIECE_BYTES: usize = 256 << 20;

/// How much memory to prefault: a user's own budget, or a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefault {
    /// The user's budget of the memory it configures (the `kv-demo` binary's, the RocksDB
    /// plugin's).
    Auto,
    /// This many bytes (0 = none).
    Bytes(u64),
}

/// What a prefault did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefaulted {
    /// Bytes written.
    pub bytes: u64,
    /// Bytes asked for beyond half of the memory available: not written.
    pub capped_bytes: u64,
    /// How much the process's resident memory grew over the call (what stayed faulted in
    /// after the block was freed); `None` if `/proc/self/status` could not tell.
    pub resident_growth: Option<u64>,
    /// Bytes left out because another thread faulted in memory of its own meanwhile
    /// ([`prefault_less`]'s `less`; 0 for [`prefault`]).
    pub left_out_bytes: u64,
    /// How long it took.
    pub took: Duration,
}

/// Bytes of `/proc/meminfo`'s field `name` (e.g. `MemAvailable`), if it is there.
fn meminfo_bytes(name: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.split(':').next() == Some(name))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Bytes this process's cgroup (v2) may still take: `memory.max` less `memory.current`;
/// `None` without a limit or where the cgroup files cannot be read.
fn cgroup_room_bytes() -> Option<u64> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cgroups.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = std::path::Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let max: u64 = read("memory.max")?.trim().parse().ok()?;
    let current: u64 = read("memory.current")?.trim().parse().ok()?;
    Some(max.saturating_sub(current))
}

/// Memory this process can take without pushing others out: `MemAvailable` of
/// `/proc/meminfo`, or less if the process's cgroup (v2) has a memory limit closer; `None`
/// when `/proc/meminfo` cannot tell.
pub fn available_bytes() -> Option<u64> {
    Some(within_room(
        meminfo_bytes("MemAvailable")?,
        cgroup_room_bytes(),
    ))
}

/// `system` bytes available, at most the cgroup's `room` when it has a limit.
fn within_room(system: u64, room: Option<u64>) -> u64 {
    room.map_or(system, |room| room.min(system))
}

/// This process's resident bytes (`VmRSS` of `/proc/self/status`), if known.
pub fn resident_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// `bytes`, at most half of `available`.
fn capped_to(bytes: u64, available: u64) -> u64 {
    bytes.min(available / 2)
}

/// Allocates `bytes` (at most half of [`available_bytes`], so that a large request cannot
/// bring the out-of-memory killer), writes a byte in every page of them and frees them.
/// Prefaults run one at a time in a process: a call waits for one running on another thread.
/// `None` when the memory available is unknown (no `/proc/meminfo`) or an allocation
/// failed: then nothing stays allocated (pieces written before a failed one are freed).
///
/// The pages serve later allocations only if the allocator keeps freed memory (see
/// [`keep_freed_memory`]); with one that gives it back, this only costs time.
pub fn prefault(bytes: u64) -> Option<Prefaulted> {
    prefault_less(bytes, || 0)
}

/// [`prefault`], less what another thread faults in meanwhile for memory of its own: before
/// each piece, `less()` says how many bytes that is so far, and the prefault writes only
/// what is left of `bytes` after them. The RocksDB plugin's read-cache warm-up runs beside
/// its mount's prefault this way, so that the two together touch the budget once.
pub fn prefault_less(bytes: u64, less: impl Fn() -> u64) -> Option<Prefaulted> {
    prefault_in_pieces(bytes, PIECE_BYTES, less)
}

/// Held by a prefault from before it reads the memory available until its pieces are freed:
/// prefaults run one at a time, so that each one's cap (half of what is available) sees the
/// pages the one before kept. Two at once (the plugin mounting two devices from two
/// threads) would each take half of the same figure.
static PREFAULTING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// [`prefault_less`] in pieces of at most `piece_bytes`.
fn prefault_in_pieces(
    bytes: u64,
    piece_bytes: usize,
    less: impl Fn() -> u64,
) -> Option<Prefaulted> {
    // Nothing it guards can be left broken by a panic: a poisoned lock is taken as it is.
    let _one_at_a_time = PREFAULTING.lock().unwrap_or_else(|e| e.into_inner());
    let start = Instant::now();
    let take = capped_to(bytes, available_bytes()?);
    let before = resident_bytes();
    let mut written: u64 = 0;
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    loop {
        let wanted = take.saturating_sub(less());
        if written >= wanted {
            break;
        }
        let len = usize::try_from(wanted - written).ok()?.min(piece_bytes);
        let mut piece: Vec<u8> = Vec::new();
        piece.try_reserve_exact(len).ok()?;
        // One byte written per page faults it in (a whole huge page where the kernel gives
        // one); not zeroed by the allocator: memory fresh from the kernel is known to be
        // zero and `calloc` would skip it. The spare capacity is written, the length stays 0.
        for byte in piece.spare_capacity_mut().iter_mut().step_by(PAGE_BYTES) {
            byte.write(1);
        }
        pieces.push(piece);
        written += len as u64;
    }
    std::hint::black_box(&mut pieces);
    drop(pieces);
    let resident_growth = match (before, resident_bytes()) {
        (Some(b), Some(a)) => Some(a.saturating_sub(b)),
        _ => None,
    };
    Some(Prefaulted {
        bytes: written,
        capped_bytes: bytes - take,
        left_out_bytes: take.saturating_sub(written),
        resident_growth,
        took: start.elapsed(),
    })
}

/// mimalloc's `mi_option_purge_delay`: its index in `mi_option_t` (`mimalloc.h` of v2 and
/// v3; libmimalloc-sys names no constant for it). A test checks it against the option the
/// environment variable `MIMALLOC_PURGE_DELAY` sets.
#[cfg(feature = "mimalloc")]
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Makes mimalloc keep memory that was freed instead of giving it back to the kernel 10 ms
/// later (its default), unless `MIMALLOC_PURGE_DELAY` (or `MIMALLOC_RESET_DELAY`) says
/// otherwise; the option is set once per process, by the first call. Returns whether freed
/// memory is now kept (also when the variable sets a negative delay). The process's
/// footprint is then its peak, as with glibc's heap.
///
/// It sets the option of the mimalloc linked into this binary or shared object, and means
/// something only where that one declares mimalloc its `#[global_allocator]` (the
/// `kv-demo` binary, `libziob_rocksdb.so`): with the feature on and another allocator, it
/// still returns `true`. Call it before the threads that allocate start: mimalloc reads
/// its options without synchronisation. Why: a kv-demo memtable's 16 MiB of entries
/// are freed after their flush while the next memtable fills; mimalloc gave those pages
/// back and took fresh ones, 430–480 MiB over a 100,000 × 1 KiB fillseq, fillrandom,
/// overwrite, each faulted in and zeroed again (docs/KV-BENCH.md section 14).
#[cfg(feature = "mimalloc")]
pub fn keep_freed_memory() -> bool {
    // Its older name, `MIMALLOC_RESET_DELAY`, sets the same option.
    let given = ["MIMALLOC_PURGE_DELAY", "MIMALLOC_RESET_DELAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
    static SET: std::sync::Once = std::sync::Once::new();
    if !given {
        SET.call_once(|| {
            // SAFETY: `mi_option_set` stores one aligned word in mimalloc's table of
            // options and touches no memory of ours. mimalloc reads (and on first use
            // initialises) its options from any thread without synchronisation, so a
            // store while other threads allocate races on that word as mimalloc's own
            // lazy initialisation does: it is made once per process (`Once`), and callers
            // make it before their threads start where they can (a second device mounted
            // later by the plugin cannot).
            unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
        });
    }
    freed_memory_kept()
}

/// Whether mimalloc keeps freed memory now: its purge delay is negative (set by
/// [`keep_freed_memory`], or `MIMALLOC_PURGE_DELAY=-1`).
#[cfg(feature = "mimalloc")]
pub fn freed_memory_kept() -> bool {
    // SAFETY: `mi_option_get` reads an option's value.
    unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) < 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefault_takes_at_most_half_of_the_memory_available() {
        assert_eq!(capped_to(u64::MAX, 10 << 30), 5 << 30);
        assert_eq!(capped_to(1 << 20, 10 << 30), 1 << 20);
        assert!(meminfo_bytes("MemAvailable").is_some_and(|a| a > 0));
        let p = prefault(1 << 20).unwrap();
        assert_eq!((p.bytes, p.capped_bytes), (1 << 20, 0));
        assert!(resident_bytes().is_some_and(|r| r > 0));
        // The cgroup's room caps the system's figure. (Not checked against a second read of
        // `MemAvailable`: other processes change it between two reads.)
        assert_eq!(within_room(10 << 30, None), 10 << 30);
        assert_eq!(within_room(10 << 30, Some(4 << 30)), 4 << 30);
        assert_eq!(within_room(10 << 30, Some(40 << 30)), 10 << 30);
        assert!(available_bytes().is_some_and(|a| a > 0));
        // More than one piece, and a last piece shorter than the others.
        let p = prefault_in_pieces(5 << 20, 2 << 20, || 0).unwrap();
        assert_eq!((p.bytes, p.capped_bytes, p.left_out_bytes), (5 << 20, 0, 0));
    }

    #[test]
    fn prefaults_run_one_at_a_time() {
        // While one prefault runs (inside its `less`), a second one started from another
        // thread must not get as far as its own `less` (which it calls after reading the
        // memory available): it waits until the first is over, then runs.
        use std::sync::mpsc;
        use std::time::Duration;
        let (entered_tx, entered_rx) = mpsc::channel::<()>();
        let second = std::cell::RefCell::new(None);
        let first = prefault_less(1 << 20, || {
            if second.borrow().is_none() {
                let tx = entered_tx.clone();
                *second.borrow_mut() = Some(std::thread::spawn(move || {
                    prefault_less(1 << 20, || {
                        let _ = tx.send(());
                        0
                    })
                }));
                assert_eq!(
                    entered_rx.recv_timeout(Duration::from_millis(300)),
                    Err(mpsc::RecvTimeoutError::Timeout),
                    "a second prefault ran beside the first"
                );
            }
            0
        });
        assert_eq!(first.unwrap().bytes, 1 << 20);
        let second = second.into_inner().unwrap().join().unwrap();
        assert_eq!(second.unwrap().bytes, 1 << 20);
        assert!(entered_rx.try_recv().is_ok());
    }

    #[test]
    fn a_prefault_leaves_out_what_another_thread_faulted_in_before_each_piece() {
        // Another thread faults in one piece's worth between two of ours: of ten pieces asked
        // for, five are written (after the fifth, five more were faulted in elsewhere).
        let piece = 64 << 10;
        let calls = std::cell::Cell::new(0u64);
        let less = || {
            let n = calls.get();
            calls.set(n + 1);
            n * piece as u64
        };
        let p = prefault_in_pieces(10 * piece as u64, piece, less).unwrap();
        assert_eq!(p.bytes, 5 * piece as u64);
        assert_eq!(p.left_out_bytes, 5 * piece as u64);
        assert_eq!(p.capped_bytes, 0);
        // What is left after `less` need not be whole pieces; more than asked leaves nothing.
        let p = prefault_in_pieces(10 * piece as u64, piece, || piece as u64 / 2).unwrap();
        assert_eq!(p.bytes, 10 * piece as u64 - piece as u64 / 2);
        assert_eq!(prefault_less(1 << 20, || 2 << 20).unwrap().bytes, 0);
    }

    /// The variable `MIMALLOC_PURGE_DELAY` sets option `MI_OPTION_PURGE_DELAY`: this test
    /// runs itself again (its own test binary, this test only) with the variable set, and
    /// the copy reads the option back.
    #[cfg(feature = "mimalloc")]
    #[test]
    fn the_purge_delay_index_is_the_option_the_environment_sets() {
        const NAME: &str =
            "prefault::tests::the_purge_delay_index_is_the_option_the_environment_sets";
        if std::env::var_os("ZIOB_PURGE_DELAY_CHILD").is_some() {
            // SAFETY: `mi_option_get` reads an option's value.
            let got = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
            assert_eq!(
                got, 4321,
                "option {MI_OPTION_PURGE_DELAY} is not the purge delay"
            );
            // The variable wins over ours.
            assert!(!keep_freed_memory());
            return;
        }
        crate::testing::rerun_test_in_child(
            NAME,
            &[
                ("ZIOB_PURGE_DELAY_CHILD", "1"),
                ("MIMALLOC_PURGE_DELAY", "4321"),
            ],
        );
    }
}
