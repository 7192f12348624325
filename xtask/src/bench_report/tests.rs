//! Renders the report from the fixed result files in `xtask/tests/fixtures/bench-report/`
//! and checks every section, table and SVG: a broken plot or table fails here, without
//! running a benchmark.

use std::fs;
use std::path::{Path, PathBuf};

use super::data::{self, Stat};
use super::markdown::{render, SECTIONS};
use super::store::{Machine, RunRecord, Tool};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bench-report")
}

/// The markdown tables, in order: each a list of rows (header first), cells trimmed.
fn tables(md: &str) -> Vec<Vec<Vec<String>>> {
    let mut out = Vec::new();
    let mut cur: Vec<Vec<String>> = Vec::new();
    for line in md.lines().chain(std::iter::once("")) {
        if line.starts_with('|') {
            let cells: Vec<String> = line
                .trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect();
            cur.push(cells);
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    out
}

/// Checks one SVG: XML that parses, an `<svg>` root, and drawn data: a polyline with at
/// least two points (line charts) or at least `min_rects` rectangles besides the background
/// (bar charts). Returns (polylines with ≥ 2 points, rects).
fn check_svg(path: &Path) -> (usize, usize) {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc = roxmltree::Document::parse(&text)
        .unwrap_or_else(|e| panic!("{} is not well-formed XML: {e}", path.display()));
    assert_eq!(
        doc.root_element().tag_name().name(),
        "svg",
        "{}",
        path.display()
    );
    let lines = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .filter(|n| {
            n.attribute("points")
                .map(|p| p.split_whitespace().count() >= 2)
                .unwrap_or(false)
        })
        .count();
    let rects = doc.descendants().filter(|n| n.has_tag_name("rect")).count();
    let texts = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter(|n| n.text().is_some_and(|t| !t.trim().is_empty()))
        .count();
    assert!(texts >= 4, "{}: no axis labels or caption", path.display());
    (lines, rects)
}

#[test]
fn report_renders_from_the_fixed_result_files() {
    let tmp = tempfile::tempdir().unwrap();
    let md_path = tmp.path().join("benchmarks.md");
    let r = render(&fixtures(), &md_path).expect("render");
    let md = fs::read_to_string(&md_path).unwrap();

    // Every question is a section, in order.
    assert_eq!(r.sections.len(), SECTIONS.len());
    let mut at = 0;
    for (q, _) in SECTIONS {
        let h = format!("## {q}\n");
        let pos = md[at..]
            .find(&h)
            .unwrap_or_else(|| panic!("no section {q:?}"));
        at += pos + h.len();
    }
    assert!(md.contains("skipped: not built yet (issue #14"));
    assert!(md.contains("skipped: not built yet (issue #15"));
    assert!(md.contains("`guest-spdk`: skipped: not in the fixture set"));

    // Every figure is linked, exists, and is a drawn SVG.
    let figures = [
        ("append-on-off", true),
        ("commitlog-on-off", true),
        ("manyzones", true),
        ("runtime-nop", true),
        ("runtime-randread-buffered", true),
        ("runtime-randread-direct", true),
        ("runtime-yield", true),
        ("guest-backends", false),
        ("guest-zbd-vs-fio", false),
        ("guest-nvme-vs-fio", false),
        ("latency-cdf", true),
    ];
    assert_eq!(r.figures.len(), figures.len(), "{:?}", r.figures);
    for (name, lines) in figures {
        let link = format!("(benchmarks/{name}.svg)");
        assert!(md.contains(&link), "no link {link}");
        let path = tmp.path().join("benchmarks").join(format!("{name}.svg"));
        let (polylines, rects) = check_svg(&path);
        if lines {
            assert!(polylines >= 2, "{name}: {polylines} data lines");
        } else {
            assert!(rects >= 6, "{name}: {rects} rects (bars)");
        }
    }
    // Each figure has a caption with machine, command, date and repeats: one per suite and
    // figure (the runtime's four groups each have one, the guest backends figure names both
    // of its runs).
    assert_eq!(md.matches("repeats per point").count(), 12);
    assert!(md.contains("host, 2 cores, Linux 6.18.44-fc-v669"));
    assert!(md.contains("QEMU guest (TCG), 2 cores"));
    assert!(md.contains("2026-12-01"));

    // Tables: well formed (same width as the header, a separator row) and the expected rows.
    let ts = tables(&md);
    for t in &ts {
        assert!(t.len() >= 3, "table without rows: {t:?}");
        assert!(t[1].iter().all(|c| c == "---"), "no separator: {t:?}");
        for row in t {
            assert_eq!(row.len(), t[0].len(), "ragged row {row:?}");
        }
        for row in &t[2..] {
            assert!(
                row.iter().any(|c| c.chars().any(|ch| ch.is_ascii_digit())),
                "row without a number: {row:?}"
            );
        }
    }
    let rows: Vec<usize> = ts.iter().map(|t| t.len() - 2).collect();
    // append 2 sizes × 3 zone counts; commitlog 2 × 3; manyzones 8 results; runtime nop
    // 2 QDs × 6 runners, randread buffered / direct 2 × 8, yield 2 × 2; guest backends
    // 2 sizes × 3 zone counts; guest-bench 3 workloads; nvme-bench 5 (workload, QD); latency
    // 2 modes × 2 phases × 2 ops.
    assert_eq!(rows, [6, 6, 8, 12, 16, 16, 4, 6, 3, 5, 8]);
    // The append table holds the file's numbers: 4K × 1 zone, on 5.27× ... (medians).
    let append = &ts[0];
    assert_eq!(append[2][0], "4K");
    assert_eq!(append[2][1], "1");
    let on: f64 = append[2][2].parse().unwrap();
    let off: f64 = append[2][3].parse().unwrap();
    assert!(on > off, "buffered appends are faster in this file");
    // rt-bench has its own repeats: min–max ranges are shown.
    assert!(ts[3][2][2].contains('–'), "{:?}", ts[3][2]);
    assert!(!r.headlines.is_empty());
}

#[test]
fn render_deletes_only_the_svgs_it_did_not_write() {
    let tmp = tempfile::tempdir().unwrap();
    let md_path = tmp.path().join("benchmarks.md");
    let dir = tmp.path().join("benchmarks");
    fs::create_dir_all(dir.join("sub")).unwrap();
    // Left by an earlier report: a figure this one writes again, one it does not.
    fs::write(dir.join("append-on-off.svg"), "old").unwrap();
    fs::write(dir.join("guest-spdk-old.svg"), "old").unwrap();
    // Not ours to delete: other extensions and anything below the figure directory.
    fs::write(dir.join("notes.txt"), "keep").unwrap();
    fs::write(dir.join("figure.svg.bak"), "keep").unwrap();
    fs::write(dir.join("sub").join("nested.svg"), "keep").unwrap();
    fs::write(tmp.path().join("beside.svg"), "keep").unwrap();

    let r = render(&fixtures(), &md_path).expect("render");
    assert_eq!(r.removed, [dir.join("guest-spdk-old.svg")]);
    assert!(!dir.join("guest-spdk-old.svg").exists());
    let rewritten = fs::read_to_string(dir.join("append-on-off.svg")).unwrap();
    assert_ne!(rewritten, "old");
    for keep in [
        dir.join("notes.txt"),
        dir.join("figure.svg.bak"),
        dir.join("sub").join("nested.svg"),
        tmp.path().join("beside.svg"),
    ] {
        assert!(keep.exists(), "{} was deleted", keep.display());
    }
    // Every SVG left in the directory is a figure of this report.
    let mut svgs: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "svg"))
        .collect();
    svgs.sort();
    let mut figures = r.figures.clone();
    figures.sort();
    assert_eq!(svgs, figures);
    // A second render over its own output removes nothing.
    assert!(render(&fixtures(), &md_path).unwrap().removed.is_empty());
}

