//! Which suites the report runs, with what arguments (`--quick` or full), and the suites it
//! cannot run yet (with the reason the report prints).

use super::store::Tool;

/// A suite run on the host: one benchmark binary, `repeats` invocations (ziob-bench) or one
/// invocation with its own repeats (rt-bench).
#[derive(Debug, Clone)]
pub struct HostSuite {
    /// Suite id (also the output file stem).
    pub id: &'static str,
    /// Binary name in `target/release`.
    pub bin: &'static str,
    /// How to read the output.
    pub tool: Tool,
    /// Arguments of one invocation.
    pub args: Vec<String>,
    /// Process-level repeats (ziob-bench); rt-bench repeats itself (`--repeat`).
    pub invocations: u32,
    /// Repeats of every point (what the report states).
    pub repeats: u32,
    /// Emu device files the suite creates (removed before and after it).
    pub device_files: Vec<String>,
}

/// Repeats of every measured point.
pub const REPEATS: u32 = 3;

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Device file of a suite (unique per suite; under /var/tmp, removed afterwards).
fn dev_file(name: &str) -> String {
    format!("/var/tmp/ziob-bench-report-{name}.zns")
}

/// The host suites, in the order they run.
///
/// ```text
/// append     emu (20 µs + 1000 MB/s per op), appends on/off over sizes × zones, 2 cores
/// commitlog  emu with 512-byte blocks, records + flush every N, on/off
/// manyzones  mem, tiny appends over 1,000 (and 10,000) zones, on/off
/// latency    emu with a 1 ms device, append + read-back percentiles, idle and under write-back
/// runtime    rt-bench: NOP and 4 KiB page-cache reads (full: + O_DIRECT, yield), all runners
/// ```
pub fn host_suites(quick: bool) -> Vec<HostSuite> {
    let secs = if quick { "1" } else { "3" };
    let append_dev = dev_file("append");
    let commitlog_dev = dev_file("commitlog");
    let latency_dev = dev_file("latency");
    let mut out = Vec::new();
    let (bs, zones) = if quick {
        ("4K,16K,64K", "1,8")
    } else {
        ("4K,16K,64K,256K", "1,8,64")
    };
    out.push(HostSuite {
        id: "append",
        bin: "ziob-bench",
        tool: Tool::ZiobBench,
        args: strings(&[
            "--dev",
            &format!("emu:{append_dev},lat_us=20,bw_mbps=1000"),
            "--create-zones",
            "64",
            "--create-zone-size",
            "32M",
            "--workload",
            "append",
            "--bs",
            bs,
            "--zones",
            zones,
            "--qd",
            "8",
            "--cores",
            "2",
            "--runtime",
            secs,
            "--ziob",
            "on,off",
            "--json",
        ]),
        invocations: REPEATS,
        repeats: REPEATS,
        device_files: vec![append_dev],
    });
    let (cbs, every) = if quick {
        ("512,4K", "1,8,64")
    } else {
        ("512,4K,16K", "1,8,64,256")
    };
    out.push(HostSuite {
        id: "commitlog",
        bin: "ziob-bench",
        tool: Tool::ZiobBench,
        args: strings(&[
            "--dev",
            &format!("emu:{commitlog_dev},lat_us=20,bw_mbps=1000"),
            "--create-block-size",
            "512",
            "--create-zones",
            "32",
            "--create-zone-size",
            "64M",
            "--workload",
            "commitlog",
            "--bs",
            cbs,
            "--flush-every",
            every,
            "--qd",
            "8",
            "--zones",
            "8",
            "--cores",
            "1",
            "--runtime",
            if quick { "0.5" } else { "2" },
            "--ziob",
            "on,off",
            "--json",
        ]),
        invocations: REPEATS,
        repeats: REPEATS,
        device_files: vec![commitlog_dev],
    });
    out.push(HostSuite {
        id: "manyzones",
        bin: "ziob-bench",
        tool: Tool::ZiobBench,
        args: strings(&[
            "--dev",
            "mem:zones=10000,zone_size=1M",
            "--workload",
            "manyzones",
            "--bs",
            "11,64,4K",
            "--zones",
            if quick { "1000" } else { "1000,10000" },
            "--cores",
            "1",
            "--ops",
            "20000",
            "--ziob",
            "on,off",
            "--json",
        ]),
        invocations: REPEATS,
        repeats: REPEATS,
        device_files: vec![],
    });
    out.push(HostSuite {
        id: "latency",
        bin: "ziob-bench",
        tool: Tool::ZiobBench,
        args: strings(&[
            "--dev",
            &format!("emu:{latency_dev},lat_us=1000"),
            "--create-zones",
            "16",
            "--create-zone-size",
            "64M",
            "--workload",
            "latency",
            "--bs",
            "4K",
            "--qd",
            "4",
            "--zones",
            "4",
            "--cores",
            "1",
            "--op-interval-us",
            "1000",
            "--background-flush-ms",
            "5",
            "--runtime",
            if quick { "1" } else { "3" },
            "--ziob",
            "on,off",
            "--json",
        ]),
        invocations: REPEATS,
        repeats: REPEATS,
        device_files: vec![latency_dev],
    });
    let rt_args: &[&str] = if quick {
        &[
            "--workloads",
            "nop,randread",
            "--modes",
            "buffered",
            "--qd",
            "1,4,32",
            "--file-size",
            "256M",
            "--duration-secs",
            "0.5",
            "--warmup-secs",
            "0.2",
        ]
    } else {
        &[
            "--workloads",
            "nop,randread,yield",
            "--modes",
            "buffered,direct",
            "--qd",
            "1,4,16,32",
            "--file-size",
            "1G",
            "--duration-secs",
            "2",
            "--warmup-secs",
            "0.5",
        ]
    };
    let mut args = strings(rt_args);
    args.extend(strings(&["--repeat", &REPEATS.to_string(), "--json"]));
    out.push(HostSuite {
        id: "runtime",
        bin: "rt-bench",
        tool: Tool::RtBench,
        args,
        invocations: 1,
        repeats: REPEATS,
        device_files: vec![],
    });
    out
}

