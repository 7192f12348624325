//! Starting cargo builds for the tasks: `vm-test` and `spdk-test` (`cargo test --no-run`, the
//! test executables), `spdk-test` (`cargo build --bin`, one executable) and `bench-report`
//! (`cargo build --release` of the benchmarks). One [`Build`] describes the command; the
//! executables are read from cargo's `--message-format=json` artifacts.

use std::ffi::OsString;
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

/// A `cargo build` or `cargo test --no-run` of the workspace.
#[derive(Debug, Clone, Default)]
pub struct Build {
    /// `cargo test --no-run` (the test executables) instead of `cargo build`.
    pub tests: bool,
    /// `--release`.
    pub release: bool,
    /// `-p` packages; none: `--workspace`.
    pub packages: Vec<String>,
    /// `--features` (comma-separated), if any.
    pub features: Option<String>,
    /// `--bin` targets.
    pub bins: Vec<String>,
    /// Further arguments, after the others (`--test=NAME`, `--features=x`).
    pub extra: Vec<String>,
    /// Environment of the build (`SPDK_DIR` for the `spdk` feature's build script).
    pub env: Vec<(String, OsString)>,
}

/// One executable cargo built (a `compiler-artifact` message with an `executable`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Executable {
    /// The target name (`ziob-bench`, `spdk_guest`).
    pub target: String,
    /// The target kinds (`bin`, `test`, `lib`).
    pub kinds: Vec<String>,
    /// Built with the test harness (`profile.test`).
    pub test: bool,
    /// The executable.
    pub path: PathBuf,
    /// The directory of the package's Cargo.toml.
    pub package_dir: PathBuf,
}

impl Executable {
    /// `<package dir name>: <target> (<kinds>)`, e.g. `backends: spdk_guest (test)`.
    pub fn label(&self) -> String {
        let pkg = self
            .package_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        format!("{pkg}: {} ({})", self.target, self.kinds.join(","))
    }
}

