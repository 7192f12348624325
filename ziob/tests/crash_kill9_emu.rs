//! Process crash test of the buffer on `emu`: a child process appends (random lengths,
//! random zones, two cores) and flushes through ZIOB, printing `flushed ZONE LEN CRC` after
//! every completed flush; the parent SIGKILLs it at a random moment, reopens the device
//! through ZIOB and checks that every acknowledged flush survived byte for byte (CRC of the
//! zone's first LEN bytes).
//!
//! Own `main` (harness = false): with `ZIOB_CRASH_CHILD=PATH` it is the child. The seed is
//! printed; `ZIOB_CRASH_SEED` replays it.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ziob::backends::EmuDevice;
use ziob::{DmaBuf, Geometry, Runtime, Ziob, ZiobConfig};

const ZONES: u32 = 8;
const ROUNDS: u64 = 3;

fn geometry() -> Geometry {
    Geometry {
        max_open_zones: Some(4),
        max_active_zones: Some(8),
        zone_capacity_bytes: 3 << 20,
        ..Geometry::new(ZONES, 4 << 20)
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn config() -> ZiobConfig {
    ZiobConfig {
        writeback_unit_bytes: Some(64 << 10),
        shard_budget_bytes: 1 << 20,
        ..ZiobConfig::default()
    }
}

fn child(path: String, seed: u64) {
    let rt = Runtime::builder().cores(2).build().unwrap();
    rt.block_on(move || async move {
        let z = Ziob::open(&format!("emu:{path}"), config()).await.unwrap();
        let mut rng = Rng(seed | 1);
        let report = z.report(0, ZONES).await.unwrap();
        let mut content: Vec<Vec<u8>> = Vec::new();
        for info in &report {
            // Start from what survived earlier rounds.
            let len = info.write_pointer_bytes as usize;
            let data = if len > 0 {
                z.read(info.index, 0, len).await.unwrap().to_vec()
            } else {
                Vec::new()
            };
            content.push(data);
        }
        loop {
            let zone = (rng.next() % u64::from(ZONES)) as u32;
            let c = &mut content[zone as usize];
            let len = 1 + (rng.next() % 20_000) as usize;
            if c.len() + len + 4096 > (3 << 20) {
                z.zone_action(ziob::ZoneAction::Reset, ziob::ZoneTarget::One(zone))
                    .await
                    .unwrap();
                c.clear();
                println!("flushed {zone} 0 0");
                continue;
            }
            let fill = (rng.next() % 251) as u8;
            let data: Vec<u8> = (0..len).map(|i| (i as u8) ^ fill).collect();
            let off = z.append(zone, DmaBuf::from_slice(&data)).await.unwrap();
            assert_eq!(off as usize, c.len());
            c.extend_from_slice(&data);
            if rng.next().is_multiple_of(4) {
                z.flush(zone).await.unwrap();
                let padded = c.len().div_ceil(4096) * 4096;
                c.resize(padded, 0);
                println!("flushed {zone} {} {}", c.len(), crc32c::crc32c(c));
            }
        }
    })
    .unwrap();
}

fn main() {
    if let Ok(path) = std::env::var("ZIOB_CRASH_CHILD") {
        let seed: u64 = std::env::var("ZIOB_CRASH_SEED").unwrap().parse().unwrap();
        child(path, seed);
        return;
    }
    let seed: u64 = std::env::var("ZIOB_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    println!("crash test seed {seed} (set ZIOB_CRASH_SEED={seed} to replay)");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.zns");
    let p = path.clone();
    Runtime::builder()
        .cores(1)
        .build()
        .unwrap()
        .block_on(move || async move {
            EmuDevice::create(&p, &geometry()).await.unwrap();
        })
        .unwrap();
    let mut rng = Rng(seed | 1);
    let mut acked: HashMap<u32, (usize, u32)> = HashMap::new();
    let mut failures = 0;
    for round in 0..ROUNDS {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env("ZIOB_CRASH_CHILD", &path)
            .env("ZIOB_CRASH_SEED", (seed ^ round).to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let kill_after = Duration::from_millis(300 + rng.next() % 900);
        let reader = std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => lines.push(l),
                    Err(_) => break,
                }
            }
            lines
        });
        let start = Instant::now();
        std::thread::sleep(kill_after);
        // SAFETY: kill(2) with a pid we spawned; no memory is involved.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let status = child.wait().unwrap();
        assert!(!status.success(), "the child must have been killed");
        let lines = reader.join().unwrap();
        let mut n = 0;
        for l in &lines {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() == 4 && f[0] == "flushed" {
                acked.insert(
                    f[1].parse().unwrap(),
                    (f[2].parse().unwrap(), f[3].parse().unwrap()),
                );
                n += 1;
            }
        }
        // Reopen through ZIOB and check every acknowledged flush.
        let p = path.clone();
        let acked_now = acked.clone();
        let bad = Runtime::builder()
            .cores(2)
            .build()
            .unwrap()
            .block_on(move || async move {
                let z = Ziob::open(&format!("emu:{}", p.display()), config())
                    .await
                    .unwrap();
                let report = z.report(0, ZONES).await.unwrap();
                let mut bad = 0;
                for (zone, (len, crc)) in acked_now {
                    let wp = report[zone as usize].write_pointer_bytes as usize;
                    if wp < len {
                        eprintln!("zone {zone}: flushed {len} bytes, only {wp} survived");
                        bad += 1;
                        continue;
                    }
                    if len > 0 {
                        let data = z.read(zone, 0, len).await.unwrap();
                        if crc32c::crc32c(&data) != crc {
                            eprintln!("zone {zone}: the first {len} flushed bytes differ");
                            bad += 1;
                        }
                    }
                }
                z.close().await.unwrap();
                bad
            })
            .unwrap();
        println!(
            "round {round}: killed after {:?}, {n} flushes acknowledged, {} zones checked, {bad} bad",
            start.elapsed(),
            acked.len()
        );
        failures += bad;
    }
    if failures > 0 {
        println!("0 passed, 1 failed");
        panic!("{failures} acknowledged flushes were lost (seed {seed})");
    }
    println!("1 passed, 0 failed");
}