/// One command of the guest job.
#[derive(Debug, Clone)]
pub struct GuestStep {
    /// Suite id.
    pub id: &'static str,
    /// Binary name in `target/release`.
    pub bin: &'static str,
    /// How to read the output.
    pub tool: Tool,
    /// Arguments (guest shell words: `$ZIOB_...` variables are expanded by the guest shell).
    pub args: Vec<String>,
    /// Invocations (each writes `<id>-r<N>`); 1 for nvme-bench, which has `--rounds`.
    pub invocations: u32,
    /// Repeats of every point.
    pub repeats: u32,
    /// Runs after the controller is bound to uio_pci_generic (SPDK).
    pub spdk: bool,
}

/// The guest job's commands, in order (SPDK last: it takes the controller from the kernel).
pub fn guest_steps(quick: bool, spdk: bool) -> Vec<GuestStep> {
    let secs = if quick { "1" } else { "3" };
    let (bs, zones) = if quick {
        ("4K,64K", "1,4")
    } else {
        ("4K,16K,64K", "1,4,16")
    };
    let ziob = |dev: &str| {
        strings(&[
            "--dev",
            dev,
            "--workload",
            "append",
            "--bs",
            bs,
            "--zones",
            zones,
            "--qd",
            "8",
            "--cores",
            "2",
            "--runtime",
            secs,
            "--ziob",
            "on,off",
            "--json",
        ])
    };
    let mut out = vec![
        GuestStep {
            id: "guest-zbd",
            bin: "ziob-bench",
            tool: Tool::ZiobBench,
            args: ziob("zbd:$ZIOB_ZNS_BLOCK"),
            invocations: REPEATS,
            repeats: REPEATS,
            spdk: false,
        },
        GuestStep {
            id: "guest-nvme",
            bin: "ziob-bench",
            tool: Tool::ZiobBench,
            args: ziob("nvme:$ZIOB_ZNS_CHAR"),
            invocations: REPEATS,
            repeats: REPEATS,
            spdk: false,
        },
        GuestStep {
            id: "guest-fio-zbd",
            bin: "guest-bench",
            tool: Tool::GuestBench,
            args: strings(&["--dev", "$ZIOB_ZNS_BLOCK", "--zones", "4", "--secs", secs]),
            invocations: REPEATS,
            repeats: REPEATS,
            spdk: false,
        },
        GuestStep {
            id: "guest-fio-nvme",
            bin: "nvme-bench",
            tool: Tool::NvmeBench,
            args: strings(&[
                "--zones",
                "4",
                "--secs",
                secs,
                "--rounds",
                &REPEATS.to_string(),
                "--json",
            ]),
            invocations: 1,
            repeats: REPEATS,
            spdk: false,
        },
    ];
    if spdk {
        out.push(GuestStep {
            id: "guest-spdk",
            bin: "ziob-bench",
            tool: Tool::ZiobBench,
            args: ziob("spdk:$ZIOB_NVME_PCI"),
            invocations: REPEATS,
            repeats: REPEATS,
            spdk: true,
        });
    }
    out
}

