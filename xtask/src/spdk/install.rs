//! Where an installed SPDK is: the one rule `spdk-test` and `bench-report` share (an explicit
//! prefix, else `$SPDK_DIR`, else `/opt/spdk`), and the check that a prefix holds an install.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The SPDK prefix to use: `explicit` (a `--spdk` flag), else `spdk_dir` (the value of
/// `$SPDK_DIR`, which the backend's build script reads too), else `/opt/spdk`.
pub fn prefix(explicit: Option<&Path>, spdk_dir: Option<OsString>) -> PathBuf {
    explicit
        .map(Path::to_path_buf)
        .or_else(|| spdk_dir.filter(|d| !d.is_empty()).map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/opt/spdk"))
}

/// The pkg-config directory of an SPDK installed in `dir` (the one holding
/// `spdk_nvme.pc`), or `None`.
pub fn find_install(dir: &Path) -> Option<PathBuf> {
    ["lib/pkgconfig", "lib64/pkgconfig", "build/lib/pkgconfig"]
        .iter()
        .map(|sub| dir.join(sub))
        .find(|p| p.join("spdk_nvme.pc").is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_then_env_then_default() {
        let env = Some(OsString::from("/env/spdk"));
        assert_eq!(
            prefix(Some(Path::new("/flag")), env.clone()),
            PathBuf::from("/flag")
        );
        assert_eq!(prefix(None, env), PathBuf::from("/env/spdk"));
        assert_eq!(
            prefix(None, Some(OsString::new())),
            PathBuf::from("/opt/spdk")
        );
        assert_eq!(prefix(None, None), PathBuf::from("/opt/spdk"));
    }

    #[test]
    fn an_install_has_spdk_nvme_pc() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(find_install(d.path()), None);
        std::fs::create_dir_all(d.path().join("lib/pkgconfig")).unwrap();
        std::fs::write(d.path().join("lib/pkgconfig/spdk_nvme.pc"), "").unwrap();
        assert_eq!(find_install(d.path()), Some(d.path().join("lib/pkgconfig")));
    }
}
