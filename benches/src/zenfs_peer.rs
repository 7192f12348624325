//! RocksDB on ZenFS as a benchmark peer in the QEMU guest (`rocksdb-bench`'s `zenfs` target,
//! `kv-bench`'s `rocksdb-zenfs` mode): the commands that make a fresh ZenFS on the ZNS
//! namespace before each process and put the namespace's I/O scheduler back after it, so the
//! modes measured after ZenFS see the namespace as the guest booted it.

use std::path::Path;

/// The kernel name of a block device path (`/dev/nvme0n1` → `nvme0n1`).
pub fn dev_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_string())
}

/// The active scheduler of a `queue/scheduler` file's text (`[none] mq-deadline` → `none`).
pub fn active_scheduler(text: &str) -> Option<&str> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
}

fn cmd(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

fn set_scheduler(dev: &str, scheduler: &str) -> Vec<String> {
    cmd(&[
        "sh",
        "-c",
        &format!("echo {scheduler} > /sys/block/{dev}/queue/scheduler"),
    ])
}

/// Before each process: mq-deadline on `dev` (ZenFS has several writes of a zone in flight
/// and needs them kept in order), then `zenfs mkfs --force` with a fresh `aux` directory.
pub fn prepare(zenfs: &Path, dev: &str, aux: &str) -> Vec<Vec<String>> {
    vec![
        set_scheduler(dev, "mq-deadline"),
        cmd(&["rm", "-rf", aux]),
        cmd(&[
            &zenfs.display().to_string(),
            "mkfs",
            &format!("--zbd={dev}"),
            &format!("--aux_path={aux}"),
            "--force",
        ]),
    ]
}

/// After each process: `dev`'s scheduler as it is now (read before [`prepare`] runs), if
/// it can be read.
pub fn restore(dev: &str) -> Vec<Vec<String>> {
    std::fs::read_to_string(format!("/sys/block/{dev}/queue/scheduler"))
        .ok()
        .and_then(|t| active_scheduler(&t).map(str::to_string))
        .map(|s| vec![set_scheduler(dev, &s)])
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_active_scheduler_and_names_devices() {
        assert_eq!(active_scheduler("[none] mq-deadline \n"), Some("none"));
        assert_eq!(
            active_scheduler("none [mq-deadline] kyber"),
            Some("mq-deadline")
        );
        assert_eq!(active_scheduler("none mq-deadline"), None);
        assert_eq!(dev_name("/dev/nvme0n1"), "nvme0n1");
        let p = prepare(Path::new("/opt/zenfs/bin/zenfs"), "nvme0n1", "/tmp/aux");
        assert_eq!(
            p[0][2],
            "echo mq-deadline > /sys/block/nvme0n1/queue/scheduler"
        );
        assert_eq!(
            p[2][1..],
            ["mkfs", "--zbd=nvme0n1", "--aux_path=/tmp/aux", "--force"]
        );
        assert!(restore("no-such-device-here").is_empty());
    }
}
