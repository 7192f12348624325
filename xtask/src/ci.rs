//! `cargo xtask test`: the whole test command of the README and of CI.
//!
//! In order, stopping at the first failure: `cargo fmt --check`, `cargo clippy --workspace
//! --all-targets -- -D warnings`, `cargo test --workspace`, `cargo doc --workspace --no-deps`
//! with rustdoc warnings as errors, then `vm-setup` and, for every
//! guest geometry in [`GUEST_GEOMETRIES`], `vm-test` of the test targets that need the guest
//! ([`GUEST_TESTS`]; everything else already ran on the host, and timing-sensitive tests are
//! not meant for TCG). Each step's time is printed, and a summary at the end.

use anyhow::{Context, Result};
use std::process::Command;
use std::time::Instant;

/// `(package, test target)` of the tests that need the guest's zoned devices (on the host
/// they print why they skip). A new guest test joins here.
pub const GUEST_TESTS: &[(&str, &str)] = &[
    ("ziob-backends", "backend_conformance"),
    ("ziob-backends", "differential_emu_vs_nvme"),
    ("ziob-backends", "nvme_passthrough_guest"),
    ("ziob-backends", "zbd_open_errors"),
    ("ziob", "conformance_through_buffer"),
    ("xtask", "guest"),
];

/// The guest geometries the guest tests run with: the harness defaults (capacity < zone size,
/// open 4 / active 6), and small zones with tight limits (open 2 / active 3) on both the ZNS
/// namespace and null_blk.
pub const GUEST_GEOMETRIES: &[(&str, &[&str])] = &[
    ("default", &[]),
    (
        "tight",
        &[
            "--zone-size=4M",
            "--zone-capacity=3M",
            "--max-open=2",
            "--max-active=3",
            "--nullblk-zone-size=4M",
            "--nullblk-zone-capacity=3M",
            "--nullblk-max-open=2",
            "--nullblk-max-active=3",
        ],
    ),
];

struct Step {
    name: String,
    program: String,
    args: Vec<String>,
}

fn steps(host_only: bool) -> Result<Vec<Step>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let me = std::env::current_exe()
        .context("finding the xtask executable")?
        .to_string_lossy()
        .into_owned();
    let cargo_step = |name: &str, args: &[&str]| Step {
        name: name.to_string(),
        program: cargo.clone(),
        args: args.iter().map(|a| a.to_string()).collect(),
    };
    let mut out = vec![
        cargo_step("fmt", &["fmt", "--check"]),
        cargo_step(
            "clippy",
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        ),
        cargo_step("test", &["test", "--workspace"]),
        cargo_step(
            "doc",
            &[
                "doc",
                "--workspace",
                "--no-deps",
                "--config",
                "build.rustdocflags=[\"-D\", \"warnings\"]",
            ],
        ),
    ];
    if host_only {
        return Ok(out);
    }
    out.push(Step {
        name: "vm-setup".into(),
        program: me.clone(),
        args: vec!["vm-setup".into()],
    });
    for (geometry, opts) in GUEST_GEOMETRIES {
        let mut args = vec!["vm-test".to_string()];
        let mut packages: Vec<&str> = GUEST_TESTS.iter().map(|(p, _)| *p).collect();
        packages.dedup();
        for p in packages {
            args.push(format!("--package={p}"));
        }
        for (_, test) in GUEST_TESTS {
            args.push(format!("--cargo-arg=--test={test}"));
        }
        args.extend(opts.iter().map(|o| o.to_string()));
        out.push(Step {
            name: format!("vm-test ({geometry} geometry)"),
            program: me.clone(),
            args,
        });
    }
    Ok(out)
}

/// Runs every step; returns the exit status of the first failing one (0 if all passed).
pub fn run(host_only: bool) -> Result<i32> {
    let all = Instant::now();
    let steps = steps(host_only)?;
    let mut times = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        eprintln!(
            "[xtask test] step {}/{}: {} ({} {})",
            i + 1,
            steps.len(),
            step.name,
            step.program,
            step.args.join(" ")
        );
        let t = Instant::now();
        let status = Command::new(&step.program)
            .args(&step.args)
            .status()
            .with_context(|| format!("running {}", step.program))?;
        let secs = t.elapsed().as_secs_f64();
        times.push((step.name.as_str(), secs));
        if !status.success() {
            eprintln!(
                "[xtask test] FAILED: {} ({status}) after {secs:.0} s",
                step.name
            );
            return Ok(status.code().unwrap_or(1));
        }
    }
    eprintln!("[xtask test] all {} steps passed:", steps.len());
    for (name, secs) in times {
        eprintln!("[xtask test]   {name:<26} {secs:>6.0} s");
    }
    eprintln!(
        "[xtask test]   {:<26} {:>6.0} s",
        "total",
        all.elapsed().as_secs_f64()
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_the_readme_command_then_the_guest() {
        let s = steps(false).unwrap();
        let names: Vec<&str> = s.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "fmt",
                "clippy",
                "test",
                "doc",
                "vm-setup",
                "vm-test (default geometry)",
                "vm-test (tight geometry)"
            ]
        );
        assert_eq!(
            s[1].args.join(" "),
            "clippy --workspace --all-targets -- -D warnings"
        );
        assert!(s[6].args.contains(&"--max-active=3".to_string()));
        assert!(s[6].args.contains(&"--package=ziob-backends".to_string()));
        assert!(s[6]
            .args
            .contains(&"--cargo-arg=--test=backend_conformance".to_string()));
        assert_eq!(steps(true).unwrap().len(), 4);
    }

    #[test]
    fn guest_geometries_parse_as_vm_options() {
        for (name, args) in GUEST_GEOMETRIES {
            crate::vm::VmOpts::from_args(args.iter().copied())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}