#[test]
fn ziob_repeats_become_one_point_with_min_and_max() {
    let dir = tempfile::tempdir().unwrap();
    for (i, iops) in [100.0, 300.0, 200.0].iter().enumerate() {
        let doc = serde_json::json!([
            {"bs": 4096, "zones": 1, "ziob": true, "iops": iops},
            {"bs": 4096, "zones": 1, "ziob": false, "iops": iops / 10.0}
        ]);
        fs::write(dir.path().join(format!("r{i}.json")), doc.to_string()).unwrap();
    }
    let rec = RunRecord {
        suite: "append".into(),
        tool: Tool::ZiobBench,
        command: "x".into(),
        repeats: 3,
        files: (0..3).map(|i| format!("r{i}.json")).collect(),
        machine: Machine {
            cores: 1,
            kernel: "k".into(),
            cpu: "c".into(),
            place: "host".into(),
            load: None,
        },
        secs: 0.0,
    };
    let pts = data::ziob_points(dir.path(), &rec, |v| v["ziob"].as_bool()).unwrap();
    assert_eq!(pts.len(), 2);
    assert_eq!(pts[0].0, Some(true));
    let s = data::stat(&pts[0].1, "iops").unwrap();
    assert_eq!(
        s,
        Stat {
            median: 200.0,
            min: 100.0,
            max: 300.0,
            n: 3
        }
    );
    // A broken file is an error, not an empty point.
    fs::write(dir.path().join("r1.json"), "{not json").unwrap();
    assert!(data::ziob_points(dir.path(), &rec, |v| v["ziob"].as_bool()).is_err());
}

