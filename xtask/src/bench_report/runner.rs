//! Running the suites: the release build, the host suites (one process per invocation, stdout
//! kept as the raw result file, stderr as a log), and the guest job (one boot running every
//! guest step, writing its files into the results directory over the `--out-dir` share).

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result};
use indicatif::ProgressBar;

use super::machine;
use super::store::{Machine, RunRecord, Skip};
use super::suites::{GuestStep, HostSuite};
use crate::setup;
use crate::vm::{self, sh_quote, VmOpts};

/// What every suite needs: where binaries and results are, and the progress bar.
pub struct Ctx {
    /// `target/release`.
    pub bin_dir: PathBuf,
    /// The results directory of this run (absolute).
    pub results: PathBuf,
    /// Progress (hidden when stderr is not a terminal).
    pub pb: ProgressBar,
    /// The host.
    pub host: Machine,
}

/// The outcome of one suite: measured, or skipped with a reason.
pub enum Outcome {
    /// It ran.
    Ran(RunRecord),
    /// It did not; the reason.
    Skipped(Skip),
}

/// `cargo build --release -p ziob-benches --features FEATURES --bin ...`, with `SPDK_DIR` set
/// to `spdk_dir` when given (the backend's build script finds SPDK there).
fn build_command(features: &str, spdk_dir: Option<&Path>, bins: &[&str]) -> Command {
    crate::cargo::Build {
        release: true,
        packages: vec!["ziob-benches".into()],
        features: Some(features.into()),
        bins: bins.iter().map(|b| b.to_string()).collect(),
        env: spdk_dir
            .map(|d| ("SPDK_DIR".to_string(), d.as_os_str().to_owned()))
            .into_iter()
            .collect(),
        ..crate::cargo::Build::default()
    }
    .command()
}

/// Runs [`build_command`]; cargo's output goes to `log`. Returns the command line.
pub fn build(features: &str, spdk_dir: Option<&Path>, bins: &[&str], log: &Path) -> Result<String> {
    let mut cmd = build_command(features, spdk_dir, bins);
    let mut line = spdk_dir
        .map(|d| format!("SPDK_DIR={} ", sh_quote(&d.to_string_lossy())))
        .unwrap_or_default();
    line.push_str("cargo");
    for a in cmd.get_args() {
        line.push(' ');
        line.push_str(&a.to_string_lossy());
    }
    let status = cmd
        .stdout(Stdio::null())
        .stderr(fs::File::create(log)?)
        .status()
        .with_context(|| format!("running {:?}", cmd.get_program()))?;
    if !status.success() {
        anyhow::bail!("{line} failed ({status}); see {}", log.display());
    }
    Ok(line)
}

fn last_line(path: &Path) -> String {
    fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| "no output".into())
}

fn command_line(bin: &Path, args: &[String]) -> String {
    let mut s = sh_quote(&bin.to_string_lossy());
    for a in args {
        s.push(' ');
        s.push_str(&sh_quote(a));
    }
    s
}

/// Removes the stdout file of a failed invocation when it holds nothing (its log stays).
fn remove_if_empty(path: &Path) {
    if fs::metadata(path).is_ok_and(|m| m.len() == 0) {
        let _ = fs::remove_file(path);
    }
}

fn remove_devices(files: &[String]) {
    for f in files {
        let _ = fs::remove_file(f);
    }
}

/// Runs one host suite: `invocations` processes, each one progress step.
pub fn run_host(ctx: &Ctx, s: &HostSuite) -> Outcome {
    let started = Instant::now();
    let mut host = ctx.host.clone();
    host.load = machine::load_average();
    let bin = ctx.bin_dir.join(s.bin);
    let mut files = Vec::new();
    for r in 1..=s.invocations {
        ctx.pb
            .set_message(format!("host: {} ({} {r}/{})", s.id, s.bin, s.invocations));
        // Every invocation creates its emu device afresh: the repeats are independent.
        remove_devices(&s.device_files);
        let out = format!("{}-r{r}.json", s.id);
        let log = format!("{}-r{r}.log", s.id);
        let res = (|| -> Result<bool> {
            let status = Command::new(&bin)
                .args(&s.args)
                .stdin(Stdio::null())
                .stdout(fs::File::create(ctx.results.join(&out))?)
                .stderr(fs::File::create(ctx.results.join(&log))?)
                .status()
                .with_context(|| format!("starting {}", bin.display()))?;
            Ok(status.success())
        })();
        ctx.pb.inc(1);
        match res {
            Ok(true) => files.push(out),
            Ok(false) => {
                remove_devices(&s.device_files);
                remove_if_empty(&ctx.results.join(&out));
                ctx.pb.inc(u64::from(s.invocations - r));
                return Outcome::Skipped(Skip {
                    suite: s.id.into(),
                    reason: format!(
                        "failed: `{}` (repeat {r}): {}",
                        command_line(Path::new(s.bin), &s.args),
                        last_line(&ctx.results.join(&log))
                    ),
                });
            }
            Err(e) => {
                remove_devices(&s.device_files);
                ctx.pb.inc(u64::from(s.invocations - r));
                return Outcome::Skipped(Skip {
                    suite: s.id.into(),
                    reason: format!("failed: {e:#}"),
                });
            }
        }
    }
    remove_devices(&s.device_files);
    Outcome::Ran(RunRecord {
        suite: s.id.into(),
        tool: s.tool,
        command: command_line(Path::new(&format!("target/release/{}", s.bin)), &s.args),
        repeats: s.repeats,
        files,
        machine: host,
        secs: started.elapsed().as_secs_f64(),
    })
}

