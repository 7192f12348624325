//! `cargo xtask zenfs-build`: builds ZenFS (the RocksDB `FileSystem` plugin for zoned block
//! devices, the peer that issue #15 measures against) from user-supplied source trees into a
//! prefix, against the system's `librocksdb` (Debian `librocksdb-dev`):
//!
//! - `<prefix>/lib/libzenfs.so`: the plugin; its static initializer registers `zenfs://` in
//!   RocksDB's object library, so `LD_PRELOAD=<prefix>/lib/libzenfs.so db_bench
//!   --fs_uri=zenfs://dev:nvme0n1` uses it with the unmodified `db_bench`;
//! - `<prefix>/bin/zenfs`: ZenFS's utility (`mkfs`, `df`, `list`, ...), linked to that library;
//! - `<prefix>/include/rocksdb/plugin/zenfs/fs/`: its headers (with the generated `version.h`).
//!
//! ZenFS includes RocksDB-internal headers (`util/coding.h`, `util/crc32c.h`,
//! `port/port.h`, `util/mutexlock.h`) that no package ships, so it also needs the RocksDB source
//! tree of exactly the system library's version (v7.8.3 on Debian 12). Public headers come
//! from the system (`/usr/include/rocksdb`), the ones the library was built from. `-DNDEBUG` is
//! never passed: Debian's library is built with assertions, and `port::Mutex` has an extra
//! member then, so objects built with `NDEBUG` would disagree with the library on its layout.
//!
//! The repository contains no ZenFS or RocksDB code; this task only drives the user's copies
//! and writes nothing into them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

/// Options of `zenfs-build`.
#[derive(clap::Args, Debug)]
pub struct BuildArgs {
    /// RocksDB source tree at the system library's version (`git clone --branch v7.8.3
    /// https://github.com/facebook/rocksdb`); only its internal headers are used
    #[arg(long, default_value = "/opt/src/rocksdb-7.8.3")]
    pub rocksdb_src: PathBuf,
    /// ZenFS source tree (`git clone https://github.com/westerndigitalcorporation/zenfs`)
    #[arg(long, default_value = "/opt/src/zenfs")]
    pub zenfs_src: PathBuf,
    /// Install prefix: lib/libzenfs.so, bin/zenfs, include/, build/ (object files)
    #[arg(long, default_value = "/opt/zenfs")]
    pub prefix: PathBuf,
    /// Parallel compiler jobs (default: the number of CPUs)
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Check the machine and the trees and print the commands, without building
    #[arg(long)]
    pub dry_run: bool,
}

/// Debian packages the build needs, and why.
pub const PACKAGES: &[(&str, &str)] = &[
    ("g++", "the C++ compiler"),
    (
        "librocksdb-dev",
        "the RocksDB library and public headers ZenFS is built against",
    ),
    ("libzbd-dev", "ZenFS's zoned block device backend (libzbd)"),
    ("libgflags-dev", "the `zenfs` utility's command line"),
];

/// ZenFS's plugin sources (`zenfs.mk`'s `zenfs_SOURCES-y`; the Prometheus exporter is off,
/// as by default).
pub const PLUGIN_SOURCES: &[&str] = &[
    "fs/fs_zenfs.cc",
    "fs/zbd_zenfs.cc",
    "fs/io_zenfs.cc",
    "fs/zonefs_zenfs.cc",
    "fs/zbdlib_zenfs.cc",
];

/// The defines RocksDB's build gives itself on Linux (`build_tools/build_detect_platform`)
/// that its internal headers test; without `OS_LINUX` ZenFS compiles to nothing.
pub const DEFINES: &[&str] = &[
    "-DOS_LINUX",
    "-DROCKSDB_PLATFORM_POSIX",
    "-DROCKSDB_LIB_IO_POSIX",
];

/// `(major, minor, patch)` from the text of a `rocksdb/version.h`.
pub fn parse_rocksdb_version(header: &str) -> Option<(u32, u32, u32)> {
    let get = |name: &str| {
        header.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("#define") && w.next() == Some(name))
                .then(|| w.next()?.parse().ok())
                .flatten()
        })
    };
    Some((
        get("ROCKSDB_MAJOR")?,
        get("ROCKSDB_MINOR")?,
        get("ROCKSDB_PATCH")?,
    ))
}

fn rocksdb_version_of(header: &Path) -> Result<(u32, u32, u32)> {
    let text =
        std::fs::read_to_string(header).with_context(|| format!("reading {}", header.display()))?;
    parse_rocksdb_version(&text)
        .with_context(|| format!("{}: no ROCKSDB_MAJOR/MINOR/PATCH", header.display()))
}

