//! Futures dropped at an await (a caller's `create`, `append` or `delete` cancelled): the
//! file system must neither hang, nor lose or replay journal deltas, nor leave a zone that is
//! never reset. Each scenario polls an operation by hand until it waits on the device, then
//! drops it; the device I/O was sent to a ZIOB core, so the first poll finds it pending.
//! The last one drives commits by hand into an order threads rarely hit (a zone reset
//! racing a queued delta).

mod support;

use std::pin::pin;

use futures::poll;
use support::{b, bounded, end, open, runtime, EmuFile};
use ziob::{Client, Runtime, ZiobConfig};
use ziob_zonefs::{FsckProblem, MkfsOptions, WriteLifetime, ZoneFs, ZoneUse};

const SPEC: &str = "mem:zones=16,zone_size=64K";

fn fresh(rt: &Runtime) -> (Client, ZoneFs) {
    let client = b(Client::open(rt.handle(), SPEC, ZiobConfig::default())).unwrap();
    b(ZoneFs::mkfs(&client, MkfsOptions::default())).unwrap();
    let fs = b(ZoneFs::mount(client.clone())).unwrap();
    (client, fs)
}

/// The data zones that are not free.
fn used_zones(fs: &ZoneFs) -> Vec<(u32, ZoneUse, u64, u64)> {
    b(fs.zones())
        .into_iter()
        .filter(|z| !matches!(z.1, ZoneUse::Free | ZoneUse::Unusable))
        .collect()
}

/// A commit leading a journal batch is dropped inside its journal write while another commit
/// waits for the same batch: the waiter must finish (before the fix it spun forever: the
/// batch was off the queue but never durable), and a remount finds all three files.
#[test]
fn a_commit_dropped_in_its_journal_write_neither_hangs_nor_loses_deltas() {
    bounded(60, || {
        let rt = runtime(1);
        let mut ran = 0;
        for _ in 0..4 {
            let (client, fs) = fresh(&rt);
            let happened = b(async {
                // `lead` holds the journal lock in its write while the other two queue.
                let mut lead = pin!(fs.create("lead", WriteLifetime::Short));
                if poll!(lead.as_mut()).is_ready() {
                    // The journal answered at once: no scenario this round.
                    fs.create("dropped", WriteLifetime::Short).await.unwrap();
                    fs.create("waiter", WriteLifetime::Short).await.unwrap();
                    return false;
                }
                let mut dropped = Box::pin(fs.create("dropped", WriteLifetime::Short));
                let mut waiter = pin!(fs.create("waiter", WriteLifetime::Short));
                assert!(poll!(dropped.as_mut()).is_pending());
                assert!(poll!(waiter.as_mut()).is_pending());
                lead.await.unwrap();
                // `dropped` now leads the batch of both deltas; it is dropped in its write.
                if poll!(dropped.as_mut()).is_ready() {
                    waiter.await.unwrap();
                    return false;
                }
                drop(dropped);
                waiter.await.unwrap();
                // The file system goes on.
                fs.create("after", WriteLifetime::Short).await.unwrap();
                true
            });
            if happened {
                ran += 1;
            }
            drop(fs);
            let fs = b(ZoneFs::mount(client.clone())).unwrap();
            for name in ["lead", "dropped", "waiter"] {
                assert!(b(fs.exists(name)).unwrap(), "{name} lost after remount");
            }
            assert_eq!(b(fs.exists("after")).unwrap(), happened);
            let report = b(fs.fsck()).unwrap();
            assert!(report.is_clean(), "{report:?}");
        }
        assert!(ran > 0, "the dropped write never happened");
    });
}

/// An append dropped while its device append is in flight: the zone it was writing to must
/// still be reset once no file holds data in it (before the fix its in-flight count stayed
/// up and the zone was never reset nor garbage collected).
#[test]
fn an_append_dropped_in_flight_leaves_no_zone_behind() {
    bounded(60, || {
        let rt = runtime(1);
        // The first poll finds the device append pending unless the core answered at once.
        for _ in 0..20 {
            let (_client, fs) = fresh(&rt);
            let dropped = b(async {
                fs.create("f", WriteLifetime::Short).await.unwrap();
                let mut append = Box::pin(fs.append("f", &[7u8; 3000]));
                let pending = poll!(append.as_mut()).is_pending();
                drop(append);
                fs.append("f", b"abc").await.unwrap();
                fs.sync("f").await.unwrap();
                fs.delete("f").await.unwrap();
                pending
            });
            assert_eq!(used_zones(&fs), vec![], "a zone without live data was kept");
            let report = b(fs.fsck()).unwrap();
            assert!(report.is_clean(), "{report:?}");
            if dropped {
                return;
            }
        }
        panic!("the append was never pending at its first poll");
    });
}

