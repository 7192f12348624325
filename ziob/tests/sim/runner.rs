//! The seed loop and its knobs (environment variables, see `docs/TESTING.md`), the panic
//! catcher, and the failure report.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::driver::{run_seed, SeedStats};
use super::settings::{Backend, Settings};

/// Panic messages seen on any thread while a seed runs (a panic in the buffer is a bug even
/// when the runtime survives it).
static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn install_panic_catcher() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current().name().unwrap_or("?").to_string();
        PANICS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!("thread '{thread}': {info}"));
        previous(info);
    }));
}

fn take_panics() -> Vec<String> {
    std::mem::take(&mut *PANICS.lock().unwrap_or_else(|p| p.into_inner()))
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, got {v:?}"))
    })
}

/// Runs the seeds the environment asks for (or `default_seeds` from `ZIOB_SIM_BASE`, 0 by
/// default) on `backend`; panics with the failing seeds.
///
/// Knobs: `ZIOB_SIM_SEED=N` replays one seed; `ZIOB_SIM_SEEDS=N` runs N seeds;
/// `ZIOB_SIM_BASE=N` is the first seed; `ZIOB_SIM_REPEAT=N` runs each seed up to N times
/// (the interleaving is real, a racy failure may need several); `ZIOB_SIM_WATCHDOG_MS`
/// (default 20000) is the hang watchdog per epoch; `ZIOB_SIM_MAX_FAILURES` (default 5)
/// stops after that many failures.
pub fn run_seeds(backend: Backend, test_name: &str, default_seeds: u64) {
    install_panic_catcher();
    let seeds: Vec<u64> = match env_u64("ZIOB_SIM_SEED") {
        Some(seed) => vec![seed],
        None => {
            let base = env_u64("ZIOB_SIM_BASE").unwrap_or(0);
            let n = env_u64("ZIOB_SIM_SEEDS").unwrap_or(default_seeds);
            (base..base + n).collect()
        }
    };
    let watchdog = Duration::from_millis(env_u64("ZIOB_SIM_WATCHDOG_MS").unwrap_or(20_000));
    let max_failures = env_u64("ZIOB_SIM_MAX_FAILURES").unwrap_or(5) as usize;
    let repeat = env_u64("ZIOB_SIM_REPEAT").unwrap_or(1).max(1);
    let start = Instant::now();
    let mut total = SeedStats::default();
    let mut failures: Vec<(u64, String)> = Vec::new();
    let mut ran = 0;
    let mut passed_time = Duration::ZERO;
    for &seed in &seeds {
        let settings = Settings::from_seed(seed, backend);
        // A racy seed may need several runs: stop at its first failure.
        let (mut result, mut panics) = (Ok(SeedStats::default()), Vec::new());
        let seed_start = Instant::now();
        for _ in 0..repeat {
            take_panics();
            result = run_seed(&settings, watchdog);
            panics = take_panics();
            if result.is_err() || !panics.is_empty() {
                break;
            }
        }
        ran += 1;
        let failure = match (result, panics.is_empty()) {
            (Ok(stats), true) => {
                total.add(&stats);
                passed_time += seed_start.elapsed();
                None
            }
            (Ok(_), false) => {
                Some("a panic happened (the operations' answers were all right)".to_string())
            }
            (Err(e), _) => Some(e),
        };
        if let Some(mut msg) = failure {
            for p in &panics {
                msg += &format!("\n  panic: {p}");
            }
            let first_line = msg.lines().next().unwrap_or("").to_string();
            eprintln!(
                "\n=== SIM FAILURE: {test_name} seed {seed} ===\n{settings}\n  {msg}\n  replay: ZIOB_SIM_SEED={seed} cargo test -p ziob --test {test_name} -- --nocapture\n"
            );
            failures.push((seed, first_line));
            if failures.len() >= max_failures {
                break;
            }
        }
    }
    eprintln!(
        "{test_name}: {ran} seeds in {:.1?} ({:.1?} in passing seeds): {} failed; {} epochs, {} ops ({} futures dropped), {} cuts mid-work, {} closes, {} bytes acknowledged, {} bytes verified after cuts",
        start.elapsed(),
        passed_time,
        failures.len(),
        total.epochs,
        total.ops,
        total.dropped,
        total.cuts_mid_work,
        total.closes,
        total.acked_bytes,
        total.verified_bytes
    );
    if !failures.is_empty() {
        let list: Vec<String> = failures
            .iter()
            .map(|(seed, first)| format!("  seed {seed}: {first}"))
            .collect();
        panic!(
            "{} of {ran} seeds failed (replay one with ZIOB_SIM_SEED=N):\n{}",
            failures.len(),
            list.join("\n")
        );
    }
}