/// Default guest options (`vm-run` without flags) with the results directory shared.
fn guest_opts(out_dir: &Path, spdk: bool, quick: bool) -> Result<VmOpts> {
    let mut o = VmOpts::from_args(std::iter::empty::<&str>())?;
    o.out_dir = Some(out_dir.to_path_buf());
    o.timeout_secs = if quick { 900 } else { 3600 };
    if spdk {
        o.hugepages = 512;
    }
    Ok(o)
}

/// Takes the ZNS controller from the kernel's nvme driver and binds it to uio_pci_generic for
/// SPDK (the binding of `cargo xtask spdk-test`); the kernel's zbd/nvme devices are gone
/// afterwards. Its output goes to `spdk-bind.log`; if it fails, the SPDK step fails and says so.
fn bind_uio() -> String {
    format!(
        "P=$ZIOB_NVME_PCI\n{}bind_controller > $O/spdk-bind.log 2>&1\n",
        crate::spdk::BIND_FUNCTIONS
    )
}

/// The guest job script: every step's invocations, their exit status in `status`.
fn guest_script(bin_dir: &Path, steps: &[GuestStep]) -> String {
    let mut s = String::from("O=$ZIOB_OUT_DIR; : > $O/status\n");
    let mut bound = false;
    for st in steps {
        if st.spdk && !bound {
            bound = true;
            s.push_str(&bind_uio());
        }
        let bin = sh_quote(&bin_dir.join(st.bin).to_string_lossy());
        // Arguments are guest shell words: `$ZIOB_*` must expand, nothing else needs quoting.
        let args = st.args.join(" ");
        for r in 1..=st.invocations {
            let ext = if st.bin == "guest-bench" {
                "txt"
            } else {
                "json"
            };
            let _ = writeln!(
                s,
                "{bin} {args} > $O/{id}-r{r}.{ext} 2> $O/{id}-r{r}.log; echo \"{id} {r} $?\" >> $O/status",
                id = st.id
            );
        }
    }
    s
}

