//! Zone garbage collection: an overwrite-style run (create / append / sync / delete in a
//! loop, files of one class interleaved so that deletes leave zones partly dead) on a small
//! device writes many times its capacity and never runs out of space; every live file reads
//! back right along the way, after a remount and in `fsck`. A device filled with live data
//! gives `NoSpace` (typed), and works again after a delete. Write amplification is printed.

mod support;

use std::collections::VecDeque;

use support::{b, bounded, end, formatted, runtime, EmuFile, Rng};
use ziob::{Client, ZiobConfig};
use ziob_zonefs::{FsError, MkfsOptions, WriteLifetime, ZoneFs};

/// The content of file `n` at `offset`.
fn content(n: u64, from: u64, len: usize) -> Vec<u8> {
    (from..from + len as u64)
        .map(|o| (n.wrapping_mul(131) ^ (o % 253)) as u8)
        .collect()
}

/// Creates, fills and syncs files in a loop, deleting the oldest when `live_files` are kept,
/// until `target` user bytes are written. Returns the user bytes written.
fn overwrite_run(fs: &ZoneFs, seed: u64, live_files: usize, target: u64) -> u64 {
    let mut rng = Rng(seed);
    let mut live: VecDeque<(u64, u64)> = VecDeque::new();
    let mut written = 0u64;
    let mut n = 0u64;
    while written < target {
        // Two files grow at once so their extents interleave in the class's zone.
        let size = 4096 + rng.next() % 60_000;
        let name = format!("db/{n:06}.sst");
        b(fs.create(&name, WriteLifetime::Medium)).unwrap();
        let mut at = 0u64;
        while at < size {
            let len = (1 + rng.next() % 9000).min(size - at) as usize;
            if let Err(e) = b(fs.append(&name, &content(n, at, len))) {
                panic!("append of {name} after {written} user bytes: {e}");
            }
            at += len as u64;
            if rng.next().is_multiple_of(4) {
                b(fs.sync(&name)).unwrap();
            }
        }
        b(fs.sync(&name)).unwrap();
        written += size;
        live.push_back((n, size));
        n += 1;
        while live.len() > live_files {
            // Delete a random live file (not only the oldest): zones die partly.
            let i = (rng.next() % live.len() as u64) as usize;
            let (victim, _) = live.remove(i).unwrap();
            b(fs.delete(&format!("db/{victim:06}.sst"))).unwrap();
        }
        if n.is_multiple_of(50) {
            for (f, size) in &live {
                let got = b(fs.read_at(&format!("db/{f:06}.sst"), 0, *size as usize)).unwrap();
                assert!(got[..] == content(*f, 0, *size as usize)[..], "file {f}");
            }
        }
    }
    for (f, size) in &live {
        let got = b(fs.read_at(&format!("db/{f:06}.sst"), 0, *size as usize + 1)).unwrap();
        assert!(
            got[..] == content(*f, 0, *size as usize)[..],
            "file {f} at the end"
        );
    }
    written
}

#[test]
fn overwrite_run_writes_many_times_the_device_and_never_runs_out() {
    for buffered in [true, false] {
        bounded(600, move || {
            let rt = runtime(2);
            let (zones, zone_bytes) = (20u32, 256u64 << 10);
            let spec = format!("mem:zones={zones},zone_size={}K", zone_bytes >> 10);
            let config = ZiobConfig {
                buffered,
                ..ZiobConfig::default()
            };
            let client = b(Client::open(rt.handle(), &spec, config)).unwrap();
            b(ZoneFs::mkfs(&client, MkfsOptions::default())).unwrap();
            let fs = b(ZoneFs::mount(client.clone())).unwrap();
            let capacity = b(fs.df()).total_bytes;
            // About half the data zones stay live.
            let user = overwrite_run(&fs, 7 + buffered as u64, 64, 5 * capacity);
            let stats = b(fs.stats());
            let df = b(fs.df());
            println!(
                "buffered={buffered}: {user} user bytes on {capacity} bytes of data zones \
                 ({:.1}x); write amplification {:.3} (data {} + journal {} / user {}); \
                 GC moved {} bytes, reclaimed {} zones; df used {} reclaimable {} free {} \
                 space amplification {:.3}",
                user as f64 / capacity as f64,
                stats.write_amplification(),
                stats.data_bytes,
                stats.journal_bytes,
                stats.user_bytes,
                stats.gc_bytes,
                stats.gc_zones,
                df.used_bytes,
                df.reclaimable_bytes,
                df.free_bytes,
                df.space_amplification(),
            );
            assert!(user >= 5 * capacity);
            assert!(stats.gc_zones > 0, "GC never ran: {stats:?}");
            let rep = b(fs.fsck()).unwrap();
            assert!(rep.is_clean(), "{:#?}", rep.problems);
            b(fs.sync_all()).unwrap();
            drop(fs);
            // Remount on the same instance (mem: lives as long as the client).
            let fs = b(ZoneFs::mount(client.clone())).unwrap();
            let rep = b(fs.fsck()).unwrap();
            assert!(rep.is_clean(), "{:#?}", rep.problems);
            assert_eq!(rep.live_bytes, df.used_bytes);
            drop(fs);
            b(client.close()).unwrap();
        });
    }
}

#[test]
fn a_device_full_of_live_data_is_no_space_then_recovers() {
    let file = EmuFile::create("gc-full", 12, 64 << 10, None);
    let spec = file.spec();
    bounded(120, move || {
        let rt = runtime(1);
        let (client, fs) = formatted(&rt, &spec, true);
        let mut i = 0;
        let err = loop {
            let p = format!("f{i}");
            b(fs.create(&p, WriteLifetime::Long)).unwrap();
            match b(fs.append(&p, &[i as u8; 50_000])).and_then(|_| b(fs.sync(&p))) {
                Ok(()) => i += 1,
                Err(e) => break e,
            }
            assert!(i < 100, "10 zones of 64 KiB never filled");
        };
        assert!(matches!(err, FsError::NoSpace(_)), "{err:?}");
        let df = b(fs.df());
        // Full: outside files are only the zone kept for GC, the open zone's rest and less
        // than the urgent GC minimum (2 blocks here) of padding per zone.
        assert!(
            df.used_bytes >= df.total_bytes - 2 * (64 << 10) - 10 * 8192,
            "{df:?}"
        );
        // Every earlier file is intact, and after deletes there is room again.
        for j in 0..i {
            let got = b(fs.read_at(&format!("f{j}"), 0, 60_000)).unwrap();
            assert!(got.len() == 50_000 && got.iter().all(|&x| x == j as u8));
        }
        b(fs.delete("f0")).unwrap();
        b(fs.delete("f2")).unwrap();
        b(fs.delete("f4")).unwrap();
        b(fs.create("new", WriteLifetime::Long)).unwrap();
        b(fs.append("new", &[9; 50_000])).unwrap();
        b(fs.sync("new")).unwrap();
        let rep = b(fs.fsck()).unwrap();
        assert!(rep.is_clean(), "{:#?}", rep.problems);
        drop(fs);
        end(client, false);
    });
}
