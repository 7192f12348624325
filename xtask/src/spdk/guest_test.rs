//! `cargo xtask spdk-test`: every SPDK test of the repository in the QEMU guest. Builds the
//! test binaries and the CLI with the feature `spdk`, boots a guest with hugepages per
//! geometry, binds the ZNS controller to `uio_pci_generic`, runs each test binary and the CLI
//! smoke checks over `spdk:` as one step each, and prints a summary. Exits 0 only if every
//! step of every geometry passed; [`EXIT_NOT_INSTALLED`] when SPDK is not installed.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::cargo;
use crate::vm::{self, sh_quote, VmOpts};

/// Exit status of `spdk-test` when no SPDK install is found (distinct from test failures, 1,
/// and task errors, 2).
pub const EXIT_NOT_INSTALLED: i32 = 3;

/// The guest geometries `spdk-test` runs in.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeometryChoice {
    /// 16 zones of 8 MiB, capacity 6 MiB, max open 4, max active 6 (the guest default)
    Default,
    /// 8 zones of 1 MiB, capacity 768 KiB, max open 2, max active 3
    Small,
    /// Default, then small
    Both,
}

/// Options of `spdk-test`.
#[derive(clap::Args, Debug)]
pub struct TestArgs {
    /// SPDK install prefix (default: $SPDK_DIR, else /opt/spdk)
    #[arg(long)]
    pub spdk: Option<PathBuf>,
    /// Guest geometry
    #[arg(long, value_enum, default_value = "both")]
    pub geometry: GeometryChoice,
    /// 2 MiB hugepages reserved in the guest
    #[arg(long, default_value_t = 512)]
    pub hugepages: u32,
    /// Kill each guest after this many seconds
    #[arg(long, default_value_t = 2400)]
    pub timeout_secs: u64,
}

/// Guest options of one geometry, parsed with `vm-run`'s own flags and defaults.
fn vm_opts(geometry: &[&str], a: &TestArgs, out_dir: &Path) -> Result<VmOpts> {
    let mut args: Vec<String> = geometry.iter().map(|s| s.to_string()).collect();
    args.extend([
        format!("--hugepages={}", a.hugepages),
        format!("--timeout-secs={}", a.timeout_secs),
        format!("--out-dir={}", out_dir.display()),
        "--env=ZIOB_SPDK=1".into(),
    ]);
    VmOpts::from_args(args).context("guest options")
}

fn not_installed(dir: &Path) -> i32 {
    eprintln!(
        "spdk-test: no SPDK install in {} (no lib/pkgconfig/spdk_nvme.pc).\n\
         Install SPDK >= 25.09 once (a 4-10 minute build on 2 cores), then run again:\n\
         \x20   git clone --branch v25.09 --recursive https://github.com/spdk/spdk /opt/spdk-src\n\
         \x20   cargo xtask spdk-build --src /opt/spdk-src --prefix {}\n\
         \x20   cargo xtask spdk-test --spdk {}\n\
         (docs/SPDK.md has the packages and the manual equivalent.) Exit status {EXIT_NOT_INSTALLED}.",
        dir.display(),
        dir.display(),
        dir.display()
    );
    EXIT_NOT_INSTALLED
}

/// `cargo build -p PACKAGE --features spdk --bin BIN`; the binary's path.
fn build_bin(package: &str, bin: &str) -> Result<PathBuf> {
    let build = cargo::Build {
        packages: vec![package.into()],
        features: Some("spdk".into()),
        bins: vec![bin.into()],
        ..cargo::Build::default()
    };
    build
        .executables("spdk-test")?
        .into_iter()
        .find(|e| e.target == bin)
        .map(|e| e.path)
        .with_context(|| format!("cargo did not report the `{bin}` executable"))
}