#[test]
fn spdk_is_found_only_in_the_features_table() {
    let with = "[package]\nname = \"x\"\n[features]\ndefault = []\nspdk = [\"ziob/spdk\"]\n[dependencies]\n";
    assert!(super::has_feature(with, "spdk"));
    let without = "[features]\npeers = []\n[dependencies]\nspdk = \"1\"\n";
    assert!(!super::has_feature(without, "spdk"));
    let here =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../benches/Cargo.toml"))
            .unwrap();
    assert!(super::has_feature(&here, "peers"));
}

#[test]
fn host_suites_name_real_devices_and_repeat_three_times() {
    for quick in [true, false] {
        for s in super::suites::host_suites(quick) {
            assert!(s.repeats >= 3, "{}", s.id);
            if let Some(i) = s.args.iter().position(|a| a == "--dev") {
                let dev = &s.args[i + 1];
                assert!(
                    dev.starts_with("emu:") || dev.starts_with("mem:"),
                    "{}: {dev}",
                    s.id
                );
                for f in &s.device_files {
                    assert!(dev.contains(f.as_str()), "{}: {f} not in {dev}", s.id);
                }
            }
        }
    }
}

/// `bench-report` finds SPDK where `cargo xtask spdk-test` does: `$SPDK_DIR` (e.g. the
/// `spdk-build --prefix` of docs/SPDK.md), not only a fixed list of prefixes.
#[test]
fn spdk_is_found_under_spdk_dir() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let prefix = tempfile::tempdir().unwrap();
    let dir = Some(prefix.path().as_os_str().to_owned());
    let reason = super::spdk_available(&root, dir.clone()).unwrap_err();
    assert!(
        reason.contains("not installed") && reason.contains(&prefix.path().display().to_string()),
        "{reason}"
    );
    fs::create_dir_all(prefix.path().join("lib/pkgconfig")).unwrap();
    fs::write(prefix.path().join("lib/pkgconfig/spdk_nvme.pc"), "").unwrap();
    assert_eq!(
        super::spdk_available(&root, dir),
        Ok(prefix.path().to_path_buf())
    );
}

/// A suite that failed makes the run fail (exit 1) although the report is written; suites
/// skipped for a stated reason (not installed, not built) do not.
#[test]
fn a_failed_suite_fails_the_run_a_skipped_one_does_not() {
    use super::store::{Manifest, Skip};
    let skip = |suite: &str, reason: &str| Skip {
        suite: suite.into(),
        reason: reason.into(),
    };
    let mut m = Manifest {
        date: "2026-12-01".into(),
        quick: true,
        command: "cargo xtask bench-report --quick".into(),
        runs: vec![],
        skipped: vec![
            skip(
                "kv-demo",
                "skipped: not built yet (issue #14: kv-demo vs db_bench)",
            ),
            skip("guest-spdk", "skipped: SPDK is not installed (...)"),
        ],
    };
    assert_eq!(super::exit_status(&m), 0);
    m.skipped.push(skip(
        "append",
        "failed: `ziob-bench --dev emu:...` (repeat 2): thread 'main' panicked",
    ));
    assert_eq!(super::exit_status(&m), 1);
    m.skipped.pop();
    m.skipped.push(skip(
        "guest-nvme",
        "failed in the guest (exit status 1, guest exit 0): `ziob-bench ...`: error",
    ));
    assert_eq!(super::exit_status(&m), 1);
    // The committed run has no failures.
    let committed = Manifest::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../benches/results/2026-12-01"),
    )
    .unwrap();
    assert_eq!(super::exit_status(&committed), 0);
}
