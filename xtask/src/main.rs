//! ZIOB developer tasks: `cargo xtask vm-setup | vm-run | vm-test | test` (see xtask/README.md).

mod bench_report;
mod cargo;
mod ci;
mod cpio;
mod dpkg;
mod setup;
mod spdk;
mod vm;
mod zenfs;

use anyhow::{bail, Result};
use clap::{Parser, Subcommand};
use std::fmt::Write as _;

use vm::{sh_quote, VmOpts};

#[derive(Parser)]
#[command(name = "xtask", about = "ZIOB developer tasks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Clone)]
struct SetupArgs {
    /// Kernel package to unpack (default: what linux-image-amd64 depends on, -unsigned build)
    #[arg(long)]
    kernel_pkg: Option<String>,
    /// Re-resolve the kernel package instead of using the cached choice
    #[arg(long)]
    refresh_kernel: bool,
    /// Never run apt-get: fail with a message naming what is missing
    #[arg(long)]
    no_install: bool,
}

#[derive(Subcommand)]
#[allow(clippy::enum_variant_names)]
enum Cmd {
    /// Install/download/extract/build everything the guest needs (idempotent, cached)
    VmSetup {
        #[command(flatten)]
        setup: SetupArgs,
    },
    /// Run a command in a fresh guest with emulated ZNS NVMe + conventional NVMe + zoned null_blk
    VmRun {
        #[command(flatten)]
        vm: VmOpts,
        #[command(flatten)]
        setup: SetupArgs,
        /// Command and arguments (after `--`), run in the guest with the host root at the same
        /// paths and the current directory as cwd
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Build test binaries on the host (cargo test --no-run) and run them in a guest
    VmTest {
        #[command(flatten)]
        vm: VmOpts,
        #[command(flatten)]
        setup: SetupArgs,
        /// Package(s) to test (default: the whole workspace)
        #[arg(short, long = "package")]
        packages: Vec<String>,
        /// Build in release mode
        #[arg(long)]
        release: bool,
        /// Extra argument for `cargo test --no-run` (repeatable), e.g. --cargo-arg=--features=x
        #[arg(long = "cargo-arg", allow_hyphen_values = true)]
        cargo_args: Vec<String>,
        /// Arguments for every test binary (after `--`), e.g. a filter or --test-threads=1
        #[arg(last = true)]
        test_args: Vec<String>,
    },
    /// The whole test command (README, CI): fmt check, clippy -D warnings, cargo test, rustdoc
    /// without warnings, then vm-setup and vm-test of the packages with guest tests in two
    /// geometries
    Test {
        /// Only the host steps (fmt, clippy, cargo test, doc)
        #[arg(long)]
        host_only: bool,
    },
    /// Build a user-supplied SPDK source tree for the `spdk` feature and install it (docs/SPDK.md)
    SpdkBuild(spdk::BuildArgs),
    /// Every SPDK test and the CLI over spdk: in the guest (exit 3: SPDK not installed)
    SpdkTest(spdk::TestArgs),
    /// Run the benchmark suites and write docs/benchmarks.md with plots (docs/benchmarks/)
    BenchReport(bench_report::Args),
    /// Build a user-supplied ZenFS tree against the system librocksdb (docs/ROCKSDB-BENCH.md)
    ZenfsBuild(zenfs::BuildArgs),
}

fn setup_opts(a: &SetupArgs) -> setup::SetupOpts {
    setup::SetupOpts {
        install: !a.no_install,
        kernel_pkg: a.kernel_pkg.clone(),
        refresh_kernel: a.refresh_kernel,
        verbose: true,
    }
}

fn main() {
    match real_main() {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            std::process::exit(2);
        }
    }
}

fn report(assets: &setup::Assets, out: &vm::RunOutcome) {
    eprintln!(
        "[vm] kernel {} ({}), boot->command {}, total {:.1} s, exit status {}",
        assets.kernel_version,
        if assets.pvh { "PVH vmlinux" } else { "bzImage" },
        out.boot_secs
            .map(|b| format!("{b:.1} s"))
            .unwrap_or_else(|| "n/a".into()),
        out.total_secs,
        out.exit_code
    );
}

fn real_main() -> Result<i32> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Test { host_only } => ci::run(host_only),
        Cmd::SpdkBuild(a) => spdk::run_build(&a),
        Cmd::SpdkTest(a) => spdk::run_test(&a),
        Cmd::BenchReport(args) => bench_report::run(args),
        Cmd::ZenfsBuild(a) => zenfs::run_build(&a),
        Cmd::VmSetup { setup } => {
            let t = std::time::Instant::now();
            let a = setup::ensure(&setup_opts(&setup))?;
            println!("cache:     {}", setup::cache_dir().display());
            println!("qemu:      {}", a.qemu.display());
            println!(
                "firmware:  {}",
                a.bios
                    .as_ref()
                    .map(|b| b.display().to_string())
                    .unwrap_or_else(|| "QEMU default (SeaBIOS)".into())
            );
            println!(
                "kernel:    {} {} ({})",
                a.kernel_version,
                a.kernel.display(),
                if a.pvh { "PVH boot" } else { "bzImage boot" }
            );
            println!("initramfs: {}", a.initramfs.display());
            println!("vm-setup done in {:.1} s", t.elapsed().as_secs_f64());
            Ok(0)
        }
        Cmd::VmRun { vm, setup, command } => {
            vm.validate()?;
            let assets = setup::ensure(&setup_opts(&setup))?;
            let cwd = std::env::current_dir()?;
            let mut script = vm::script_prelude(&vm, &cwd);
            script.push_str("exec");
            for a in &command {
                script.push(' ');
                script.push_str(&sh_quote(a));
            }
            script.push('\n');
            let out = vm::run_job(&assets, &vm, &script)?;
            report(&assets, &out);
            Ok(out.exit_code)
        }
        Cmd::VmTest {
            vm,
            setup,
            packages,
            release,
            cargo_args,
            test_args,
        } => {
            vm.validate()?;
            let assets = setup::ensure(&setup_opts(&setup))?;
            let bins = cargo::test_executables("vm-test", &packages, release, &cargo_args)?;
            if bins.is_empty() {
                bail!("cargo built no test binaries");
            }
            let cwd = std::env::current_dir()?;
            let mut s = vm::script_prelude(&vm, &cwd);
            s.push_str("failed=0; failed_names=\n");
            s.push_str(
                "run_test() {\n  name=$1; dir=$2; shift 2\n  echo; echo \"     Running $name in the guest\"\n  \
                 ( cd \"$dir\" && CARGO_MANIFEST_DIR=\"$dir\" exec \"$@\" ) || { failed=$((failed + 1)); failed_names=\"$failed_names $name\"; }\n}\n",
            );
            for b in &bins {
                let _ = write!(
                    s,
                    "run_test {} {} {}",
                    sh_quote(&b.label),
                    sh_quote(&b.dir.to_string_lossy()),
                    sh_quote(&b.exe.to_string_lossy())
                );
                for a in &test_args {
                    s.push(' ');
                    s.push_str(&sh_quote(a));
                }
                s.push('\n');
            }
            let _ = write!(
                s,
                "echo\nif [ $failed -eq 0 ]; then echo \"vm-test: all {n} test binaries succeeded\"; exit 0; fi\n\
                 echo \"vm-test: $failed of {n} test binaries failed:$failed_names\"; exit 1\n",
                n = bins.len()
            );
            let out = vm::run_job(&assets, &vm, &s)?;
            report(&assets, &out);
            Ok(out.exit_code)
        }
    }
}
