//! Real-process crash loop with concurrency inside each zone: a child process runs ZIOB over
//! `emu:` on two cores with, for every zone, several appender tasks plus a flusher task
//! calling `flush(zone)`, and one task calling `sync()`; the parent SIGKILLs it at a random
//! moment, reopens the file with the plain emu device and checks:
//! - every zone's write pointer covers what any completed flush/sync acknowledged as durable
//!   (and what earlier rounds found on the device);
//! - every acknowledged append below the write pointer reads back byte for byte;
//! - the data earlier rounds verified is unchanged.
//!
//! It reports rounds, bytes verified and losses (must be 0). Own `main` (harness = false):
//! with `ZIOB_CRASH_CHILD=PATH` it is the child. `ZIOB_CRASH_SEED` replays a run (kill times
//! and the children's choices; the interleaving is real), `ZIOB_CRASH_ROUNDS` sets the
//! number of rounds (default 60).
//!
//! The child's protocol on stdout, one line each, printed only after the call returned Ok:
//! `ready`; `A zone offset len seed` (an acknowledged append; its bytes are
//! `payload(seed, len)`); `D zone end` (a completed flush or sync covered `[0, end)` of the
//! zone: everything acknowledged before the call started).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ziob::backends::{EmuDevice, LatencyModel};
use ziob::{DmaBuf, Geometry, Runtime, Ziob, ZiobConfig, ZoneAction, ZoneTarget, ZonedDevice};

const ZONES: u32 = 4;
const ZONE_BYTES: u64 = 16 << 20;
const APPENDERS_PER_ZONE: u64 = 2;
const ROUNDS_DEFAULT: u64 = 60;
/// A zone this full is reset by the parent before the next round.
const RESET_AT_BYTES: u64 = ZONE_BYTES * 3 / 4;
const CHILD_LATENCY_US: u64 = 30;
/// A flush or sync pending this long in the child is a hang (the last round runs long
/// enough to see one).
const STUCK_AFTER: Duration = Duration::from_secs(3);
/// How long the last round runs before the kill.
const LAST_ROUND: Duration = Duration::from_secs(5);

fn geometry() -> Geometry {
    Geometry {
        max_open_zones: Some(ZONES),
        max_active_zones: Some(ZONES),
        ..Geometry::new(ZONES, ZONE_BYTES)
    }
}

fn config() -> ZiobConfig {
    ZiobConfig {
        writeback_unit_bytes: Some(64 << 10),
        shard_budget_bytes: 2 << 20,
        ..ZiobConfig::default()
    }
}

/// splitmix64.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The bytes of the append with this seed (never zero, so padding is told apart).
fn payload(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            let w = mix(seed ^ (i as u64 / 8).wrapping_mul(0x1000_0000_01B3));
            ((w >> (8 * (i % 8))) as u8) | 1
        })
        .collect()
}

// ---- child ------------------------------------------------------------------------------

/// Per zone, the end of the appends acknowledged so far (a flush started now covers it).
struct Acked(Vec<AtomicU64>);

impl Acked {
    fn raise(&self, zone: u32, end: u64) {
        self.0[zone as usize].fetch_max(end, Ordering::SeqCst);
    }
    fn get(&self, zone: u32) -> u64 {
        self.0[zone as usize].load(Ordering::SeqCst)
    }
}

/// The start of each flusher's (and the syncer's, last) call in flight, for the hang check.
struct Pending(Mutex<Vec<Option<Instant>>>);

impl Pending {
    fn set(&self, slot: usize, v: Option<Instant>) {
        self.0.lock().unwrap_or_else(|p| p.into_inner())[slot] = v;
    }
    /// The first slot pending longer than [`STUCK_AFTER`].
    fn stuck(&self) -> Option<usize> {
        let v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        v.iter()
            .position(|s| s.is_some_and(|t| t.elapsed() > STUCK_AFTER))
    }
}

fn say(out: &Mutex<std::io::Stdout>, line: String) {
    let mut o = out.lock().unwrap_or_else(|p| p.into_inner());
    // The parent may kill us at any time; a line cut short is ignored by the parent.
    let _ = writeln!(o, "{line}");
    let _ = o.flush();
}

fn die(out: &Mutex<std::io::Stdout>, what: String) -> ! {
    say(out, format!("E {what}"));
    std::process::exit(2);
}