/// The `version.h` ZenFS's `generate-version.sh` writes (`ZENFS_VERSION` is stored in its
/// superblock, at most 63 characters).
pub fn version_header(version: &str) -> String {
    let v: String = version.chars().take(63).collect();
    format!("#pragma once\n#define ZENFS_VERSION \"{v}\"\n")
}

/// ZenFS's version: the tree's own `fs/version.h` if it has one, else `git describe` of the
/// tree (as `generate-version.sh` does, without writing into the tree), else `unknown`.
fn zenfs_version(src: &Path) -> String {
    if let Ok(text) = std::fs::read_to_string(src.join("fs/version.h")) {
        if let Some(v) = text.split('"').nth(1) {
            return v.to_string();
        }
    }
    Command::new("git")
        .args(["-C"])
        .arg(src)
        .args(["describe", "--abbrev=7", "--dirty", "--tags", "--always"])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// Compiler flags for the plugin objects (`-fPIC`) or the utility: C++17, optimised, debug
/// info, RocksDB's platform defines, the RocksDB tree for internal headers and the generated
/// include dir; never `-DNDEBUG` (see the module doc).
pub fn cxx_flags(rocksdb_src: &Path, extra_include: &Path, pic: bool) -> Vec<String> {
    let mut f: Vec<String> = ["-std=c++17", "-O2", "-g"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if pic {
        f.push("-fPIC".into());
    }
    f.extend(DEFINES.iter().map(|s| s.to_string()));
    f.push(format!("-I{}", rocksdb_src.display()));
    f.push(format!("-I{}", extra_include.display()));
    f
}

/// Packages of [`PACKAGES`] that `dpkg-query` does not report as installed (`None`: no dpkg).
fn missing_packages() -> Option<Vec<&'static str>> {
    let names: Vec<&'static str> = PACKAGES.iter().map(|(p, _)| *p).collect();
    crate::dpkg::not_installed(&names)
}

/// Checks the trees: sources present, RocksDB tree at the system library's version.
fn check_trees(rocksdb_src: &Path, zenfs_src: &Path, system: (u32, u32, u32)) -> Result<()> {
    for need in [
        "util/crc32c.h",
        "util/coding.h",
        "port/port.h",
        "util/mutexlock.h",
    ] {
        if !rocksdb_src.join(need).is_file() {
            bail!(
                "{}: no {need} (is --rocksdb-src a RocksDB source tree?)",
                rocksdb_src.display()
            );
        }
    }
    let tree = rocksdb_version_of(&rocksdb_src.join("include/rocksdb/version.h"))?;
    if tree != system {
        bail!(
            "the RocksDB tree {} is v{}.{}.{} but the system library is v{}.{}.{}: check out \
             the tag v{}.{}.{} (its internal headers must match the library)",
            rocksdb_src.display(),
            tree.0,
            tree.1,
            tree.2,
            system.0,
            system.1,
            system.2,
            system.0,
            system.1,
            system.2
        );
    }
    for need in PLUGIN_SOURCES
        .iter()
        .chain(&["util/zenfs.cc", "fs/fs_zenfs.h"])
    {
        if !zenfs_src.join(need).is_file() {
            bail!(
                "{}: no {need} (is --zenfs-src a ZenFS source tree?)",
                zenfs_src.display()
            );
        }
    }
    Ok(())
}

fn show(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&crate::vm::sh_quote(&a.to_string_lossy()));
    }
    s
}

fn wait_ok(what: &str, mut child: Child) -> Result<()> {
    let st = child
        .wait()
        .with_context(|| format!("waiting for {what}"))?;
    if !st.success() {
        bail!("{what} failed: {st}");
    }
    Ok(())
}

fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("[zenfs-build] $ {}", show(cmd));
    let child = cmd
        .spawn()
        .with_context(|| format!("running {:?}", cmd.get_program()))?;
    wait_ok(&show(cmd), child)
}

