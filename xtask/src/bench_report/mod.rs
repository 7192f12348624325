//! `cargo xtask bench-report [--quick] [--no-guest] [--out DIR]`: runs the benchmark suites
//! (release builds), keeps their raw output under `benches/results/<date>/` with a manifest,
//! and writes `docs/benchmarks.md` with one SVG plot and table per figure.
//!
//! - [`suites`]: what runs, with which arguments (`--quick` or full);
//! - [`runner`]: the build, host processes and the guest job, with a progress bar;
//! - [`store`]: the results directory and its manifest;
//! - [`data`]: output files → medians with min–max;
//! - [`plots`]: the SVGs; [`markdown`]: the document.
//!
//! `--from DIR` re-renders the document from an existing results directory without running
//! anything (that is also what the test does with a fixed set of result files).

mod data;
mod machine;
mod markdown;
mod plots;
mod runner;
mod store;
mod suites;

#[cfg(test)]
mod tests;

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use runner::{Ctx, Outcome};
use store::{Manifest, Skip};

/// Options of `cargo xtask bench-report`.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Short runs (under 10 minutes on a 2-core machine): fewer points, 0.5–1 s windows,
    /// still 3 repeats per point
    #[arg(long)]
    pub quick: bool,
    /// Skip the guest suites (QEMU)
    #[arg(long)]
    pub no_guest: bool,
    /// Directory for benchmarks.md and benchmarks/*.svg (default: docs/ of the workspace)
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Results directory (default: `benches/results/<UTC date>/` of the workspace)
    #[arg(long)]
    pub results: Option<PathBuf>,
    /// Only render the document from an existing results directory (runs nothing)
    #[arg(long, value_name = "RESULTS_DIR", conflicts_with_all = ["quick", "no_guest", "results"])]
    pub from: Option<PathBuf>,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(|d| store::absolute(Path::new(&d)))
        .unwrap_or_else(|| root.join("target"))
}

/// The SPDK prefix the `spdk:` suite builds against, found the way `cargo xtask spdk-test`
/// finds it (`spdk_dir` is `$SPDK_DIR`, else `/opt/spdk`), when `ziob-benches` has an `spdk`
/// feature and SPDK is installed there; otherwise the reason.
fn spdk_available(root: &Path, spdk_dir: Option<OsString>) -> Result<PathBuf, String> {
    let manifest = fs::read_to_string(root.join("benches/Cargo.toml")).unwrap_or_default();
    if !has_feature(&manifest, "spdk") {
        return Err("skipped: `ziob-bench` has no `spdk:` device in this tree (no `spdk` feature in benches/Cargo.toml; issue #17 adds it)".into());
    }
    let prefix = crate::spdk::install_prefix(None, spdk_dir);
    if crate::spdk::find_install(&prefix).is_none() {
        return Err(format!(
            "skipped: SPDK is not installed (no lib/pkgconfig/spdk_nvme.pc under {}: set SPDK_DIR to the prefix; see docs/SPDK.md)",
            prefix.display()
        ));
    }
    Ok(store::absolute(&prefix))
}

/// Whether the Cargo manifest text declares `feature` in its `[features]` table.
fn has_feature(manifest: &str, feature: &str) -> bool {
    manifest
        .lines()
        .skip_while(|l| l.trim() != "[features]")
        .skip(1)
        .take_while(|l| !l.trim().starts_with('['))
        .filter_map(|l| l.split_once('='))
        .any(|(name, _)| name.trim() == feature)
}

/// Names the figures of an earlier report that [`markdown::render`] deleted.
fn print_removed(r: &markdown::Rendered) {
    for p in &r.removed {
        eprintln!(
            "bench-report: removed {} (not part of this report)",
            p.display()
        );
    }
}

