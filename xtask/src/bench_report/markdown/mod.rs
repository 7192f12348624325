//! Writing `docs/benchmarks.md` and its SVG figures from a results directory: one section per
//! question a user asks, each figure with its caption (machine, exact command, date, repeats)
//! and the table of the plotted numbers under it. [`render`] and the [`Doc`] helpers
//! (caption, figure, table) are here; the figures of each question are in `host` (small
//! writes with the buffer), `runtime`, `guest` (backends and fio) and `latency`.

mod guest;
mod host;
mod latency;
mod runtime;

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

use super::data::Stat;
use super::store::{relative_path, Manifest, RunRecord};

/// What [`render`] wrote.
#[derive(Debug, Default)]
pub struct Rendered {
    /// Section headings, in order.
    pub sections: Vec<String>,
    /// SVG files written (absolute paths).
    pub figures: Vec<PathBuf>,
    /// SVG files of an earlier report that this one did not write, deleted from the figure
    /// directory.
    pub removed: Vec<PathBuf>,
    /// Headline ratios (one markdown bullet each), also at the top of the document.
    pub headlines: Vec<String>,
}

/// The questions, in order, with the suites that answer them.
pub const SECTIONS: &[(&str, &[&str])] = &[
    (
        "How much faster are small writes with the buffer?",
        &["append", "commitlog", "manyzones"],
    ),
    (
        "What does the runtime cost per op against tokio-uring/monoio/glommio?",
        &["runtime"],
    ),
    (
        "Which backend for which workload?",
        &[
            "guest-zbd",
            "guest-nvme",
            "guest-spdk",
            "guest-fio-zbd",
            "guest-fio-nvme",
        ],
    ),
    ("What latency do reads of fresh data see?", &["latency"]),
    (
        "How does the store compare with RocksDB?",
        &["kv-demo", "rocksdb-plugin"],
    ),
];

struct Doc<'a> {
    results: &'a Path,
    manifest: &'a Manifest,
    svg_dir: PathBuf,
    svg_link: String,
    raw_link: String,
    md: String,
    out: Rendered,
}

fn size(b: f64) -> String {
    let b = b as u64;
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{}M", b >> 20)
    } else if b >= 1024 && b.is_multiple_of(1024) {
        format!("{}K", b >> 10)
    } else {
        format!("{b}")
    }
}

fn onoff(v: &Value) -> &'static str {
    if v["ziob"].as_bool().unwrap_or(false) {
        "on"
    } else {
        "off"
    }
}

fn ratio(a: Option<Stat>, b: Option<Stat>) -> Option<f64> {
    let (a, b) = (a?, b?);
    (b.median != 0.0).then(|| a.median / b.median)
}

fn show_ratio(r: Option<f64>) -> String {
    r.map(|r| format!("{r:.2}×")).unwrap_or_else(|| "–".into())
}

/// The backend part of a device spec: `emu`, `zbd`, `nvme`, ...
fn backend(v: &Value) -> String {
    v["dev"]
        .as_str()
        .and_then(|d| d.split(':').next())
        .unwrap_or("?")
        .to_string()
}

impl Doc<'_> {
    fn skip_line(&mut self, suite: &str) {
        let reason = self
            .manifest
            .skip_reason(suite)
            .unwrap_or("skipped: not run in this report (no result)");
        let _ = writeln!(self.md, "- `{suite}`: {reason}\n");
    }

    fn caption(&mut self, runs: &[&RunRecord]) {
        for r in runs {
            let _ = writeln!(
                self.md,
                "*{}: {}; {} repeats per point (medians, whiskers and ranges min–max); {}; {:.0} s. \
                 Command:* `{}` *— raw: {}*\n",
                r.suite,
                r.machine.describe(),
                r.repeats,
                self.manifest.date,
                r.secs,
                r.command,
                r.files
                    .iter()
                    .map(|f| format!("[{f}]({}/{f})", self.raw_link))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }

    fn figure(
        &mut self,
        name: &str,
        alt: &str,
        svg: impl FnOnce(&Path) -> Result<()>,
    ) -> Result<()> {
        let path = self.svg_dir.join(format!("{name}.svg"));
        svg(&path).with_context(|| format!("drawing {}", path.display()))?;
        let _ = writeln!(self.md, "![{alt}]({}/{name}.svg)\n", self.svg_link);
        self.out.figures.push(path);
        Ok(())
    }

    fn table(&mut self, head: &[&str], rows: &[Vec<String>]) {
        let _ = writeln!(self.md, "| {} |", head.join(" | "));
        let _ = writeln!(
            self.md,
            "|{}",
            head.iter().map(|_| "---|").collect::<String>()
        );
        for r in rows {
            let _ = writeln!(self.md, "| {} |", r.join(" | "));
        }
        self.md.push('\n');
    }
}

fn num_u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or(0)
}

