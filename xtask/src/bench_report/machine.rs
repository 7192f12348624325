//! What the host is: cores, kernel, CPU model (for every figure's caption).

use std::fs;

use super::store::Machine;

/// The host machine.
pub fn host() -> Machine {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);
    Machine {
        cores,
        kernel: kernel_release(),
        cpu: cpu_model(),
        place: "host".into(),
        load: load_average(),
    }
}

/// The QEMU guest: `smp` vCPUs, its kernel, emulated by TCG on the host's CPU.
pub fn guest(smp: u32, kernel: &str) -> Machine {
    Machine {
        cores: smp,
        kernel: kernel.to_string(),
        cpu: format!("QEMU `-cpu max` emulated on {}", cpu_model()),
        place: "QEMU guest (TCG)".into(),
        load: load_average(),
    }
}

fn kernel_release() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

fn cpu_model() -> String {
    fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The host's 1-minute load average now.
pub fn load_average() -> Option<f64> {
    fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
