//! `prefault=`: a mount asked to touches its configured buffers' memory once, and the
//! plugin's writes afterwards land on those pages instead of faulting in new ones. Each case
//! runs in a child process of its own (a fresh heap: this test binary's allocator is the
//! plugin's mimalloc), which mounts a page-cache `emu:` file and writes through a table file.

use ziob_rocksdb::memory;
use ziob_rocksdb::shared::SharedFs;
use ziob_rocksdb::uri::FsUri;
use ziob_zonefs::WriteLifetime;

const CHILD: &str = "ZIOB_ROCKSDB_PREFAULT_CHILD";
const NAME: &str = "a_mount_prefaults_and_the_writes_after_it_land_on_those_pages";
/// Bytes written through the file after the mount.
const WRITE_BYTES: usize = 48 << 20;

fn resident_bytes() -> u64 {
    ziob::runtime::prefault::resident_bytes().expect("VmRSS")
}

/// The child: mounts with URI options `opts`, writes [`WRITE_BYTES`], prints how much the
/// resident memory grew over the mount and over the writes.
fn child(opts: &str) {
    let file =
        std::env::temp_dir().join(format!("ziob-rocksdb-prefault-{}.zns", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let uri = format!(
        "ziob://emu:{},direct=0?zones=8&zone_size=16M{opts}",
        file.display()
    );
    let before = resident_bytes();
    let fs = SharedFs::get(&uri).unwrap();
    let mounted = resident_bytes();
    let path = "db/000010.sst";
    fs.create_lazy(path, WriteLifetime::Medium).unwrap();
    let wb = fs.writer(path);
    let piece: Vec<u8> = (0..64 << 10).map(|i| (i * 7) as u8).collect();
    for _ in 0..WRITE_BYTES / piece.len() {
        fs.buffered_append(path, &wb, &piece).unwrap();
    }
    fs.push_buf(path, &wb).unwrap();
    let written = resident_bytes();
    assert_eq!(fs.size(path).unwrap(), WRITE_BYTES as u64);
    fs.forget_writer(path, &wb);
    let _ = std::fs::remove_file(&file);
    println!(
        "\nmount {} write {} kept {}",
        mounted.saturating_sub(before),
        written.saturating_sub(mounted),
        u8::from(ziob::runtime::prefault::freed_memory_kept())
    );
}

/// What a child measured: resident growth over the mount and over the writes, and whether
/// the allocator kept freed memory afterwards.
#[derive(Debug)]
struct Measured {
    mount: u64,
    write: u64,
    kept: bool,
}

/// Runs the child with URI options `opts` and the environment variables `env` (none of the
/// caller's `MIMALLOC_*`: the child's allocator settings are the plugin's own).
fn run_child(opts: &str, env: &[(&str, &str)]) -> Measured {
    let mut all = vec![(CHILD, opts)];
    all.extend_from_slice(env);
    let stdout = ziob::runtime::testing::rerun_test_in_child(NAME, &all);
    // libtest may print the test's name on the same line first.
    let at = stdout.find("mount ").expect("the child's measurement");
    let mut words = stdout[at..].split_whitespace();
    let mut next_number = |label: &str| -> u64 {
        assert_eq!(words.next(), Some(label), "{stdout}");
        words.next().unwrap().parse().unwrap()
    };
    Measured {
        mount: next_number("mount"),
        write: next_number("write"),
        kept: next_number("kept") == 1,
    }
}

/// Without a prefault (the default) the writes fault in new pages (their zone buffer, I/O
/// buffers and gathering buffers) and the allocator's options are left alone; after a
/// prefault (`prefault=auto`) the mount itself grew by most of its budget, the allocator
/// keeps freed memory, and the writes grew resident memory by much less. With
/// `MIMALLOC_PURGE_DELAY` giving a delay no prefault is made (its pages would go back).
/// Linux only (`/proc`); skipped, saying so, with less than 1 GiB of memory available.
#[test]
fn a_mount_prefaults_and_the_writes_after_it_land_on_those_pages() {
    if let Some(opts) = std::env::var_os(CHILD) {
        child(&opts.to_string_lossy());
        return;
    }
    let available = ziob::runtime::prefault::available_bytes().unwrap_or(0);
    if available < 1 << 30 {
        eprintln!("skipped: {available} bytes of memory available, under 1 GiB");
        return;
    }
    let budget = memory::budget(&FsUri::parse("ziob://emu:/x,direct=0").unwrap());
    let cold = run_child("", &[]);
    let warm = run_child("&prefault=auto", &[]);
    let delayed = run_child("&prefault=auto", &[("MIMALLOC_PURGE_DELAY", "10")]);
    eprintln!(
        "prefault=0: {cold:?}; auto ({budget} bytes): {warm:?}; with a purge delay: {delayed:?}"
    );
    assert!(
        !cold.kept,
        "no prefault asked for, yet freed memory is kept: {cold:?}"
    );
    assert!(
        warm.kept,
        "prefaulted, yet freed memory is not kept: {warm:?}"
    );
    assert!(
        cold.write >= 32 << 20,
        "without a prefault the writes grew resident memory by only {} bytes",
        cold.write
    );
    assert!(
        warm.mount >= budget * 3 / 4,
        "the mount's prefault of {budget} bytes left only {} resident",
        warm.mount
    );
    assert!(
        warm.write <= cold.write / 4,
        "after the prefault the writes still grew resident memory by {} bytes (without: {})",
        warm.write,
        cold.write
    );
    assert!(
        !delayed.kept && delayed.mount < budget / 4,
        "a purge delay in the environment still prefaulted: {delayed:?}"
    );
}