/// Renders the report of the results directory `results` into `md_path`, with the SVGs in
/// `<md dir>/benchmarks/`.
pub fn render(results: &Path, md_path: &Path) -> Result<Rendered> {
    let manifest = Manifest::load(results)?;
    let docs_dir = md_path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let svg_dir = docs_dir.join("benchmarks");
    fs::create_dir_all(&svg_dir).with_context(|| format!("creating {}", svg_dir.display()))?;
    let abs_docs = super::store::absolute(&docs_dir);
    let mut doc = Doc {
        results,
        manifest: &manifest,
        svg_link: "benchmarks".into(),
        raw_link: relative_path(&abs_docs, &super::store::absolute(results)),
        svg_dir,
        md: String::new(),
        out: Rendered::default(),
    };
    for (question, suites) in SECTIONS {
        let _ = writeln!(doc.md, "## {question}\n");
        doc.out.sections.push(question.to_string());
        let ran: Vec<&RunRecord> = suites.iter().filter_map(|s| manifest.run(s)).collect();
        for s in suites.iter() {
            if manifest.run(s).is_none() {
                doc.skip_line(s);
            }
        }
        // Guest backends share one figure; everything else has its own.
        let backends: Vec<&RunRecord> = ran
            .iter()
            .copied()
            .filter(|r| matches!(r.suite.as_str(), "guest-zbd" | "guest-nvme" | "guest-spdk"))
            .collect();
        if !backends.is_empty() {
            doc.guest_backends(&backends)?;
        }
        for r in ran {
            match r.suite.as_str() {
                "append" => doc.append(r)?,
                "commitlog" => doc.commitlog(r)?,
                "manyzones" => doc.manyzones(r)?,
                "runtime" => doc.runtime(r)?,
                "latency" => doc.latency(r)?,
                "guest-fio-nvme" => doc.guest_fio_nvme(r)?,
                "guest-fio-zbd" => doc.guest_fio_zbd(r)?,
                _ => {}
            }
        }
    }
    let mut head = String::new();
    let _ = writeln!(
        head,
        "# ZIOB benchmarks\n\n\
         Generated by `{}` on {} (a {} run). Do not edit by hand: re-run the command. Every \
         figure names the machine, the exact command, the date and the repeats; every number is \
         measured (median of the repeats, with min–max). Under QEMU TCG absolute numbers vary \
         between runs: compare within a figure.\n",
        manifest.command,
        manifest.date,
        if manifest.quick { "`--quick`" } else { "full" }
    );
    let _ = writeln!(head, "## Headline numbers\n");
    if doc.out.headlines.is_empty() {
        head.push_str("- no suite ran\n");
    }
    for h in &doc.out.headlines {
        let _ = writeln!(head, "- {h}");
    }
    head.push('\n');
    let _ = writeln!(head, "Questions:\n");
    for (q, _) in SECTIONS {
        let anchor: String = q
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '/')
            .collect::<String>()
            .replace('/', "")
            .replace(' ', "-");
        let _ = writeln!(head, "- [{q}](#{anchor})");
    }
    head.push('\n');
    let md = head + &doc.md;
    fs::write(md_path, md).with_context(|| format!("writing {}", md_path.display()))?;
    doc.out.removed = remove_stale_svgs(&doc.svg_dir, &doc.out.figures)?;
    Ok(doc.out)
}

/// Deletes the `*.svg` files directly in `svg_dir` that are not in `written` (figures of an
/// earlier report whose suite did not run, or was renamed, this time); the deleted paths.
/// Nothing else in the directory is touched.
fn remove_stale_svgs(svg_dir: &Path, written: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let keep: Vec<_> = written.iter().filter_map(|p| p.file_name()).collect();
    let mut removed = Vec::new();
    for entry in fs::read_dir(svg_dir).with_context(|| format!("listing {}", svg_dir.display()))? {
        let path = entry?.path();
        let is_svg = path.extension().is_some_and(|e| e == "svg") && path.is_file();
        if is_svg && !path.file_name().is_some_and(|n| keep.contains(&n)) {
            fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
            removed.push(path);
        }
    }
    removed.sort();
    Ok(removed)
}