/// A delete dropped in its journal write (so it never resets the zone it emptied): the
/// emptied zone must not be lost for the rest of the mount — garbage collection takes it
/// (before the fix a closed zone without live data was never a victim).
#[test]
fn a_zone_emptied_by_a_dropped_delete_is_reclaimed() {
    bounded(60, || {
        let rt = runtime(1);
        let (client, fs) = fresh(&rt);
        let mut ran = false;
        b(async {
            fs.create("big", WriteLifetime::Short).await.unwrap();
            // Fills its zone exactly: the zone is closed.
            fs.append("big", &vec![1u8; 64 * 1024]).await.unwrap();
            fs.sync("big").await.unwrap();
            let mut delete = Box::pin(fs.delete("big"));
            ran = poll!(delete.as_mut()).is_pending();
        });
        if !ran {
            return;
        }
        assert!(!b(fs.exists("big")).unwrap());
        let report = b(fs.gc(16)).unwrap();
        assert_eq!(report.zones_reclaimed, 1);
        assert_eq!(used_zones(&fs), vec![], "the emptied zone was kept");
        let report = b(fs.fsck()).unwrap();
        assert!(report.is_clean(), "{report:?}");
        drop(fs);
        let fs = b(ZoneFs::mount(client)).unwrap();
        assert!(!b(fs.exists("big")).unwrap());
    });
}

/// Garbage collection dropped after k polls, for k over the whole relocation (so somewhere
/// between its copies and its journal delta): the zone table must still match the files
/// (before the fix the copies counted as live bytes of no file, so the GC zone could never
/// be reset), and the file kept must read back whole, before and after a remount.
#[test]
fn garbage_collection_dropped_anywhere_keeps_the_accounting_true() {
    bounded(120, || {
        let rt = runtime(1);
        let piece = 8 * 1024;
        let keep: Vec<u8> = (0..4 * piece).map(|i| (i % 251) as u8).collect();
        for k in 1..=16 {
            let (client, fs) = fresh(&rt);
            b(async {
                fs.create("keep", WriteLifetime::Short).await.unwrap();
                fs.create("gone", WriteLifetime::Short).await.unwrap();
                // One zone, half of each file, in 8 KiB turns.
                for i in 0..4 {
                    let part = &keep[i * piece..(i + 1) * piece];
                    fs.append("keep", part).await.unwrap();
                    fs.append("gone", &vec![9u8; piece]).await.unwrap();
                }
                fs.sync("keep").await.unwrap();
                fs.sync("gone").await.unwrap();
                fs.delete("gone").await.unwrap();
                let mut gc = Box::pin(fs.gc(1));
                for _ in 0..k {
                    if poll!(gc.as_mut()).is_ready() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
            });
            // A victim emptied but not reset yet is `UnreferencedZone` until the next GC.
            let report = b(fs.fsck()).unwrap();
            assert!(
                !report
                    .problems
                    .iter()
                    .any(|p| matches!(p, FsckProblem::LiveBytesMismatch { .. })),
                "dropped after {k} polls: {report:?}"
            );
            assert_eq!(
                &b(fs.read_at("keep", 0, keep.len())).unwrap()[..],
                &keep[..]
            );
            b(fs.gc(16)).unwrap();
            let report = b(fs.fsck()).unwrap();
            assert!(report.is_clean(), "dropped after {k} polls, gc: {report:?}");
            drop(fs);
            let fs = b(ZoneFs::mount(client)).unwrap();
            assert_eq!(
                &b(fs.read_at("keep", 0, keep.len())).unwrap()[..],
                &keep[..]
            );
        }
    });
}

/// A delete dropped after k polls, for k over the whole call (so somewhere in the reset of
/// the open zone it emptied), then a small file in the same class synced and the instance
/// abandoned (a crash): the synced file must be there after the remount. Before the fix, a
/// reset done on the device but not yet in the zone table left the zone open with its old
/// flushed (now: on-device) offset, so the next sync thought the new bytes (appended from
/// offset 0) already on the device and journaled them without writing them back.
#[test]
fn a_delete_dropped_in_its_reset_keeps_later_syncs_durable() {
    bounded(300, || {
        let rt = runtime(1);
        let small: Vec<u8> = (0..1000).map(|i| (i % 241 + 1) as u8).collect();
        // Each step of the delete takes about one device round trip: polls 1 ms, 2 ms and
        // 4 ms apart reach its reset on a fast or a loaded machine.
        for (k, gap) in (1..=8).flat_map(|k| [1, 2, 4].map(|ms| (k, ms))) {
            let dev = EmuFile::create("cancel-reset", 16, 256 << 10, None);
            let client = open(&rt, &dev.spec(), true);
            b(ZoneFs::mkfs(&client, MkfsOptions::default())).unwrap();
            let fs = b(ZoneFs::mount(client.clone())).unwrap();
            b(async {
                fs.create("a", WriteLifetime::Short).await.unwrap();
                fs.append("a", &vec![5u8; 64 << 10]).await.unwrap();
                fs.sync("a").await.unwrap();
                let mut delete = Box::pin(fs.delete("a"));
                for _ in 0..k {
                    if poll!(delete.as_mut()).is_ready() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(gap));
                }
                drop(delete);
                fs.create("b", WriteLifetime::Short).await.unwrap();
                fs.append("b", &small).await.unwrap();
                fs.sync("b").await.unwrap();
            });
            drop(fs);
            end(client, true);
            let client = open(&rt, &dev.spec(), true);
            let fs = b(ZoneFs::mount(client.clone())).unwrap_or_else(|e| {
                panic!("delete dropped after {k} polls {gap} ms apart: mount: {e}")
            });
            assert_eq!(
                &b(fs.read_at("b", 0, small.len())).unwrap()[..],
                &small[..],
                "delete dropped after {k} polls {gap} ms apart"
            );
            drop(fs);
            end(client, false);
        }
    });
}

