//! Two measurements on an `emu:` device in a temp directory; each prints 3 runs and their
//! median. No assertion: a measurement.
//!
//! - Metadata commits (default): `TASKS` threads (default 8) each create a small file,
//!   append 100 bytes and sync it, `FILES` times (default 150), buffer on; files/s and the
//!   journal bytes written per file.
//!   `cargo run -p ziob-zonefs --example zonefs_commit_bench --release [TASKS] [FILES]`
//! - Parallel appends (`append`): 7 threads, one per lifetime class (so one open zone each),
//!   append 16 KiB pieces to a file of their own (`MIB` MiB each, default 8) while 2 threads
//!   read 16 KiB at random offsets of a file written before; buffer off (every append is a
//!   device write). MiB/s appended and reads/s.
//!   `cargo run -p ziob-zonefs --example zonefs_commit_bench --release append [MIB]`

use std::time::Instant;

use futures::executor::block_on as block;

use ziob::{Client, Runtime, ZiobConfig};
use ziob_zonefs::{MkfsOptions, WriteLifetime, ZoneFs};

fn run(rt: &Runtime, tasks: usize, files: usize) -> (f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let spec = format!("emu:{}", dir.path().join("bench.zns").display());
    let create = spec.clone();
    rt.block_on(move || async move {
        let g = ziob::Geometry::new(64, 4 << 20);
        drop(ziob::backends::create_device(&create, &g).await.unwrap());
    })
    .unwrap();
    let client = block(Client::open(rt.handle(), &spec, ZiobConfig::default())).unwrap();
    block(ZoneFs::mkfs(&client, MkfsOptions::default())).unwrap();
    let fs = block(ZoneFs::mount(client.clone())).unwrap();
    let journal_before = block(fs.stats()).journal_bytes;
    let start = Instant::now();
    let threads: Vec<_> = (0..tasks)
        .map(|t| {
            let fs = fs.blocking();
            std::thread::spawn(move || {
                for i in 0..files {
                    let p = format!("t{t}/{i:06}.log");
                    fs.create(&p, WriteLifetime::Wal).unwrap();
                    fs.append(&p, &[t as u8; 100]).unwrap();
                    fs.sync(&p).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let n = (tasks * files) as f64;
    let journal = (block(fs.stats()).journal_bytes - journal_before) as f64 / n;
    drop(fs);
    block(client.close()).unwrap();
    (n / secs, journal)
}

/// One run of the parallel-append measurement: (MiB/s appended, reads/s).
fn run_appends(rt: &Runtime, mib: usize) -> (f64, f64) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    use ziob_zonefs::WriteLifetime as L;
    let dir = tempfile::tempdir().unwrap();
    let spec = format!("emu:{}", dir.path().join("bench.zns").display());
    let create = spec.clone();
    rt.block_on(move || async move {
        let g = ziob::Geometry::new(64, 16 << 20);
        drop(ziob::backends::create_device(&create, &g).await.unwrap());
    })
    .unwrap();
    let config = ZiobConfig {
        buffered: false,
        ..ZiobConfig::default()
    };
    let client = block(Client::open(rt.handle(), &spec, config)).unwrap();
    block(ZoneFs::mkfs(&client, MkfsOptions::default())).unwrap();
    let fs = block(ZoneFs::mount(client.clone())).unwrap().blocking();
    fs.create("read/me", L::NotSet).unwrap();
    fs.append("read/me", &vec![1u8; 4 << 20]).unwrap();
    fs.sync("read/me").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let (fs, stop, reads) = (fs.clone(), stop.clone(), reads.clone());
            std::thread::spawn(move || {
                let mut x = r + 1;
                while !stop.load(Ordering::Relaxed) {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let off = (x >> 33) % ((4 << 20) - (16 << 10));
                    fs.read_at("read/me", off, 16 << 10).unwrap();
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let start = Instant::now();
    let classes = [
        L::None,
        L::Short,
        L::Medium,
        L::Long,
        L::Extreme,
        L::Wal,
        L::NotSet,
    ];
    let writers: Vec<_> = classes
        .iter()
        .enumerate()
        .map(|(i, lt)| {
            let (fs, lt) = (fs.clone(), *lt);
            std::thread::spawn(move || {
                let p = format!("w/{i}");
                fs.create(&p, lt).unwrap();
                let piece = vec![i as u8; 16 << 10];
                for _ in 0..mib * 64 {
                    fs.append(&p, &piece).unwrap();
                }
                fs.sync(&p).unwrap();
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    drop(fs);
    block(client.close()).unwrap();
    (
        (classes.len() * mib) as f64 / secs,
        reads.load(Ordering::Relaxed) as f64 / secs,
    )
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("append") {
        args.next();
        let mib: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(8);
        let rt = Runtime::builder().cores(1).build().unwrap();
        let mut rates = Vec::new();
        for r in 0..3 {
            let (mibs, reads) = run_appends(&rt, mib);
            println!(
                "run {r}: 7 appenders x {mib} MiB in 16 KiB appends + 2 readers (buffer off): {mibs:.1} MiB/s appended, {reads:.0} reads/s"
            );
            rates.push((mibs, reads));
        }
        rates.sort_by(|a, b| a.0.total_cmp(&b.0));
        println!(
            "median: {:.1} MiB/s appended ({:.0} reads/s in that run)",
            rates[1].0, rates[1].1
        );
        return;
    }
    let tasks: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(8);
    let files: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(150);
    let rt = Runtime::builder().cores(1).build().unwrap();
    let mut rates = Vec::new();
    for r in 0..3 {
        let (rate, journal) = run(&rt, tasks, files);
        println!(
            "run {r}: {tasks} tasks x {files} files (create + 100 B append + sync): {rate:.0} files/s, {journal:.0} journal bytes/file"
        );
        rates.push(rate);
    }
    rates.sort_by(f64::total_cmp);
    println!("median: {:.0} files/s", rates[1]);
}