/// The shell functions of the guest script (besides [`super::BIND_FUNCTIONS`]): the step
/// runner (records `ok`/`FAILED` per step in `$ZIOB_OUT_DIR/summary`) and the CLI checks.
const GUEST_FUNCTIONS: &str = r#"
P=$ZIOB_NVME_PCI; SPEC=spdk:$P; failed=0
: > "$ZIOB_OUT_DIR/summary"
step() {
  name=$1; shift
  echo; echo "=== [$GEO] $name"
  t0=$(date +%s)
  if "$@"; then r=ok; else r=FAILED; failed=$((failed + 1)); fi
  echo "=== [$GEO] $name: $r ($(( $(date +%s) - t0 )) s)"
  echo "$r $GEO $name ($(( $(date +%s) - t0 )) s)" >> "$ZIOB_OUT_DIR/summary"
}
in_dir() { ( cd "$1" && shift && CARGO_MANIFEST_DIR="$PWD" exec "$@" ); }
expect() { # expect TEXT CMD...: CMD succeeds and its output contains TEXT
  want=$1; shift
  out=$("$@" 2>&1); rc=$?
  printf '%s\n' "$out" | tail -n 15
  [ $rc -eq 0 ] || { echo "--- exit status $rc: $*"; return 1; }
  case "$out" in *"$want"*) ;; *) echo "--- output lacks \"$want\": $*"; return 1;; esac
}
cli_checks() { # every command must succeed (no set -e: it is off inside `if`)
  expect "zones:                $ZIOB_ZNS_ZONES" "$ZIOB" info "$SPEC" || return 1
  expect "max active zones:     $ZIOB_ZNS_MAX_ACTIVE" "$ZIOB" info "$SPEC" || return 1
  "$ZIOB" reset "$SPEC" --all || return 1
  printf 'hello spdk' | "$ZIOB" write "$SPEC" --zone 0 --pad || return 1
  expect '"write_pointer": 4096' "$ZIOB" report "$SPEC" --zone 0 --json || return 1
  got=$("$ZIOB" read "$SPEC" --zone 0 --offset 0 --length 4096 | head -c 10)
  [ "$got" = "hello spdk" ] || { echo "--- read back \"$got\""; return 1; }
  off=$(printf 'zone one' | "$ZIOB" append "$SPEC" --zone 1 --pad) || return 1
  [ "$off" = 0 ] || { echo "--- append landed at \"$off\", not 0"; return 1; }
  "$ZIOB" finish "$SPEC" 0 || return 1
  expect 'Full' "$ZIOB" report "$SPEC" --zone 0 || return 1
  if printf x | "$ZIOB" write "$SPEC" --zone 0 --pad 2> /tmp/ziob-err; then
    echo "--- a write into a Full zone succeeded"; return 1
  fi
  grep 'Zone Is Full' /tmp/ziob-err || return 1
  "$ZIOB" reset "$SPEC" --all || return 1
  expect 'Empty' "$ZIOB" report "$SPEC" --zone 0 || return 1
  echo "CLI over spdk: info, reset, write, report, read, append, finish, refused write, reset: ok"
}
"#;

