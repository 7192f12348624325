//! What an SPDK build for the `spdk:` backend needs on the machine, checked before configure
//! runs so that a missing piece is named with the command that installs it.

use std::process::Command;

/// Debian/Ubuntu packages of the build, and why each is needed.
pub const PACKAGES: &[(&str, &str)] = &[
    ("build-essential", "C compiler and make"),
    ("python3", "SPDK's build scripts"),
    ("pkg-config", "finds DPDK; the backend finds SPDK with it"),
    (
        "libdpdk-dev",
        "the system DPDK SPDK is built against (--with-dpdk)",
    ),
    ("libaio-dev", "SPDK always builds its aio bdev module"),
    ("uuid-dev", "SPDK's util library"),
    ("libssl-dev", "SPDK's util and sock libraries"),
    ("libnuma-dev", "DPDK's and SPDK's env library"),
];

/// The packages of [`PACKAGES`] that `dpkg-query` reports as not installed; `None` when the
/// machine has no dpkg (then [`missing_tools`] is the only check).
pub fn missing_packages() -> Option<Vec<&'static str>> {
    let names: Vec<&'static str> = PACKAGES.iter().map(|(p, _)| *p).collect();
    crate::dpkg::not_installed(&names)
}

/// Tools and pkg-config modules the build runs or needs, checked on any distribution.
pub fn missing_tools() -> Vec<String> {
    let mut missing = Vec::new();
    for tool in ["cc", "make", "python3", "pkg-config"] {
        if crate::setup::which(tool).is_none() {
            missing.push(format!("command `{tool}`"));
        }
    }
    for module in ["libdpdk", "uuid", "openssl"] {
        let ok = Command::new("pkg-config")
            .args(["--exists", module])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            missing.push(format!("pkg-config module `{module}`"));
        }
    }
    for header in ["/usr/include/libaio.h", "/usr/include/numa.h"] {
        if !std::path::Path::new(header).exists() {
            missing.push(format!("header {header}"));
        }
    }
    missing
}

/// The install command for `pkgs` (Debian/Ubuntu).
pub fn apt_command(pkgs: &[&str]) -> String {
    format!(
        "sudo apt-get install -y --no-install-recommends {}",
        pkgs.join(" ")
    )
}

/// `nasm`'s version when installed (`2.16.01`): with nasm >= 2.14 SPDK's configure builds
/// ISA-L, otherwise it turns ISA-L off with a warning.
pub fn nasm_version() -> Option<String> {
    let out = Command::new("nasm").arg("-v").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace().nth(2).map(str::to_string)
}

/// Whether a nasm version string is at least 2.14 (SPDK's threshold for ISA-L).
pub fn nasm_enables_isal(version: &str) -> bool {
    let mut it = version
        .split(['.', 'r', 'c'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (major, minor) >= (2, 14)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nasm_threshold_is_2_14() {
        assert!(nasm_enables_isal("2.16.01"));
        assert!(nasm_enables_isal("2.14"));
        assert!(!nasm_enables_isal("2.13.03"));
        assert!(!nasm_enables_isal("2.10rc1"));
    }

    #[test]
    fn apt_command_lists_the_packages() {
        assert_eq!(
            apt_command(&["libaio-dev", "uuid-dev"]),
            "sudo apt-get install -y --no-install-recommends libaio-dev uuid-dev"
        );
    }
}
