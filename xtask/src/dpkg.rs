//! Asking Debian's package database what is installed (the build helpers name the `apt-get`
//! line for what is missing).

use std::process::{Command, Stdio};

/// The packages of `packages` that `dpkg-query` does not report as installed; `None` when
/// the machine has no dpkg.
pub fn not_installed(packages: &[&'static str]) -> Option<Vec<&'static str>> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Package} ${Status}\\n"])
        .args(packages)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    Some(
        packages
            .iter()
            .copied()
            .filter(|p| {
                !text
                    .lines()
                    .any(|l| l.starts_with(&format!("{p} ")) && l.ends_with(" installed"))
            })
            .collect(),
    )
}