impl Build {
    /// The cargo command (`$CARGO`, as cargo ran xtask, else `cargo` from PATH); output
    /// and message format are left to the caller.
    pub fn command(&self) -> Command {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        if self.tests {
            cmd.args(["test", "--no-run"]);
        } else {
            cmd.arg("build");
        }
        if self.release {
            cmd.arg("--release");
        }
        if self.packages.is_empty() {
            cmd.arg("--workspace");
        }
        for p in &self.packages {
            cmd.args(["-p", p]);
        }
        if let Some(f) = &self.features {
            cmd.args(["--features", f]);
        }
        for b in &self.bins {
            cmd.args(["--bin", b]);
        }
        cmd.args(&self.extra);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs the build (diagnostics on stderr, as cargo renders them; `tag` prefixes the
    /// printed command) and returns the executables it reports, in cargo's order.
    pub fn executables(&self, tag: &str) -> Result<Vec<Executable>> {
        let mut cmd = self.command();
        cmd.arg("--message-format=json-render-diagnostics");
        cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());
        eprintln!("[{tag}] {cmd:?}");
        let mut child = cmd.spawn().context("running cargo")?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut found = Vec::new();
        for line in std::io::BufReader::new(stdout).lines() {
            found.extend(parse_executable(&line?));
        }
        let st = child.wait()?;
        if !st.success() {
            bail!(
                "cargo {} failed: {st}",
                if self.tests { "test --no-run" } else { "build" }
            );
        }
        Ok(found)
    }
}

/// The executable of one line of cargo's JSON messages, if it reports one.
pub fn parse_executable(line: &str) -> Option<Executable> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    if v["reason"] != "compiler-artifact" {
        return None;
    }
    let path = PathBuf::from(v["executable"].as_str()?);
    let manifest = PathBuf::from(v["manifest_path"].as_str().unwrap_or("."));
    Some(Executable {
        target: v["target"]["name"].as_str().unwrap_or("?").to_string(),
        kinds: v["target"]["kind"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|k| k.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
        test: v["profile"]["test"] == true,
        path,
        package_dir: manifest.parent().map(PathBuf::from).unwrap_or_default(),
    })
}

/// A test executable of [`test_executables`], as `vm-test` and `spdk-test` run it.
#[derive(Debug, Clone)]
pub struct TestBin {
    /// `<package dir>: <target> (<kinds>)`.
    pub label: String,
    /// The executable.
    pub exe: PathBuf,
    /// Its package directory (the tests' working directory and `CARGO_MANIFEST_DIR`).
    pub dir: PathBuf,
}

/// `cargo test --no-run` of `packages` (none: the workspace) with `extra` arguments; the test
/// executables. `tag` prefixes the printed command (`vm-test`, `spdk-test`).
pub fn test_executables(
    tag: &str,
    packages: &[String],
    release: bool,
    extra: &[String],
) -> Result<Vec<TestBin>> {
    let build = Build {
        tests: true,
        release,
        packages: packages.to_vec(),
        extra: extra.to_vec(),
        ..Build::default()
    };
    Ok(build
        .executables(tag)?
        .into_iter()
        .filter(|e| e.test)
        .map(|e| TestBin {
            label: e.label(),
            exe: e.path,
            dir: e.package_dir,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(b: &Build) -> Vec<String> {
        b.command()
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn command_lines_of_the_three_builds() {
        let tests = Build {
            tests: true,
            packages: vec!["ziob-backends".into()],
            extra: vec!["--features=spdk".into(), "--test=spdk_guest".into()],
            ..Build::default()
        };
        assert_eq!(
            args(&tests),
            [
                "test",
                "--no-run",
                "-p",
                "ziob-backends",
                "--features=spdk",
                "--test=spdk_guest"
            ]
        );
        let workspace = Build {
            tests: true,
            release: true,
            ..Build::default()
        };
        assert_eq!(
            args(&workspace),
            ["test", "--no-run", "--release", "--workspace"]
        );
        let bin = Build {
            packages: vec!["ziob-cli".into()],
            features: Some("spdk".into()),
            bins: vec!["ziob".into()],
            ..Build::default()
        };
        assert_eq!(
            args(&bin),
            [
                "build",
                "-p",
                "ziob-cli",
                "--features",
                "spdk",
                "--bin",
                "ziob"
            ]
        );
        let bench = Build {
            release: true,
            packages: vec!["ziob-benches".into()],
            features: Some("peers".into()),
            bins: vec!["rt-bench".into(), "ziob-bench".into()],
            env: vec![("SPDK_DIR".into(), "/p".into())],
            ..Build::default()
        };
        let cmd = bench.command();
        assert!(cmd
            .get_envs()
            .any(|(k, v)| k == "SPDK_DIR" && v == Some(std::ffi::OsStr::new("/p"))));
        assert_eq!(
            args(&bench),
            [
                "build",
                "--release",
                "-p",
                "ziob-benches",
                "--features",
                "peers",
                "--bin",
                "rt-bench",
                "--bin",
                "ziob-bench"
            ]
        );
    }

    #[test]
    fn executables_are_read_from_artifact_messages() {
        let test = r#"{"reason":"compiler-artifact","manifest_path":"/w/backends/Cargo.toml","target":{"name":"spdk_guest","kind":["test"]},"profile":{"test":true},"executable":"/w/target/debug/deps/spdk_guest-1"}"#;
        let e = parse_executable(test).unwrap();
        assert_eq!(e.label(), "backends: spdk_guest (test)");
        assert!(e.test);
        assert_eq!(e.path, PathBuf::from("/w/target/debug/deps/spdk_guest-1"));
        assert_eq!(e.package_dir, PathBuf::from("/w/backends"));
        let bin = test
            .replace(r#""test":true"#, r#""test":false"#)
            .replace(r#"["test"]"#, r#"["bin"]"#);
        assert!(!parse_executable(&bin).unwrap().test);
        // A library (no executable), another message, and non-JSON report nothing.
        let lib = r#"{"reason":"compiler-artifact","target":{"name":"x","kind":["lib"]},"profile":{"test":false},"executable":null}"#;
        assert_eq!(parse_executable(lib), None);
        assert_eq!(
            parse_executable(r#"{"reason":"build-finished","success":true}"#),
            None
        );
        assert_eq!(parse_executable("warning: x"), None);
    }
}