/// Runs every guest step in one guest boot (one progress step). Returns one outcome per step.
pub fn run_guest(ctx: &Ctx, steps: &[GuestStep], quick: bool) -> Vec<Outcome> {
    let skip_all = |reason: String| -> Vec<Outcome> {
        steps
            .iter()
            .map(|s| {
                Outcome::Skipped(Skip {
                    suite: s.id.into(),
                    reason: reason.clone(),
                })
            })
            .collect()
    };
    let started = Instant::now();
    ctx.pb.set_message("guest: setup (cached assets only)");
    let load = machine::load_average();
    let assets = match setup::ensure(&setup::SetupOpts {
        install: false,
        kernel_pkg: None,
        refresh_kernel: false,
        verbose: false,
    }) {
        Ok(a) => a,
        Err(e) => {
            ctx.pb.inc(1);
            return skip_all(format!(
                "skipped: the QEMU guest is not available ({e:#}); run `cargo xtask vm-setup`"
            ));
        }
    };
    let spdk = steps.iter().any(|s| s.spdk);
    let opts = match guest_opts(&ctx.results, spdk, quick) {
        Ok(o) => o,
        Err(e) => {
            ctx.pb.inc(1);
            return skip_all(format!("skipped: guest options: {e:#}"));
        }
    };
    ctx.pb
        .set_message(format!("guest: {} steps in one TCG guest", steps.len()));
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let mut script = vm::script_prelude(&opts, &cwd);
    script.push_str(&guest_script(&ctx.bin_dir, steps));
    let run = ctx.pb.suspend(|| vm::run_job(&assets, &opts, &script));
    ctx.pb.inc(1);
    let out = match run {
        Ok(o) => o,
        Err(e) => return skip_all(format!("failed: the guest did not run: {e:#}")),
    };
    let status = fs::read_to_string(ctx.results.join("status")).unwrap_or_default();
    let _ = fs::remove_file(ctx.results.join("status"));
    let secs = started.elapsed().as_secs_f64();
    let mut gm = machine::guest(opts.smp, &assets.kernel_version);
    gm.load = load;
    steps
        .iter()
        .map(|st| {
            let mut files = Vec::new();
            let mut failure = None;
            for r in 1..=st.invocations {
                let code = status
                    .lines()
                    .find_map(|l| {
                        let w: Vec<&str> = l.split_whitespace().collect();
                        (w.len() == 3 && w[0] == st.id && w[1] == r.to_string())
                            .then(|| w[2].to_string())
                    })
                    .unwrap_or_else(|| "none".into());
                let ext = if st.bin == "guest-bench" {
                    "txt"
                } else {
                    "json"
                };
                if code == "0" {
                    files.push(format!("{}-r{r}.{ext}", st.id));
                } else if failure.is_none() {
                    failure = Some(format!(
                        "failed in the guest (exit status {code}, guest exit {}): `{} {}`: {}",
                        out.exit_code,
                        st.bin,
                        st.args.join(" "),
                        last_line(&ctx.results.join(format!("{}-r{r}.log", st.id)))
                    ));
                }
            }
            match failure {
                Some(reason) => Outcome::Skipped(Skip {
                    suite: st.id.into(),
                    reason,
                }),
                None => Outcome::Ran(RunRecord {
                    suite: st.id.into(),
                    tool: st.tool,
                    command: format!(
                        "cargo xtask vm-run -- {} {}",
                        format_args!("target/release/{}", st.bin),
                        st.args.join(" ")
                    ),
                    repeats: st.repeats,
                    files,
                    machine: gm.clone(),
                    secs,
                }),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_report::suites::guest_steps;

    #[test]
    fn guest_script_records_every_invocation() {
        let steps = guest_steps(true, false);
        let s = guest_script(Path::new("/t/release"), &steps);
        let total: u32 = steps.iter().map(|s| s.invocations).sum();
        assert_eq!(s.matches(">> $O/status").count() as u32, total);
        assert!(s.contains("/t/release/ziob-bench --dev zbd:$ZIOB_ZNS_BLOCK"));
        assert!(!s.contains("uio_pci_generic"));
        let with_spdk = guest_script(Path::new("/t"), &guest_steps(true, true));
        let bind = with_spdk.find("uio_pci_generic").unwrap();
        assert!(
            bind > with_spdk.find("nvme-bench").unwrap(),
            "SPDK binds last"
        );
    }

    /// The `spdk` feature's build gets the SPDK prefix in `SPDK_DIR` (the backend's build
    /// script finds SPDK only there or on `PKG_CONFIG_PATH`); the plain build has no `spdk`.
    #[test]
    fn the_spdk_build_is_told_where_spdk_is() {
        let with = build_command("peers,spdk", Some(Path::new("/p/spdk")), &["ziob-bench"]);
        let env: Vec<_> = with.get_envs().collect();
        assert!(
            env.contains(&(
                std::ffi::OsStr::new("SPDK_DIR"),
                Some(std::ffi::OsStr::new("/p/spdk"))
            )),
            "{env:?}"
        );
        let args: Vec<_> = with.get_args().collect();
        assert_eq!(
            &args[..6],
            [
                "build",
                "--release",
                "-p",
                "ziob-benches",
                "--features",
                "peers,spdk"
            ]
        );
        assert_eq!(&args[6..], ["--bin", "ziob-bench"]);
        let without = build_command("peers", None, &["ziob-bench"]);
        assert!(without.get_envs().all(|(k, _)| k != "SPDK_DIR"));
    }

    #[test]
    fn guest_options_are_the_vm_defaults() {
        let o = guest_opts(Path::new("/tmp/x"), true, true).unwrap();
        o.validate().unwrap();
        assert_eq!(o.hugepages, 512);
        assert_eq!(o.out_dir.as_deref(), Some(Path::new("/tmp/x")));
    }
}