/// Runs `zenfs-build`; the exit status of the task.
pub fn run_build(a: &BuildArgs) -> Result<i32> {
    let t = Instant::now();
    // 1. Packages and the system library.
    if let Some(missing) = missing_packages() {
        if !missing.is_empty() {
            for p in &missing {
                if let Some((_, why)) = PACKAGES.iter().find(|(n, _)| n == p) {
                    eprintln!("[zenfs-build] missing package {p}: {why}");
                }
            }
            bail!(
                "install them with: apt-get install -y --no-install-recommends {}",
                missing.join(" ")
            );
        }
    }
    let system = rocksdb_version_of(Path::new("/usr/include/rocksdb/version.h"))
        .context("the system RocksDB headers (package librocksdb-dev)")?;
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());

    // 2. The trees.
    let rocksdb_src = a
        .rocksdb_src
        .canonicalize()
        .with_context(|| format!("--rocksdb-src {}", a.rocksdb_src.display()))?;
    let zenfs_src = a
        .zenfs_src
        .canonicalize()
        .with_context(|| format!("--zenfs-src {}", a.zenfs_src.display()))?;
    check_trees(&rocksdb_src, &zenfs_src, system)?;
    let version = zenfs_version(&zenfs_src);
    eprintln!(
        "[zenfs-build] system librocksdb v{}.{}.{}, RocksDB tree {}, ZenFS {version} in {}",
        system.0,
        system.1,
        system.2,
        rocksdb_src.display(),
        zenfs_src.display()
    );

    // 3. Layout of the prefix.
    let prefix = std::path::absolute(&a.prefix)?;
    let inc = prefix.join("include");
    let hdr_dir = inc.join("rocksdb/plugin/zenfs/fs");
    let obj_dir = prefix.join("build");
    let lib = prefix.join("lib/libzenfs.so");
    let bin = prefix.join("bin/zenfs");
    let plugin_flags = cxx_flags(&rocksdb_src, &hdr_dir, true);
    let util_flags = cxx_flags(&rocksdb_src, &inc, false);
    let objects: Vec<PathBuf> = PLUGIN_SOURCES
        .iter()
        .map(|s| {
            obj_dir
                .join(Path::new(s).file_name().unwrap())
                .with_extension("o")
        })
        .collect();
    let compile: Vec<Command> = PLUGIN_SOURCES
        .iter()
        .zip(&objects)
        .map(|(src, obj)| {
            let mut c = Command::new(&cxx);
            c.args(&plugin_flags)
                .arg("-c")
                .arg(zenfs_src.join(src))
                .arg("-o")
                .arg(obj);
            c
        })
        .collect();
    let mut link = Command::new(&cxx);
    link.args(["-shared", "-Wl,-soname,libzenfs.so", "-o"])
        .arg(&lib)
        .args(&objects)
        .args(["-lrocksdb", "-lzbd"]);
    let mut util = Command::new(&cxx);
    util.args(&util_flags)
        .arg(zenfs_src.join("util/zenfs.cc"))
        .arg("-o")
        .arg(&bin)
        .arg(format!("-L{}", prefix.join("lib").display()))
        .arg(format!("-Wl,-rpath,{}", prefix.join("lib").display()))
        .args(["-lzenfs", "-lrocksdb", "-lgflags", "-lzbd"]);
    if a.dry_run {
        println!(
            "# headers: {}/fs/*.h -> {}, plus version.h ({version})",
            zenfs_src.display(),
            hdr_dir.display()
        );
        for c in compile.iter().chain([&link, &util]) {
            println!("{}", show(c));
        }
        return Ok(0);
    }

    // 4. Headers (a copy, so the prefix stands alone) and the generated version.h.
    for d in [&hdr_dir, &obj_dir, &prefix.join("lib"), &prefix.join("bin")] {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    for e in std::fs::read_dir(zenfs_src.join("fs"))? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "h") {
            std::fs::copy(&p, hdr_dir.join(p.file_name().unwrap()))
                .with_context(|| format!("copying {}", p.display()))?;
        }
    }
    if !zenfs_src.join("fs/version.h").is_file() {
        std::fs::write(hdr_dir.join("version.h"), version_header(&version))?;
    }

    // 5. Compile (`jobs` at a time), link, the utility.
    let jobs = a
        .jobs
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1)
        .max(1);
    let mut pending = compile.into_iter();
    loop {
        let batch: Vec<Command> = pending.by_ref().take(jobs).collect();
        if batch.is_empty() {
            break;
        }
        let mut running = Vec::new();
        for mut c in batch {
            eprintln!("[zenfs-build] $ {}", show(&c));
            let child = c.spawn().with_context(|| format!("running {cxx}"))?;
            running.push((show(&c), child));
        }
        for (what, child) in running {
            wait_ok(&what, child)?;
        }
    }
    run(&mut link)?;
    run(&mut util)?;

    // 6. Checks: the utility runs, and db_bench picks the plugin up through LD_PRELOAD.
    let out = Command::new(&bin)
        .arg("--version")
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if !text.contains("zenfs version") {
        bail!("{} --version printed {text:?}", bin.display());
    }
    eprintln!("[zenfs-build] {}", text.trim());
    match crate::setup::which("db_bench") {
        Some(db_bench) => {
            let verdict = probe_db_bench(&db_bench, &lib)?;
            eprintln!("[zenfs-build] {verdict}");
        }
        None => eprintln!("[zenfs-build] db_bench is not on PATH (package rocksdb-tools): plugin load not checked"),
    }
    println!(
        "[zenfs-build] ZenFS {version} installed in {} in {:.0} s.\nUse it (on a zoned block \
         device whose scheduler is mq-deadline):\n    echo mq-deadline > \
         /sys/block/nvme0n1/queue/scheduler\n    {} mkfs --zbd=nvme0n1 --aux_path=/tmp/zenfs-aux \
         --force\n    LD_PRELOAD={} db_bench --fs_uri=zenfs://dev:nvme0n1 --benchmarks=fillrandom\n    \
         {} df --zbd=nvme0n1",
        prefix.display(),
        t.elapsed().as_secs_f64(),
        bin.display(),
        lib.display(),
        bin.display()
    );
    Ok(0)
}

