//! Build script of ziob-backends. Does nothing unless the cargo feature `spdk` is on; then it
//! finds an installed SPDK (>= 25.09) with pkg-config, compiles the C shim
//! (`src/spdk/shim.c`) against its headers, links SPDK's static libraries whole-archive
//! (their constructors register the PCIe transport and the DPDK PCI driver) and DPDK's shared
//! libraries. It fails with a message naming the missing piece when SPDK is not found.
//!
//! Where it looks: `PKG_CONFIG_PATH` as set, plus `$SPDK_DIR/lib/pkgconfig` (an installed
//! prefix) and `$SPDK_DIR/build/lib/pkgconfig` (a built source tree) when `SPDK_DIR` is set.

use std::env;
use std::path::{Path, PathBuf};

/// SPDK libraries the backend needs (pkg-config module names); their `Requires` pull in the
/// rest (log, util, sock, trace, dma, keyring, json, rpc, dpdklibs).
const SPDK_MODULES: &[&str] = &["spdk_nvme", "spdk_env_dpdk"];
/// Oldest SPDK release the shim supports.
const SPDK_MIN: (u32, u32) = (25, 9);
/// System libraries SPDK's static libraries use (SPDK's own `spdk_syslibs.pc` is not always
/// installed).
const SYS_LIBS: &[&str] = &["uuid", "ssl", "crypto", "numa", "dl", "rt", "pthread", "m"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/spdk/shim.c");
    println!("cargo:rerun-if-env-changed=SPDK_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    if env::var_os("CARGO_FEATURE_SPDK").is_none() {
        return;
    }
    if let Err(msg) = build_spdk() {
        eprintln!("\nerror: ziob-backends feature `spdk`: {msg}\n");
        println!("cargo:warning=feature `spdk`: {msg}");
        std::process::exit(1);
    }
}

fn build_spdk() -> Result<(), String> {
    let mut paths: Vec<PathBuf> = env::var_os("PKG_CONFIG_PATH")
        .map(|p| env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(dir) = env::var_os("SPDK_DIR") {
        let dir = PathBuf::from(dir);
        for sub in ["lib/pkgconfig", "build/lib/pkgconfig", "lib64/pkgconfig"] {
            let p = dir.join(sub);
            if p.is_dir() {
                paths.insert(0, p);
            }
        }
    }
    let joined = env::join_paths(&paths).map_err(|e| e.to_string())?;
    // The pkg-config crate reads PKG_CONFIG_PATH from the environment.
    env::set_var("PKG_CONFIG_PATH", &joined);
    let searched = joined.to_string_lossy().into_owned();

    let mut include_paths: Vec<PathBuf> = Vec::new();
    let mut link_paths: Vec<PathBuf> = Vec::new();
    let mut libs: Vec<String> = Vec::new();
    for module in SPDK_MODULES {
        let lib = pkg_config::Config::new()
            .cargo_metadata(false)
            .statik(true)
            .probe(module)
            .map_err(|e| {
                format!(
                    "SPDK is not installed or not found: pkg-config cannot find `{module}` \
                     (PKG_CONFIG_PATH={searched:?}). Install SPDK >= 25.09 and set \
                     PKG_CONFIG_PATH=<prefix>/lib/pkgconfig or SPDK_DIR=<prefix> \
                     (see docs/SPDK.md). pkg-config said: {e}"
                )
            })?;
        for p in lib.include_paths {
            if !include_paths.contains(&p) {
                include_paths.push(p);
            }
        }
        for p in lib.link_paths {
            if !link_paths.contains(&p) {
                link_paths.push(p);
            }
        }
        for l in lib.libs {
            if !libs.contains(&l) {
                libs.push(l);
            }
        }
    }
    let version_h = include_paths
        .iter()
        .map(|p| p.join("spdk/version.h"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!("spdk/version.h not found under the include paths {include_paths:?}")
        })?;
    let (major, minor) = spdk_version(&version_h)?;
    if (major, minor) < SPDK_MIN {
        return Err(format!(
            "SPDK {major}.{minor:02} at {} is too old; >= {}.{:02} is needed",
            version_h.display(),
            SPDK_MIN.0,
            SPDK_MIN.1
        ));
    }

    let mut cc = cc::Build::new();
    cc.file("src/spdk/shim.c").warnings(true);
    for p in &include_paths {
        cc.include(p);
    }
    cc.try_compile("ziob_spdk_shim")
        .map_err(|e| format!("compiling src/spdk/shim.c against SPDK failed: {e}"))?;

    for p in &link_paths {
        println!("cargo:rustc-link-search=native={}", p.display());
    }
    // SPDK: static, whole archive (constructors must stay), linked into the final binary.
    let (spdk, other): (Vec<&String>, Vec<&String>) =
        libs.iter().partition(|l| l.starts_with("spdk_"));
    for l in &spdk {
        let archive = link_paths
            .iter()
            .map(|p| p.join(format!("lib{l}.a")))
            .find(|p| p.is_file());
        if archive.is_none() {
            return Err(format!(
                "lib{l}.a not found in {link_paths:?}: the SPDK install has no static libraries"
            ));
        }
        println!("cargo:rustc-link-lib=static:-bundle,+whole-archive={l}");
    }
    // DPDK (rte_*) and the rest: shared.
    for l in &other {
        println!("cargo:rustc-link-lib=dylib={l}");
    }
    for l in SYS_LIBS {
        if !other.iter().any(|o| o.as_str() == *l) {
            println!("cargo:rustc-link-lib=dylib={l}");
        }
    }
    println!("cargo:rustc-cfg=ziob_spdk_linked");
    println!(
        "cargo:rustc-env=ZIOB_SPDK_VERSION={major}.{minor:02} ({})",
        version_h.display()
    );
    Ok(())
}

fn spdk_version(version_h: &Path) -> Result<(u32, u32), String> {
    let text = std::fs::read_to_string(version_h).map_err(|e| e.to_string())?;
    let field = |name: &str| -> Option<u32> {
        text.lines()
            .filter_map(|l| l.strip_prefix("#define "))
            .filter_map(|l| l.trim().strip_prefix(name))
            .find_map(|v| v.trim().parse().ok())
    };
    match (field("SPDK_VERSION_MAJOR"), field("SPDK_VERSION_MINOR")) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(format!(
            "cannot read the SPDK version from {}",
            version_h.display()
        )),
    }
}
