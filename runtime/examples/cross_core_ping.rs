//! Cross-core round trips and the CPU they cost, for each `idle_spin` given.
//!
//! `cargo run --release -p ziob-runtime --example cross_core_ping -- [ROUND_TRIPS] [REPEAT]
//! [SPIN_US,...]` (defaults: 20000, 3, `0,50`; `default` = the runtime's default). For every spin value it builds a two-core
//! runtime and measures, `REPEAT` times:
//! - `core->core`: a task on core 0 awaits `call_on(1, ..)` of an empty future, one at a time;
//! - `core->core nop`: the same, the future on core 1 awaiting a `nop` op;
//! - `thread->core`: a plain thread blocks on `Handle::call(0, ..)` of an empty future;
//!
//! and prints the medians (over repeats) of the p50 and p99 latencies and of the CPU time the
//! process used per round trip. Then it leaves the runtime idle for a second and prints the
//! CPU time its core threads used meanwhile (an idle runtime must sleep).

use std::time::{Duration, Instant};

use ziob_runtime::{call_on, nop, Runtime, IDLE_SPIN_DEFAULT};

/// CPU time of the whole process.
fn process_cpu() -> Duration {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into `ts`.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time (ns) the threads named `ziob-core-*` of this process used so far, from
/// `/proc/self/task/*/schedstat`.
fn core_threads_cpu_ns() -> u64 {
    let mut total = 0;
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("ziob-core-") {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
        total += stat
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
    }
    total
}

/// Latency percentiles (µs) and CPU per round trip (µs) of one measured loop.
#[derive(Clone, Copy)]
struct Sample {
    p50_us: f64,
    p99_us: f64,
    cpu_us: f64,
}

fn summarize(mut lat: Vec<Duration>, cpu: Duration) -> Sample {
    lat.sort();
    let at = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    Sample {
        p50_us: at(0.5),
        p99_us: at(0.99),
        cpu_us: cpu.as_secs_f64() * 1e6 / lat.len() as f64,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Measures `n` round trips made by a task on core 0 to core 1; with `op`, the future on core
/// 1 awaits a NOP.
fn core_to_core(rt: &Runtime, n: usize, op: bool) -> Sample {
    let cpu0 = process_cpu();
    let lat = rt
        .run_on(0, move || async move {
            let mut lat = Vec::with_capacity(n);
            for _ in 0..n {
                let t = Instant::now();
                if op {
                    call_on(1, || async { nop().await.unwrap() }).await.unwrap();
                } else {
                    call_on(1, || async {}).await.unwrap();
                }
                lat.push(t.elapsed());
            }
            lat
        })
        .unwrap();
    summarize(lat, process_cpu() - cpu0)
}

/// Measures `n` round trips from this (plain) thread to core 0.
fn thread_to_core(rt: &Runtime, n: usize) -> Sample {
    let h = rt.handle();
    let cpu0 = process_cpu();
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        futures::executor::block_on(h.call(0, || async {})).unwrap();
        lat.push(t.elapsed());
    }
    summarize(lat, process_cpu() - cpu0)
}

/// One kind of round trip, measured on a runtime.
type Measure<'a> = dyn Fn(&Runtime) -> Sample + 'a;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args.first().map_or(20_000, |a| a.parse().unwrap());
    let repeat: usize = args.get(1).map_or(3, |a| a.parse().unwrap());
    let spins: Vec<Duration> = args
        .get(2)
        .map_or("0,50", |s| s.as_str())
        .split(',')
        .map(|s| match s {
            "default" => IDLE_SPIN_DEFAULT,
            us => Duration::from_micros(us.parse().unwrap()),
        })
        .collect();
    println!(
        "round trips {n}, repeats {repeat}; medians over repeats; cpu = process CPU per round trip"
    );
    println!("spin_us  kind             p50_us   p99_us   cpu_us   | idle: core CPU ms in 1 s");
    for spin in spins {
        let rt = Runtime::builder().cores(2).idle_spin(spin).build().unwrap();
        let kinds: [(&str, &Measure<'_>); 3] = [
            ("core->core", &|rt| core_to_core(rt, n, false)),
            ("core->core nop", &|rt| core_to_core(rt, n, true)),
            ("thread->core", &|rt| thread_to_core(rt, n)),
        ];
        // Warm up.
        core_to_core(&rt, n / 10, false);
        let mut rows = Vec::new();
        for (name, f) in kinds {
            let samples: Vec<Sample> = (0..repeat).map(|_| f(&rt)).collect();
            rows.push((
                name,
                median(samples.iter().map(|s| s.p50_us).collect()),
                median(samples.iter().map(|s| s.p99_us).collect()),
                median(samples.iter().map(|s| s.cpu_us).collect()),
            ));
        }
        let before = core_threads_cpu_ns();
        std::thread::sleep(Duration::from_secs(1));
        let idle_ms = (core_threads_cpu_ns() - before) as f64 / 1e6;
        for (i, (name, p50, p99, cpu)) in rows.iter().enumerate() {
            let idle = if i == 0 {
                format!("| {idle_ms:.2}")
            } else {
                String::new()
            };
            println!(
                "{:>7}  {:<15} {:>7.1}  {:>7.1}  {:>7.1}   {idle}",
                spin.as_micros(),
                name,
                p50,
                p99,
                cpu
            );
        }
        drop(rt);
    }
}