/// Runs `cargo xtask bench-report`; returns the exit status.
pub fn run(args: Args) -> Result<i32> {
    let root = workspace_root();
    let out_dir = args.out.clone().unwrap_or_else(|| root.join("docs"));
    let md = out_dir.join("benchmarks.md");
    if let Some(from) = &args.from {
        let r = markdown::render(from, &md)?;
        eprintln!(
            "bench-report: wrote {} ({} sections, {} figures)",
            md.display(),
            r.sections.len(),
            r.figures.len()
        );
        print_removed(&r);
        return Ok(0);
    }
    let started = Instant::now();
    let date = store::utc_date_today();
    let results = store::absolute(
        &args
            .results
            .clone()
            .unwrap_or_else(|| root.join("benches/results").join(&date)),
    );
    fs::create_dir_all(&results).with_context(|| format!("creating {}", results.display()))?;
    let host_suites = suites::host_suites(args.quick);
    let mut spdk = spdk_available(&root, std::env::var_os("SPDK_DIR"));
    let steps: u64 = host_suites
        .iter()
        .map(|s| u64::from(s.invocations))
        .sum::<u64>()
        + 1
        + u64::from(!args.no_guest);
    let pb = ProgressBar::with_draw_target(Some(steps), ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let ctx = Ctx {
        bin_dir: target_dir(&root).join("release"),
        results: results.clone(),
        pb,
        host: machine::host(),
    };
    let mut command = String::from("cargo xtask bench-report");
    if args.quick {
        command.push_str(" --quick");
    }
    if args.no_guest {
        command.push_str(" --no-guest");
    }
    let mut manifest = Manifest {
        date,
        quick: args.quick,
        command,
        runs: Vec::new(),
        skipped: Vec::new(),
    };

    ctx.pb.set_message("release build of the benchmarks");
    let build_started = Instant::now();
    let build_log = target_dir(&root).join("bench-report-build.log");
    let bins = ["rt-bench", "ziob-bench", "nvme-bench", "guest-bench"];
    let build_with = |spdk_dir: Option<&Path>| {
        ctx.pb.suspend(|| {
            let features = if spdk_dir.is_some() {
                "peers,spdk"
            } else {
                "peers"
            };
            eprintln!("bench-report: building the benchmarks (release, features {features}) ...");
            runner::build(features, spdk_dir, &bins, &build_log)
        })
    };
    let build = match (&spdk, build_with(spdk.as_deref().ok())) {
        (_, Ok(line)) => line,
        // The SPDK build can fail where the rest builds: measure the rest.
        (Ok(_), Err(e)) => {
            spdk = Err(format!(
                "skipped: the build with the `spdk` feature failed: {e:#}"
            ));
            build_with(None)?
        }
        (Err(_), Err(e)) => return Err(e),
    };
    let guest_steps = suites::guest_steps(args.quick, spdk.is_ok());
    let build_secs = build_started.elapsed().as_secs_f64();
    ctx.pb.inc(1);
    say(&ctx, format!("bench-report: {build} ({build_secs:.0} s)"));

    for s in &host_suites {
        record(&ctx, &mut manifest, runner::run_host(&ctx, s));
    }
    if args.no_guest {
        for id in suites::GUEST_SUITES {
            manifest.skipped.push(Skip {
                suite: id.to_string(),
                reason: "skipped: `--no-guest`".into(),
            });
        }
    } else {
        for o in runner::run_guest(&ctx, &guest_steps, args.quick) {
            record(&ctx, &mut manifest, o);
        }
        if let Err(reason) = &spdk {
            manifest.skipped.push(Skip {
                suite: "guest-spdk".into(),
                reason: reason.clone(),
            });
        }
    }
    for (id, reason) in suites::not_runnable(&suites::RocksdbPeers::probe(&root)) {
        manifest.skipped.push(Skip {
            suite: id.into(),
            reason,
        });
    }
    ctx.pb.finish_and_clear();
    manifest.save(&results)?;
    let r = markdown::render(&results, &md)?;
    eprintln!(
        "bench-report: {} suites measured, {} skipped; wrote {} ({} figures) and {}; build {:.0} s, total {:.0} s",
        manifest.runs.len(),
        manifest.skipped.len(),
        md.display(),
        r.figures.len(),
        results.display(),
        build_secs,
        started.elapsed().as_secs_f64()
    );
    print_removed(&r);
    for s in &manifest.skipped {
        eprintln!("bench-report: {}: {}", s.suite, s.reason);
    }
    Ok(exit_status(&manifest))
}

/// 0 when every suite ran or was skipped for a stated reason (not installed, not built,
/// `--no-guest`); 1 when a suite failed (the report still lists it with the reason).
fn exit_status(manifest: &Manifest) -> i32 {
    let failed = manifest.failed();
    if failed.is_empty() {
        return 0;
    }
    let names: Vec<&str> = failed.iter().map(|s| s.suite.as_str()).collect();
    eprintln!(
        "bench-report: {} suite(s) failed: {} (exit status 1)",
        failed.len(),
        names.join(", ")
    );
    1
}

fn record(ctx: &Ctx, manifest: &mut Manifest, o: Outcome) {
    match o {
        Outcome::Ran(r) => {
            say(
                ctx,
                format!("bench-report: {} done ({:.0} s)", r.suite, r.secs),
            );
            manifest.runs.push(r);
        }
        Outcome::Skipped(s) => {
            say(ctx, format!("bench-report: {}: {}", s.suite, s.reason));
            manifest.skipped.push(s);
        }
    }
}

/// A status line above the progress bar (plain stderr when the bar is hidden).
fn say(ctx: &Ctx, msg: String) {
    if ctx.pb.is_hidden() {
        eprintln!("{msg}");
    } else {
        ctx.pb.println(msg);
    }
}
