//! Compiles the C++ `rocksdb::FileSystem` shim (`cpp/ziob_fs.cc`) against the system
//! `librocksdb-dev` and links it whole into the cdylib (its static initializer registers the
//! `ziob://` scheme; a plain static link would drop the unreferenced object). Also builds the
//! crash-test writer (`cpp/crash_writer.cc`) the tests run. Without the RocksDB headers both
//! are skipped with a cargo warning and `ZIOB_ROCKSDB_SHIM_SKIPPED` says why.
//!
//! Not `-DNDEBUG`: Debian's librocksdb is built with assertions, and `port::Mutex` changes
//! layout with it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=cpp/ziob_fs.cc");
    println!("cargo:rerun-if-changed=cpp/crash_writer.cc");
    println!("cargo:rerun-if-changed=include/ziob_rocksdb.h");
    println!("cargo:rerun-if-env-changed=ROCKSDB_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=ROCKSDB_LIB_DIR");
    let include = std::env::var("ROCKSDB_INCLUDE_DIR").unwrap_or_else(|_| "/usr/include".into());
    let header = Path::new(&include).join("rocksdb/file_system.h");
    if !header.exists() {
        let reason = format!(
            "RocksDB headers not found ({} missing; install librocksdb-dev or set ROCKSDB_INCLUDE_DIR)",
            header.display()
        );
        println!("cargo:warning=ziob-rocksdb: C++ FileSystem shim skipped: {reason}");
        println!("cargo:rustc-env=ZIOB_ROCKSDB_SHIM_SKIPPED={reason}");
        return;
    }
    let lib_dir = std::env::var("ROCKSDB_LIB_DIR").ok();
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .file("cpp/ziob_fs.cc")
        .include("include")
        .include(&include)
        .flag("-std=c++17")
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-invalid-offsetof")
        .pic(true)
        .cargo_metadata(false);
    build.compile("ziob_rocksdb_shim");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static:+whole-archive=ziob_rocksdb_shim");
    if let Some(dir) = &lib_dir {
        println!("cargo:rustc-link-search=native={dir}");
    }
    println!("cargo:rustc-link-lib=dylib=rocksdb");
    println!("cargo:rustc-link-lib=dylib=stdc++");

    // The crash-test writer: a plain RocksDB program; the tests load the plugin into it with
    // LD_PRELOAD.
    let compiler = build.get_compiler();
    let exe = out.join("ziob-rocksdb-crash-writer");
    let mut cmd = Command::new(compiler.path());
    cmd.arg("-std=c++17")
        .arg("-O1")
        .arg(format!("-I{include}"))
        .arg("cpp/crash_writer.cc")
        .arg("-o")
        .arg(&exe);
    if let Some(dir) = &lib_dir {
        cmd.arg(format!("-L{dir}"));
    }
    cmd.arg("-lrocksdb");
    match cmd.status() {
        Ok(s) if s.success() => {
            println!(
                "cargo:rustc-env=ZIOB_ROCKSDB_CRASH_WRITER={}",
                exe.display()
            );
        }
        other => {
            println!("cargo:warning=ziob-rocksdb: crash writer not built ({other:?})");
        }
    }
}