/// One test binary the guest runs.
struct GuestBin {
    label: String,
    dir: PathBuf,
    exe: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

fn guest_script(bins: &[GuestBin], ziob: &Path, geo: &str) -> String {
    let mut s = format!("GEO={geo}; ZIOB={}\n", sh_quote(&ziob.to_string_lossy()));
    s.push_str(super::BIND_FUNCTIONS);
    s.push_str(GUEST_FUNCTIONS);
    s.push_str("step 'bind the controller to uio_pci_generic' bind_controller\n");
    for b in bins {
        let _ = write!(
            s,
            "step {} in_dir {} env",
            sh_quote(&b.label),
            sh_quote(&b.dir.to_string_lossy())
        );
        for (k, v) in &b.env {
            // Values may name guest variables ($P): double quotes.
            let _ = write!(s, " \"{k}={v}\"");
        }
        let _ = write!(s, " {}", sh_quote(&b.exe.to_string_lossy()));
        for a in &b.args {
            let _ = write!(s, " {}", sh_quote(a));
        }
        s.push('\n');
    }
    s.push_str("step 'ziob CLI over spdk: (smoke checks)' cli_checks\n");
    s.push_str("echo; echo \"=== [$GEO] $failed step(s) failed\"; exit $((failed > 0))\n");
    s
}

/// Runs `spdk-test`; the exit status of the task.
pub fn run_test(a: &TestArgs) -> Result<i32> {
    let dir = super::install_prefix(a.spdk.as_deref(), std::env::var_os("SPDK_DIR"));
    let Some(pc) = super::find_install(&dir) else {
        return Ok(not_installed(&dir));
    };
    eprintln!("[spdk-test] SPDK: {}", pc.display());
    // Only this process and the cargo it starts read it (the backend's build script).
    std::env::set_var("SPDK_DIR", std::path::absolute(&dir)?);
    let assets = crate::setup::ensure(&crate::setup::SetupOpts {
        install: false,
        kernel_pkg: None,
        refresh_kernel: false,
        verbose: true,
    })?;

    let mut bins = Vec::new();
    let feature = ["--features=spdk".to_string()];
    let backends = cargo::test_executables(
        "spdk-test",
        &["ziob-backends".into()],
        false,
        &[
            &feature[..],
            &[
                "--test=spdk_guest".into(),
                "--test=backend_conformance".into(),
                "--test=differential_emu_vs_nvme".into(),
            ],
        ]
        .concat(),
    )?;
    let ziob_tests = cargo::test_executables(
        "spdk-test",
        &["ziob".into()],
        false,
        &[&feature[..], &["--test=spdk_guest".into()]].concat(),
    )?;
    for b in backends.into_iter().chain(ziob_tests) {
        let (args, env): (Vec<&str>, Vec<(String, String)>) = if b.label.contains("spdk_guest") {
            (vec!["--test-threads=1", "--nocapture"], vec![])
        } else if b.label.contains("backend_conformance") {
            (vec!["--test-threads=1", "spdk::"], vec![])
        } else if b.label.contains("differential") {
            (
                vec!["--nocapture"],
                vec![("ZIOB_DIFF_SPEC".into(), "spdk:$P".into())],
            )
        } else {
            continue;
        };
        bins.push(GuestBin {
            label: b.label.replace(" (test)", ""),
            dir: b.dir,
            exe: b.exe,
            args: args.into_iter().map(String::from).collect(),
            env,
        });
    }
    // The backend's own tests first, then ZIOB over it.
    let rank = |l: &str| {
        [
            "backends: spdk_guest",
            "conformance",
            "differential",
            "ziob: spdk_guest",
        ]
        .iter()
        .position(|k| l.contains(k))
        .unwrap_or(9)
    };
    bins.sort_by_key(|b| rank(&b.label));
    if bins.len() != 4 {
        bail!(
            "expected 4 SPDK test binaries, cargo built {}: {:?}",
            bins.len(),
            bins.iter().map(|b| &b.label).collect::<Vec<_>>()
        );
    }
    let ziob = build_bin("ziob-cli", "ziob")?;

    let geometries: Vec<(&str, Vec<&str>)> = match a.geometry {
        GeometryChoice::Default => vec![("default", vec![])],
        GeometryChoice::Small => vec![("small", small_geometry())],
        GeometryChoice::Both => vec![("default", vec![]), ("small", small_geometry())],
    };
    let mut summary = String::new();
    let mut failed_runs = 0;
    for (name, geo) in &geometries {
        let out = tempfile::Builder::new()
            .prefix("ziob-spdk-test-")
            .tempdir()?;
        let opts = vm_opts(geo, a, out.path())?;
        let script = vm::script_prelude(&opts, &std::env::current_dir()?)
            + &guest_script(&bins, &ziob, name);
        eprintln!("[spdk-test] geometry {name}: booting the guest");
        let res = vm::run_job(&assets, &opts, &script)?;
        let lines = std::fs::read_to_string(out.path().join("summary")).unwrap_or_default();
        summary.push_str(&lines);
        if res.exit_code != 0 {
            failed_runs += 1;
            let _ = writeln!(
                summary,
                "FAILED {name}: guest exit status {}{}",
                res.exit_code,
                if res.exit_code == 124 {
                    " (timeout)"
                } else {
                    ""
                }
            );
        }
        eprintln!(
            "[spdk-test] geometry {name}: guest exit {} after {:.0} s",
            res.exit_code, res.total_secs
        );
    }
    let steps = summary.lines().filter(|l| l.starts_with("ok ")).count();
    println!(
        "\nspdk-test summary (SPDK in {}):\n{summary}",
        dir.display()
    );
    if failed_runs == 0 {
        println!(
            "spdk-test: all {steps} steps passed in {} geometr{}",
            geometries.len(),
            if geometries.len() == 1 { "y" } else { "ies" }
        );
        Ok(0)
    } else {
        println!(
            "spdk-test: {failed_runs} of {} geometr{} failed",
            geometries.len(),
            if geometries.len() == 1 { "y" } else { "ies" }
        );
        Ok(1)
    }
}

fn small_geometry() -> Vec<&'static str> {
    vec![
        "--zones=8",
        "--zone-size=1M",
        "--zone-capacity=768K",
        "--max-open=2",
        "--max-active=3",
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn bin(label: &str, exe: &str) -> GuestBin {
        GuestBin {
            label: label.into(),
            dir: PathBuf::from("/"),
            exe: PathBuf::from(exe),
            args: vec![],
            env: vec![("ZIOB_DIFF_SPEC".into(), "spdk:$P".into())],
        }
    }

    /// The guest script runs every step even after one failed, records each in the summary
    /// and exits non-zero if any failed. Run on the host with `sh`: binding fails here (no
    /// such PCI device) and so does the CLI step (`ZIOB` is `false`).
    #[test]
    fn every_step_runs_and_any_failure_fails_the_run() {
        let out = tempfile::tempdir().unwrap();
        let script = guest_script(
            &[
                bin("backends: spdk_guest", "/bin/true"),
                bin("backends: failing", "/bin/false"),
                bin("ziob: spdk_guest", "/bin/true"),
            ],
            Path::new("/bin/false"),
            "test",
        );
        let st = Command::new("sh")
            .arg("-c")
            .arg(&script)
            .env("ZIOB_OUT_DIR", out.path())
            .env("ZIOB_NVME_PCI", "0000:ff:1f.7")
            .env("ZIOB_ZNS_ZONES", "16")
            .env("ZIOB_ZNS_MAX_ACTIVE", "6")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert_eq!(st.code(), Some(1));
        let summary = std::fs::read_to_string(out.path().join("summary")).unwrap();
        let status: Vec<(&str, bool)> = summary
            .lines()
            .map(|l| (l, l.starts_with("ok test ")))
            .collect();
        assert_eq!(status.len(), 5, "{summary}");
        assert!(!status[0].1 && status[0].0.contains("bind the controller"));
        assert!(status[1].1 && status[1].0.contains("backends: spdk_guest"));
        assert!(!status[2].1 && status[2].0.starts_with("FAILED test backends: failing"));
        assert!(status[3].1 && status[3].0.contains("ziob: spdk_guest"));
        assert!(!status[4].1 && status[4].0.contains("ziob CLI over spdk:"));
    }

    /// Both geometries are valid guest options, with the hugepages and `ZIOB_SPDK=1` the
    /// tests need.
    #[test]
    fn geometries_are_valid_guest_options() {
        let a = TestArgs {
            spdk: None,
            geometry: GeometryChoice::Both,
            hugepages: 512,
            timeout_secs: 60,
        };
        let d = vm_opts(&[], &a, Path::new("/tmp/x")).unwrap();
        assert_eq!((d.zones, d.max_active, d.hugepages), (16, 6, 512));
        assert_eq!(d.envs, ["ZIOB_SPDK=1"]);
        let s = vm_opts(&small_geometry(), &a, Path::new("/tmp/x")).unwrap();
        assert_eq!(
            (s.zones, s.zone_size, s.max_open, s.max_active),
            (8, 1 << 20, 2, 3)
        );
        assert_eq!(s.out_dir.as_deref(), Some(Path::new("/tmp/x")));
    }

    /// Guest variables in a binary's environment are expanded in the guest, not quoted away.
    #[test]
    fn env_values_expand_guest_variables() {
        let s = guest_script(&[bin("x", "/bin/true")], Path::new("/bin/false"), "g");
        assert!(s.contains(" \"ZIOB_DIFF_SPEC=spdk:$P\" "), "{s}");
    }
}