/// A zone emptied by a delete whose delta is durable must not be reset while a later delta
/// that emptied it again is still queued: here F's delete empties the open zone Z, G then
/// appends to Z and syncs (its Sync delta in the same batch as F's delete), and G's delete
/// is queued but not written when F's delete resets Z. A crash then must not find G's
/// journaled extent in a reset zone (before the fix the mount refused the file system).
#[test]
fn a_reset_waits_for_every_delta_that_emptied_the_zone() {
    bounded(120, || {
        let rt = runtime(1);
        let mut ran = 0;
        for _ in 0..6 {
            let dev = EmuFile::create("cancel-order", 16, 256 << 10, None);
            let client = open(&rt, &dev.spec(), true);
            b(ZoneFs::mkfs(&client, MkfsOptions::default())).unwrap();
            let fs = b(ZoneFs::mount(client.clone())).unwrap();
            let happened = b(async {
                fs.create("f", WriteLifetime::Short).await.unwrap();
                fs.create("g", WriteLifetime::Short).await.unwrap();
                fs.append("f", &[1u8; 1000]).await.unwrap();
                fs.sync("f").await.unwrap();
                // `lead` holds the journal lock in its write.
                let mut lead = pin!(fs.create("lead", WriteLifetime::Short));
                if poll!(lead.as_mut()).is_ready() {
                    // The journal answered at once: no scenario this round.
                    fs.delete("f").await.unwrap();
                    return false;
                }
                let mut del_f = pin!(fs.delete("f"));
                assert!(poll!(del_f.as_mut()).is_pending());
                fs.append("g", &[2u8; 1000]).await.unwrap();
                let mut sync_g = pin!(fs.sync("g"));
                // Its write-back, then its Sync delta queued behind the journal lock.
                for _ in 0..50 {
                    assert!(poll!(sync_g.as_mut()).is_pending());
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                lead.await.unwrap();
                // F's delete leads the batch of F's delete and G's sync.
                if poll!(del_f.as_mut()).is_ready() {
                    return false;
                }
                let mut del_g = pin!(fs.delete("g"));
                assert!(poll!(del_g.as_mut()).is_pending());
                del_f.await.unwrap();
                true
            });
            drop(fs);
            end(client, true);
            let client = open(&rt, &dev.spec(), true);
            let fs = b(ZoneFs::mount(client.clone())).unwrap_or_else(|e| panic!("mount: {e}"));
            assert!(!b(fs.exists("f")).unwrap());
            if b(fs.exists("g")).unwrap() {
                assert_eq!(&b(fs.read_at("g", 0, 1000)).unwrap()[..], &[2u8; 1000][..]);
            }
            drop(fs);
            end(client, false);
            if happened {
                ran += 1;
            }
        }
        assert!(ran > 0, "the interleaving never happened");
    });
}
