//! Running a benchmark binary again inside the QEMU guest (`cargo xtask vm-run`) and reading
//! the `results.json` it leaves: shared by `rocksdb-bench` and `kv-bench`, whose `--guest`
//! modes need the guest's NVMe namespaces.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Boots the guest with `vm_args` (split on whitespace) and runs this executable there with
/// `args`, logging under `tool`'s name; then reads `guest_out/results.json`, which the guest
/// run must write. `out` is the host directory `vm-run` keeps its console log in. The parsed
/// results, or why there are none.
pub fn run_self_in_guest<T: serde::de::DeserializeOwned>(
    tool: &str,
    vm_args: &str,
    out: &Path,
    guest_out: &Path,
    args: &[String],
) -> Result<T, String> {
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .ok_or("no workspace directory")?;
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    std::fs::create_dir_all(guest_out).map_err(|e| format!("{}: {e}", guest_out.display()))?;
    let mut c = Command::new("cargo");
    c.current_dir(&workspace)
        .args(["xtask", "vm-run"])
        .args(vm_args.split_whitespace())
        .arg("--out-dir")
        .arg(out)
        .arg("--")
        .arg(&exe)
        .args(args);
    eprintln!("[{tool}] guest: {c:?}");
    let st = c.status().map_err(|e| format!("cargo xtask vm-run: {e}"))?;
    let file = guest_out.join("results.json");
    let text = std::fs::read_to_string(&file).map_err(|e| {
        format!(
            "the guest wrote no {} ({e}); vm-run exited {st}",
            file.display()
        )
    })?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))
}