fn child(path: String, seed: u64) {
    let rt = Runtime::builder().cores(2).build().unwrap();
    let out = Arc::new(Mutex::new(std::io::stdout()));
    rt.block_on(move || async move {
        let spec = format!("emu:{path},lat_us={CHILD_LATENCY_US}");
        let z = match Ziob::open(&spec, config()).await {
            Ok(z) => z,
            Err(e) => die(&out, format!("open: {e}")),
        };
        let report = z.report(0, ZONES).await.unwrap();
        let acked = Arc::new(Acked(
            report
                .iter()
                .map(|i| AtomicU64::new(i.write_pointer_bytes))
                .collect(),
        ));
        let pending = Arc::new(Pending(Mutex::new(vec![None; ZONES as usize + 1])));
        {
            let (pending, out) = (pending.clone(), out.clone());
            std::thread::spawn(move || loop {
                std::thread::sleep(Duration::from_millis(100));
                if let Some(slot) = pending.stuck() {
                    let what = if slot == ZONES as usize {
                        "sync".to_string()
                    } else {
                        format!("flush of zone {slot}")
                    };
                    die(
                        &out,
                        format!("HANG: {what} pending for more than {STUCK_AFTER:?}"),
                    );
                }
            });
        }
        say(&out, "ready".into());
        let mut tasks = Vec::new();
        for zone in 0..ZONES {
            for a in 0..APPENDERS_PER_ZONE {
                let (z, out, acked) = (z.clone(), out.clone(), acked.clone());
                let task_seed = mix(seed ^ (u64::from(zone) << 32) ^ a);
                let core = ((zone as u64 + a) % 2) as usize;
                tasks.push(spawn_on(core, move || {
                    appender(z, zone, task_seed, out, acked)
                }));
            }
            let (z, out, acked, pending) = (z.clone(), out.clone(), acked.clone(), pending.clone());
            let task_seed = mix(seed ^ (u64::from(zone) << 32) ^ 0xF1);
            tasks.push(spawn_on(zone as usize % 2, move || {
                flusher(z, zone, task_seed, out, acked, pending)
            }));
        }
        let (z2, out2, acked2) = (z.clone(), out.clone(), acked.clone());
        tasks.push(spawn_on(1, move || {
            syncer(z2, mix(seed ^ 0x5C), out2, acked2, pending)
        }));
        for t in tasks {
            let _ = t.await;
        }
    })
    .unwrap();
}

/// Runs `f` on `core` and returns a future for its end.
fn spawn_on<F, Fut>(core: usize, f: F) -> futures::channel::oneshot::Receiver<()>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let (tx, rx) = futures::channel::oneshot::channel();
    ziob::runtime::spawn_on(core, move || async move {
        f().await;
        let _ = tx.send(());
    })
    .unwrap();
    rx
}

async fn appender(
    z: Ziob,
    zone: u32,
    seed: u64,
    out: Arc<Mutex<std::io::Stdout>>,
    acked: Arc<Acked>,
) {
    let mut n = 0u64;
    loop {
        n += 1;
        let s = mix(seed ^ n);
        let len = 1 + (s % 24_000) as usize;
        let data_seed = mix(s);
        match z
            .append(zone, DmaBuf::from_slice(&payload(data_seed, len)))
            .await
        {
            Ok(off) => {
                acked.raise(zone, off + len as u64);
                say(&out, format!("A {zone} {off} {len} {data_seed}"));
            }
            Err(e)
                if matches!(
                    e.kind(),
                    Some(ziob::ErrorKind::ZoneFull | ziob::ErrorKind::BoundaryError)
                ) =>
            {
                return;
            }
            Err(e) => die(&out, format!("append to zone {zone}: {e}")),
        }
    }
}

async fn flusher(
    z: Ziob,
    zone: u32,
    seed: u64,
    out: Arc<Mutex<std::io::Stdout>>,
    acked: Arc<Acked>,
    pending: Arc<Pending>,
) {
    let mut n = 0u64;
    loop {
        n += 1;
        let pause = Duration::from_micros(mix(seed ^ n) % 3000);
        let _ = ziob::runtime::sleep(pause).await;
        let covered = acked.get(zone);
        pending.set(zone as usize, Some(Instant::now()));
        let res = z.flush(zone).await;
        pending.set(zone as usize, None);
        match res {
            Ok(()) => say(&out, format!("D {zone} {covered}")),
            Err(e) if e.kind() == Some(ziob::ErrorKind::ZoneFull) => return,
            Err(e) => die(&out, format!("flush of zone {zone}: {e}")),
        }
    }
}

async fn syncer(
    z: Ziob,
    seed: u64,
    out: Arc<Mutex<std::io::Stdout>>,
    acked: Arc<Acked>,
    pending: Arc<Pending>,
) {
    let mut n = 0u64;
    loop {
        n += 1;
        let pause = Duration::from_micros(2000 + mix(seed ^ n) % 8000);
        let _ = ziob::runtime::sleep(pause).await;
        let covered: Vec<u64> = (0..ZONES).map(|zone| acked.get(zone)).collect();
        pending.set(ZONES as usize, Some(Instant::now()));
        let res = z.sync().await;
        pending.set(ZONES as usize, None);
        match res {
            Ok(()) => {
                for (zone, end) in covered.iter().enumerate() {
                    say(&out, format!("D {zone} {end}"));
                }
            }
            Err(e) => die(&out, format!("sync: {e}")),
        }
    }
}