/// Marker of ZenFS's own error for a device that cannot be opened: printed only when the
/// plugin is loaded and `zenfs://` resolves to it (db_bench 7.8.3 without the plugin crashes
/// on an unknown scheme instead).
pub const ZENFS_OPEN_ERROR: &str = "Failed to open zoned block device";

/// Runs `db_bench --fs_uri=zenfs://dev:<no such device>` with the plugin preloaded and checks
/// that ZenFS itself answered (its open error), i.e. the plugin registered `zenfs://`.
fn probe_db_bench(db_bench: &Path, lib: &Path) -> Result<String> {
    let out = Command::new(db_bench)
        .env("LD_PRELOAD", lib)
        .args([
            "--fs_uri=zenfs://dev:ziob-zenfs-build-probe",
            "--benchmarks=fillseq",
            "--num=1",
        ])
        .output()
        .with_context(|| format!("running {}", db_bench.display()))?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if text.contains(ZENFS_OPEN_ERROR) {
        Ok(format!(
            "db_bench loads the plugin: {}",
            text.lines()
                .find(|l| l.contains(ZENFS_OPEN_ERROR))
                .unwrap_or_default()
                .trim()
        ))
    } else {
        bail!(
            "LD_PRELOAD={} db_bench --fs_uri=zenfs://dev:... did not reach ZenFS ({}): {text:?}",
            lib.display(),
            out.status
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rocksdb_version_header_parses() {
        let h = "#pragma once\n#define ROCKSDB_MAJOR 7\n#define ROCKSDB_MINOR 8\n#define ROCKSDB_PATCH 3\n";
        assert_eq!(parse_rocksdb_version(h), Some((7, 8, 3)));
        assert_eq!(parse_rocksdb_version("#define ROCKSDB_MAJOR 7\n"), None);
    }

    #[test]
    fn flags_never_define_ndebug_and_carry_the_platform_defines() {
        let f = cxx_flags(Path::new("/r"), Path::new("/p/inc"), true);
        assert!(!f.iter().any(|a| a.contains("NDEBUG")), "{f:?}");
        for d in DEFINES {
            assert!(f.iter().any(|a| a == d), "{d} missing in {f:?}");
        }
        assert!(f.contains(&"-fPIC".to_string()));
        assert!(f.contains(&"-I/r".to_string()) && f.contains(&"-I/p/inc".to_string()));
        assert!(!cxx_flags(Path::new("/r"), Path::new("/i"), false).contains(&"-fPIC".to_string()));
    }

    #[test]
    fn version_header_is_capped_at_63_characters() {
        assert_eq!(
            version_header("v2.1.0-65-g919c2eb"),
            "#pragma once\n#define ZENFS_VERSION \"v2.1.0-65-g919c2eb\"\n"
        );
        let long = "x".repeat(80);
        assert!(version_header(&long).contains(&format!("\"{}\"", "x".repeat(63))));
    }

    #[test]
    fn tree_checks_name_what_is_missing() {
        let r = tempfile::tempdir().unwrap();
        let z = tempfile::tempdir().unwrap();
        let e = check_trees(r.path(), z.path(), (7, 8, 3))
            .unwrap_err()
            .to_string();
        assert!(e.contains("util/crc32c.h"), "{e}");
        for f in [
            "util/crc32c.h",
            "util/coding.h",
            "port/port.h",
            "util/mutexlock.h",
        ] {
            std::fs::create_dir_all(r.path().join(f).parent().unwrap()).unwrap();
            std::fs::write(r.path().join(f), "").unwrap();
        }
        std::fs::create_dir_all(r.path().join("include/rocksdb")).unwrap();
        std::fs::write(
            r.path().join("include/rocksdb/version.h"),
            "#define ROCKSDB_MAJOR 8\n#define ROCKSDB_MINOR 1\n#define ROCKSDB_PATCH 0\n",
        )
        .unwrap();
        let e = check_trees(r.path(), z.path(), (7, 8, 3))
            .unwrap_err()
            .to_string();
        assert!(e.contains("v8.1.0") && e.contains("v7.8.3"), "{e}");
        let e = check_trees(r.path(), z.path(), (8, 1, 0))
            .unwrap_err()
            .to_string();
        assert!(e.contains("fs/fs_zenfs.cc"), "{e}");
    }
}
