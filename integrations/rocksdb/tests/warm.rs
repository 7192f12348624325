//! `warm=`: after a mount, the read cache holds the newest tables' whole pages, up to the
//! budget, and reads of them give the files' bytes. One child process writes the files and
//! exits; a second one mounts the same `emu:` file (`O_DIRECT`, so the cache is on) and
//! checks what the warm-up read — the warm-up runs at a process's first mount only — and
//! that it was started before the mount's prefault (`prefault=auto`), to run beside it.

use std::path::Path;
use std::time::{Duration, Instant};

use ziob_rocksdb::memory::{self, Prefaulting};
use ziob_rocksdb::read_cache::PAGE_BYTES;
use ziob_rocksdb::shared::SharedFs;
use ziob_rocksdb::uri::FsUri;
use ziob_zonefs::WriteLifetime;

const STEP: &str = "ZIOB_ROCKSDB_WARM_STEP";
const FILE: &str = "ZIOB_ROCKSDB_WARM_FILE";
const NAME: &str = "a_mount_warms_the_newest_tables_within_its_budget";
/// Budget of the second mount's warm-up (`warm=`).
const BUDGET: u64 = 4 << 20;
const P: u64 = PAGE_BYTES;

/// The files, oldest first: path and size (RocksDB's names; the log is no table).
const FILES: [(&str, u64); 4] = [
    ("db/000001.sst", (1 << 20) + 5000),
    ("db/000002.sst", 3 << 20),
    ("db/000003.sst", (2 << 20) + 100),
    ("db/000004.log", 1 << 20),
];

fn bytes_of(path: &str, len: u64) -> Vec<u8> {
    let salt = path
        .bytes()
        .fold(0u8, |a, b| a.wrapping_mul(31).wrapping_add(b));
    (0..len)
        .map(|i| {
            (i as u8).wrapping_mul(7) ^ (i >> 12) as u8 ^ ((i >> 20) as u8).wrapping_mul(37) ^ salt
        })
        .collect()
}

fn uri(file: &Path, opts: &str) -> String {
    format!("ziob://emu:{}?zones=16&zone_size=16M{opts}", file.display())
}

/// The first child: writes the files and syncs them.
fn write_files(file: &Path) {
    let fs = SharedFs::get(&uri(file, "")).unwrap();
    for (path, len) in FILES {
        fs.create_lazy(path, WriteLifetime::Medium).unwrap();
        let wb = fs.writer(path);
        fs.buffered_append(path, &wb, &bytes_of(path, len)).unwrap();
        fs.push_buf(path, &wb).unwrap();
        fs.sync(path).unwrap();
        fs.release_writer(path, &wb).unwrap();
    }
}

/// The second child: mounts, waits for the warm-up, checks the cached pages and the bytes,
/// and that the warm-up was started before the prefault, to run beside it.
fn check_warmed(file: &Path) {
    let uri = uri(file, &format!("&warm={BUDGET}&cache=64M&prefault=auto"));
    let fs = SharedFs::get(&uri).unwrap();
    let t = Instant::now();
    let warmed = loop {
        if let Some(w) = fs.warmed() {
            break w;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "no warm-up in 60 s");
        std::thread::sleep(Duration::from_millis(5));
    };
    let prefault = fs.prefaulted().expect("the mount's prefault");
    let asked = memory::prefault_bytes(&FsUri::parse(&uri).unwrap());
    assert!(
        fs.warm_started().expect("started") <= prefault.started,
        "the warm-up is started before the prefault, to run beside it"
    );
    // The prefault left out no more than the warm-up read (how much depends on how far the
    // warm-up got before each piece: `ziob_runtime::prefault`'s unit test counts that).
    if let Prefaulting::Done(p) = prefault.outcome {
        assert_eq!(p.bytes + p.capped_bytes + p.left_out_bytes, asked);
        assert!(p.left_out_bytes <= warmed.bytes, "{p:?} {warmed:?}");
    }
    // Newest table first: 000003's whole pages (2 MiB), then 2 MiB of 000002; not 000001,
    // not the log, not a partial last page.
    assert_eq!((warmed.files, warmed.bytes), (2, BUDGET), "{warmed:?}");
    let cached = |path: &str, len: u64| -> Vec<bool> {
        (0..len.div_ceil(P))
            .map(|i| fs.is_cached(path, i * P))
            .collect()
    };
    let pages = |n: u64, v: bool| vec![v; n as usize];
    let want_3 = [pages(64, true), pages(1, false)].concat();
    assert_eq!(cached("db/000003.sst", FILES[2].1), want_3);
    let want_2 = [pages(64, true), pages(32, false)].concat();
    assert_eq!(cached("db/000002.sst", FILES[1].1), want_2);
    assert_eq!(cached("db/000001.sst", FILES[0].1), pages(33, false));
    assert_eq!(cached("db/000004.log", FILES[3].1), pages(32, false));
    // Every byte reads back, the warmed pages from the cache and the rest from the device,
    // in reads that start anywhere (here: a prime stride across page boundaries).
    for (path, len) in FILES {
        let want = bytes_of(path, len);
        let mut at = 0u64;
        while at < len {
            let n = 12_289.min(len - at) as usize;
            let got = fs.read_at(path, at, n).unwrap();
            assert!(
                got[..] == want[at as usize..at as usize + n],
                "{path}: bytes at {at} differ"
            );
            at += n as u64;
        }
    }
    println!("\nwarmed {} files {} bytes", warmed.files, warmed.bytes);
}

/// The device file, removed when the test ends, also when a child failed.
struct RemovedOnDrop(String);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn a_mount_warms_the_newest_tables_within_its_budget() {
    match std::env::var(STEP).as_deref() {
        Ok("write") => return write_files(Path::new(&std::env::var(FILE).unwrap())),
        Ok("check") => return check_warmed(Path::new(&std::env::var(FILE).unwrap())),
        _ => {}
    }
    let dev = RemovedOnDrop(format!(
        "/var/tmp/r-rocksdb-warm-{}.zns",
        std::process::id()
    ));
    let file = dev.0.as_str();
    let _ = std::fs::remove_file(file);
    ziob::runtime::testing::rerun_test_in_child(NAME, &[(STEP, "write"), (FILE, file)]);
    let out = ziob::runtime::testing::rerun_test_in_child(NAME, &[(STEP, "check"), (FILE, file)]);
    assert!(
        out.contains(&format!("warmed 2 files {BUDGET} bytes")),
        "{out}"
    );
}
