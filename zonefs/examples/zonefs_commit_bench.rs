//! Metadata commit throughput: `TASKS` threads (default 8) each create a small file, append
//! 100 bytes and sync it, `FILES` times (default 150), on an `emu:` device in a temp
//! directory (buffer on). Prints files/s for 3 runs and their median, and the journal bytes
//! written per file. No assertion: a measurement.
//!
//! `cargo run -p ziob-zonefs --example zonefs_commit_bench --release [TASKS] [FILES]`

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

fn main() {
    let mut args = std::env::args().skip(1);
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