// ---- parent -----------------------------------------------------------------------------

/// What the parent knows of a zone across rounds.
#[derive(Clone, Default)]
struct ZoneKnown {
    /// Bytes found (and verified) on the device after the last round: durable.
    durable: u64,
    /// crc32c of those bytes.
    crc: u32,
}

#[derive(Default)]
struct Totals {
    rounds: u64,
    appends_acked: u64,
    bytes_acked: u64,
    bytes_verified: u64,
    durable_claims: u64,
    lost_bytes: u64,
    problems: Vec<String>,
}

fn on_core<T: Send + 'static, F: std::future::Future<Output = T> + 'static>(
    f: impl FnOnce() -> F + Send + 'static,
) -> T {
    let rt = Runtime::builder().cores(1).build().unwrap();
    rt.block_on(f).unwrap()
}

struct Round {
    appends: Vec<(u32, u64, usize, u64)>,
    claims: Vec<u64>,
    ready: bool,
    errors: Vec<String>,
}

fn parse_lines(lines: &[String]) -> Round {
    let mut r = Round {
        appends: Vec::new(),
        claims: vec![0; ZONES as usize],
        ready: false,
        errors: Vec::new(),
    };
    for l in lines {
        let f: Vec<&str> = l.split_whitespace().collect();
        match f.as_slice() {
            ["ready"] => r.ready = true,
            ["A", zone, off, len, seed] => {
                if let (Ok(zone), Ok(off), Ok(len), Ok(seed)) =
                    (zone.parse(), off.parse(), len.parse(), seed.parse())
                {
                    r.appends.push((zone, off, len, seed));
                }
            }
            ["D", zone, end] => {
                if let (Ok(zone), Ok(end)) = (zone.parse::<usize>(), end.parse::<u64>()) {
                    r.claims[zone] = r.claims[zone].max(end);
                }
            }
            ["E", ..] => r.errors.push(l.clone()),
            _ => {} // a line cut by the kill
        }
    }
    r
}

