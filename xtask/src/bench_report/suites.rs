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

/// Suites the report knows of but cannot run in this tree, with the reason.
pub fn not_built() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "kv-demo",
            "skipped: not built yet (issue #14: kv-demo vs db_bench)",
        ),
        (
            "rocksdb-plugin",
            "skipped: not built yet (issue #15: the RocksDB plugin vs ZenFS)",
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