/// What the RocksDB comparisons (issues #14, #15) need, as found on this machine and tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RocksdbPeers {
    /// The `kv-demo` crate has a `kv-demo` binary target (`Err`: cargo metadata failed).
    pub kv_demo_bin: Result<bool, String>,
    /// `integrations/rocksdb` (the RocksDB plugin) exists.
    pub rocksdb_plugin: bool,
    /// `db_bench` (RocksDB's benchmark tool) is on PATH.
    pub db_bench: bool,
}

impl RocksdbPeers {
    /// Looks at the workspace `root` and PATH.
    pub fn probe(root: &std::path::Path) -> Self {
        Self {
            kv_demo_bin: cargo_metadata(root).map(|m| has_bin_target(&m, "kv-demo", "kv-demo")),
            rocksdb_plugin: root.join("integrations/rocksdb").is_dir(),
            db_bench: crate::setup::which("db_bench").is_some(),
        }
    }
}

/// `cargo metadata --no-deps` of the workspace at `root`.
fn cargo_metadata(root: &std::path::Path) -> Result<serde_json::Value, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--manifest-path",
        ])
        .arg(root.join("Cargo.toml"))
        .output()
        .map_err(|e| format!("running cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata output: {e}"))
}

/// Whether package `package` of `cargo metadata` output has a binary target `bin`.
pub fn has_bin_target(metadata: &serde_json::Value, package: &str, bin: &str) -> bool {
    let packages = metadata["packages"].as_array().map(Vec::as_slice);
    packages
        .unwrap_or_default()
        .iter()
        .filter(|p| p["name"] == package)
        .flat_map(|p| {
            p["targets"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
        })
        .any(|t| {
            t["name"] == bin
                && t["kind"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k == "bin"))
        })
}

/// The skip reason of a suite from what it lacks (`missing`, in the order found; empty: it
/// has everything, but bench-report has no runner for it).
fn peer_reason(missing: &[String], issue: &str) -> String {
    if missing.is_empty() {
        format!(
            "skipped: everything it needs is here, but the bench-report runner for it is not \
             implemented yet ({issue})"
        )
    } else {
        format!("skipped: {} ({issue})", missing.join("; "))
    }
}

/// Suites the report knows of but cannot run, each with the reason read from `peers`: what is
/// missing, or that the runner is not implemented yet.
pub fn not_runnable(peers: &RocksdbPeers) -> Vec<(&'static str, String)> {
    const DB_BENCH: &str = "`db_bench` (RocksDB's benchmark tool) is not on PATH";
    let mut kv = Vec::new();
    match &peers.kv_demo_bin {
        Ok(true) => {}
        Ok(false) => kv.push("the `kv-demo` crate has no `kv-demo` binary target".to_string()),
        Err(e) => kv.push(format!("cannot tell whether `kv-demo` has a binary: {e}")),
    }
    let mut plugin = Vec::new();
    if !peers.rocksdb_plugin {
        plugin.push("there is no `integrations/rocksdb` (the RocksDB plugin)".to_string());
    }
    if !peers.db_bench {
        kv.push(DB_BENCH.to_string());
        plugin.push(DB_BENCH.to_string());
    }
    vec![
        (
            "kv-demo",
            peer_reason(&kv, "issue #14: kv-demo vs db_bench"),
        ),
        (
            "rocksdb-plugin",
            peer_reason(&plugin, "issue #15: the RocksDB plugin vs ZenFS"),
        ),
    ]
}

