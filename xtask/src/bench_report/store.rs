//! The results store: one directory per run of the report (`benches/results/<date>/`) holding
//! the benchmarks' raw output files and `manifest.json`, which says for every suite what ran
//! (exact command, machine, repeats, files) or why it was skipped. The report is rendered from
//! this directory alone, so it can be re-rendered (and tested) without running anything.

use std::fs;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// File name of the manifest inside a results directory.
pub const MANIFEST: &str = "manifest.json";

/// Where a suite ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// CPUs the benchmark could use.
    pub cores: u32,
    /// Kernel release.
    pub kernel: String,
    /// CPU model name.
    pub cpu: String,
    /// `host`, or `QEMU guest (TCG)`.
    pub place: String,
    /// The host's 1-minute load average when the suite started (the machine is shared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<f64>,
}

impl Machine {
    /// One line for a figure caption.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{}, {} cores, Linux {}, {}",
            self.place, self.cores, self.kernel, self.cpu
        );
        if let Some(l) = self.load {
            s += &format!(", host load average {l:.1} at the start");
        }
        s
    }
}

/// What a suite's output files are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[allow(clippy::enum_variant_names)] // named after the binaries
pub enum Tool {
    /// One `rt-bench --json` document with its own repeats (`samples`).
    RtBench,
    /// One `ziob-bench --json` document per repeat (a result object or an array of them).
    ZiobBench,
    /// One `nvme-bench --json` document with its own rounds.
    NvmeBench,
    /// One `guest-bench` table (stdout) per repeat.
    GuestBench,
}

/// One suite that ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// Suite id (see `suites::SuiteId`).
    pub suite: String,
    /// How to read `files`.
    pub tool: Tool,
    /// The exact command of one repeat (as typed in a shell; in the guest, as the guest ran it).
    pub command: String,
    /// Repeats of every measured point.
    pub repeats: u32,
    /// Output files, relative to the results directory.
    pub files: Vec<String>,
    /// Where it ran.
    pub machine: Machine,
    /// Wall time of the whole suite, seconds.
    pub secs: f64,
}

/// A suite that was not measured, and why.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Skip {
    /// Suite id.
    pub suite: String,
    /// The reason, as printed in the report.
    pub reason: String,
}

/// Everything one report run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    /// UTC date of the run, `YYYY-MM-DD`.
    pub date: String,
    /// Whether this was a `--quick` run.
    pub quick: bool,
    /// The command that produced this directory.
    pub command: String,
    /// Suites measured.
    pub runs: Vec<RunRecord>,
    /// Suites skipped.
    pub skipped: Vec<Skip>,
}

impl Manifest {
    /// Reads `dir/manifest.json`.
    pub fn load(dir: &Path) -> Result<Manifest> {
        let p = dir.join(MANIFEST);
        let text = fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))
    }

    /// Writes `dir/manifest.json`.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let p = dir.join(MANIFEST);
        fs::write(&p, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("writing {}", p.display()))
    }

    /// The run of `suite`, if it ran.
    pub fn run(&self, suite: &str) -> Option<&RunRecord> {
        self.runs.iter().find(|r| r.suite == suite)
    }

    /// The suites that were meant to run and failed (a benchmark's non-zero exit, a guest that
    /// did not run): reasons starting with `failed`, as the runner writes them. A suite skipped
    /// because something is not installed or not built is not among them.
    pub fn failed(&self) -> Vec<&Skip> {
        self.skipped
            .iter()
            .filter(|s| s.reason.starts_with("failed"))
            .collect()
    }

    /// Why `suite` was skipped, if it was.
    pub fn skip_reason(&self, suite: &str) -> Option<&str> {
        self.skipped
            .iter()
            .find(|s| s.suite == suite)
            .map(|s| s.reason.as_str())
    }
}

/// Today's UTC date as `YYYY-MM-DD` (civil-from-days, proleptic Gregorian).
pub fn utc_date_today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    utc_date(secs)
}

/// The UTC date of `unix_secs` as `YYYY-MM-DD`.
pub fn utc_date(unix_secs: u64) -> String {
    let z = (unix_secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `to` relative to the directory `from` (both absolute or both relative to the same place),
/// with `/` separators, for links in the markdown.
pub fn relative_path(from: &Path, to: &Path) -> String {
    let norm = |p: &Path| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for c in p.components() {
            match c {
                Component::ParentDir => {
                    out.pop();
                }
                Component::Normal(s) => out.push(s.to_string_lossy().into_owned()),
                _ => {}
            }
        }
        out
    };
    let (a, b) = (norm(from), norm(to));
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<String> = vec!["..".into(); a.len() - common];
    parts.extend(b[common..].iter().cloned());
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

/// `path` made absolute against the current directory (without touching the file system).
pub fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
        assert_eq!(utc_date(1_796_083_200), "2026-12-01");
        assert_eq!(utc_date(1_796_169_599), "2026-12-01");
    }

    #[test]
    fn relative_paths() {
        assert_eq!(
            relative_path(Path::new("/r/docs"), Path::new("/r/benches/results/d")),
            "../benches/results/d"
        );
        assert_eq!(
            relative_path(Path::new("/r/docs"), Path::new("/r/docs/benchmarks")),
            "benchmarks"
        );
        assert_eq!(relative_path(Path::new("/r"), Path::new("/r")), ".");
    }
}