/// Kills one child at a random moment and checks the device.
fn round(
    path: &Path,
    n: u64,
    seed: u64,
    kill_after: Duration,
    known: &mut [ZoneKnown],
    t: &mut Totals,
) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env("ZIOB_CRASH_CHILD", path)
        .env("ZIOB_CRASH_SEED", seed.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines() {
            match line {
                Ok(l) => {
                    if l == "ready" {
                        let _ = ready_tx.send(());
                    }
                    lines.push(l);
                }
                Err(_) => break,
            }
        }
        lines
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let _ = ready_rx.recv_timeout(Duration::from_secs(20));
    let start = Instant::now();
    while start.elapsed() < kill_after {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = child.kill(); // SIGKILL
    let status = child.wait().unwrap();
    let lines = reader.join().unwrap();
    let stderr = err_reader.join().unwrap();
    let r = parse_lines(&lines);
    if !r.ready || !r.errors.is_empty() || status.code().is_some() {
        t.problems.push(format!(
            "round {n} (child seed {seed}): the child failed on its own ({status}): {}\n{}",
            r.errors.join("; "),
            stderr.lines().rev().take(20).collect::<Vec<_>>().join("\n")
        ));
    }
    t.appends_acked += r.appends.len() as u64;
    t.bytes_acked += r.appends.iter().map(|a| a.2 as u64).sum::<u64>();
    t.durable_claims += lines.iter().filter(|l| l.starts_with("D ")).count() as u64;
    // Check on a fresh runtime with the plain device.
    let p = path.to_path_buf();
    let prev = known.to_vec();
    let (found, verified, problems, lost) = on_core(move || verify(p, prev, r));
    for (k, f) in known.iter_mut().zip(found) {
        *k = f;
    }
    t.bytes_verified += verified;
    t.lost_bytes += lost;
    for p in problems {
        t.problems.push(format!(
            "round {n} (child seed {seed}, killed after {kill_after:?}): {p}"
        ));
    }
    t.rounds += 1;
}

async fn verify(
    path: PathBuf,
    prev: Vec<ZoneKnown>,
    r: Round,
) -> (Vec<ZoneKnown>, u64, Vec<String>, u64) {
    let dev = EmuDevice::open(&path, LatencyModel::default())
        .await
        .unwrap();
    let infos = dev.report_all().await.unwrap();
    let mut by_zone: HashMap<u32, Vec<(u64, usize, u64)>> = HashMap::new();
    for &(zone, off, len, seed) in &r.appends {
        by_zone.entry(zone).or_default().push((off, len, seed));
    }
    let (mut problems, mut verified, mut lost) = (Vec::new(), 0u64, 0u64);
    let mut found = Vec::new();
    for info in infos {
        let zone = info.index;
        let wp = info.write_pointer_bytes;
        let k = &prev[zone as usize];
        let must = k.durable.max(r.claims[zone as usize]);
        if wp < must {
            lost += must - wp;
            problems.push(format!(
                "zone {zone}: LOST {} bytes: a completed flush/sync (or an earlier round) made [0, {must}) durable, the device kept [0, {wp})",
                must - wp
            ));
        }
        let buf = if wp == 0 {
            DmaBuf::with_capacity(1)
        } else {
            let (res, buf) = dev
                .read(zone, 0, wp as usize, DmaBuf::with_capacity(wp as usize))
                .await;
            res.unwrap();
            buf
        };
        let keep = k.durable.min(wp) as usize;
        if keep as u64 == k.durable && crc32c::crc32c(&buf[..keep]) != k.crc {
            problems.push(format!(
                "zone {zone}: the {keep} bytes verified after the previous round changed"
            ));
        }
        for &(off, len, seed) in by_zone.get(&zone).map(Vec::as_slice).unwrap_or(&[]) {
            if off >= wp {
                continue;
            }
            let n = (len as u64).min(wp - off) as usize;
            let want = payload(seed, len);
            if buf[off as usize..off as usize + n] != want[..n] {
                problems.push(format!(
                    "zone {zone}: the append acknowledged at [{off}, {}) reads back different",
                    off + len as u64
                ));
            }
            verified += n as u64;
        }
        found.push(ZoneKnown {
            durable: wp,
            crc: crc32c::crc32c(&buf[..wp as usize]),
        });
    }
    // Reset zones that are filling up (a completed reset is durable): the next round starts
    // them from zero.
    for (zone, f) in found.iter_mut().enumerate() {
        if f.durable >= RESET_AT_BYTES {
            dev.zone_action(ZoneAction::Reset, ZoneTarget::One(zone as u32))
                .await
                .unwrap();
            *f = ZoneKnown::default();
        }
    }
    (found, verified, problems, lost)
}

fn main() {
    if let Ok(path) = std::env::var("ZIOB_CRASH_CHILD") {
        let seed = std::env::var("ZIOB_CRASH_SEED").unwrap().parse().unwrap();
        child(path, seed);
        return;
    }
    let seed: u64 = std::env::var("ZIOB_CRASH_SEED")
        .ok()
        .map(|s| s.parse().expect("ZIOB_CRASH_SEED is a number"))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let rounds: u64 = std::env::var("ZIOB_CRASH_ROUNDS")
        .ok()
        .map(|s| s.parse().expect("ZIOB_CRASH_ROUNDS is a number"))
        .unwrap_or(ROUNDS_DEFAULT);
    println!(
        "crash_loop_concurrent_emu: seed {seed}, {rounds} rounds, {ZONES} zones x ({APPENDERS_PER_ZONE} appenders + 1 flusher) + 1 syncer, 2 cores (ZIOB_CRASH_SEED={seed} replays)"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash-loop.zns");
    let p = path.clone();
    on_core(move || async move {
        EmuDevice::create(&p, &geometry()).await.unwrap();
    });
    let mut known = vec![ZoneKnown::default(); ZONES as usize];
    let mut t = Totals::default();
    let start = Instant::now();
    for n in 0..rounds {
        let child_seed = mix(seed ^ n);
        let kill_after = if n + 1 == rounds {
            LAST_ROUND
        } else {
            Duration::from_millis(150 + mix(child_seed) % 300)
        };
        round(&path, n, child_seed, kill_after, &mut known, &mut t);
    }
    println!(
        "crash_loop_concurrent_emu: {} rounds in {:.1?}: {} appends ({} bytes) acknowledged, {} durability claims, {} bytes verified, {} bytes lost, {} problems",
        t.rounds,
        start.elapsed(),
        t.appends_acked,
        t.bytes_acked,
        t.durable_claims,
        t.bytes_verified,
        t.lost_bytes,
        t.problems.len()
    );
    if !t.problems.is_empty() {
        for p in t.problems.iter().take(30) {
            println!("  {p}");
        }
        println!("0 passed, 1 failed");
        panic!(
            "{} problems, {} bytes lost (replay: ZIOB_CRASH_SEED={seed})",
            t.problems.len(),
            t.lost_bytes
        );
    }
    println!("1 passed, 0 failed");
}