/// Every guest suite id (for skips of the whole guest).
pub const GUEST_SUITES: &[&str] = &[
    "guest-zbd",
    "guest-nvme",
    "guest-fio-zbd",
    "guest-fio-nvme",
    "guest-spdk",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rocksdb_suites_name_exactly_what_is_missing() {
        let reasons = |kv_demo_bin: Result<bool, String>, rocksdb_plugin, db_bench| {
            let r = not_runnable(&RocksdbPeers {
                kv_demo_bin,
                rocksdb_plugin,
                db_bench,
            });
            assert_eq!(r[0].0, "kv-demo");
            assert_eq!(r[1].0, "rocksdb-plugin");
            (r[0].1.clone(), r[1].1.clone())
        };
        let no_bin = "no `kv-demo` binary";
        let no_db_bench = "`db_bench`";
        let no_plugin = "no `integrations/rocksdb`";
        let not_impl = "not implemented yet";
        // Every combination: each reason names what is missing and nothing else; with
        // nothing missing it says the runner does not exist.
        for bin in [false, true] {
            for plugin in [false, true] {
                for db in [false, true] {
                    let (kv, rp) = reasons(Ok(bin), plugin, db);
                    for r in [&kv, &rp] {
                        assert!(r.starts_with("skipped: "), "{r}");
                        assert_eq!(r.contains(no_db_bench), !db, "{r}");
                    }
                    assert_eq!(kv.contains(no_bin), !bin, "{kv}");
                    assert!(!kv.contains(no_plugin), "{kv}");
                    assert_eq!(kv.contains(not_impl), bin && db, "{kv}");
                    assert!(kv.ends_with("(issue #14: kv-demo vs db_bench)"), "{kv}");
                    assert_eq!(rp.contains(no_plugin), !plugin, "{rp}");
                    assert!(!rp.contains(no_bin), "{rp}");
                    assert_eq!(rp.contains(not_impl), plugin && db, "{rp}");
                    assert!(
                        rp.ends_with("(issue #15: the RocksDB plugin vs ZenFS)"),
                        "{rp}"
                    );
                }
            }
        }
        let (kv, _) = reasons(Err("cargo metadata failed (exit 101)".into()), true, true);
        assert!(
            kv.contains("cannot tell") && kv.contains("exit 101"),
            "{kv}"
        );
        assert!(!kv.contains(not_impl), "{kv}");
    }

    #[test]
    fn bin_target_is_read_from_cargo_metadata() {
        let meta = serde_json::json!({"packages": [
            {"name": "kv-demo", "targets": [
                {"name": "kv_demo", "kind": ["lib"]},
                {"name": "kv-demo", "kind": ["example"]}
            ]},
            {"name": "other", "targets": [{"name": "kv-demo", "kind": ["bin"]}]}
        ]});
        assert!(!has_bin_target(&meta, "kv-demo", "kv-demo"));
        let mut with_bin = meta.clone();
        with_bin["packages"][0]["targets"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"name": "kv-demo", "kind": ["bin"]}));
        assert!(has_bin_target(&with_bin, "kv-demo", "kv-demo"));
        assert!(!has_bin_target(
            &serde_json::json!({}),
            "kv-demo",
            "kv-demo"
        ));
    }

    /// The probe reads this tree as it is (today kv-demo is a library only and there is no
    /// integrations/rocksdb; the test follows the tree when that changes).
    #[test]
    fn probe_reads_this_tree() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let peers = RocksdbPeers::probe(&root);
        let has_bin =
            root.join("kv-demo/src/main.rs").exists() || root.join("kv-demo/src/bin").exists();
        assert_eq!(peers.kv_demo_bin, Ok(has_bin));
        assert_eq!(
            peers.rocksdb_plugin,
            root.join("integrations/rocksdb").is_dir()
        );
    }
}
