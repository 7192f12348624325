//! Booting the QEMU guest and running one job (a shell script) inside it.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::fmt::Write as _;
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::setup::Assets;

/// Parses "4096", "4K", "8M", "1G" (binary units) into bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        None => (s, 1u64),
        Some((i, _)) => {
            let unit = s[i..].trim_end_matches(['B', 'b']).trim_end_matches('i');
            let m = match unit.to_ascii_uppercase().as_str() {
                "" => 1,
                "K" => 1 << 10,
                "M" => 1 << 20,
                "G" => 1 << 30,
                "T" => 1 << 40,
                _ => return Err(format!("bad size unit in {s:?} (use K, M, G)")),
            };
            (&s[..i], m)
        }
    };
    let n: u64 = num.parse().map_err(|_| format!("bad size {s:?}"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("size {s:?} overflows"))
}

/// Guest and device options shared by `vm-run` and `vm-test`.
#[derive(Args, Debug, Clone)]
pub struct VmOpts {
    /// ZNS namespace zone size (power of two; the kernel requires it)
    #[arg(long, default_value = "8M", value_parser = parse_size)]
    pub zone_size: u64,
    /// ZNS zone capacity (<= zone size; writable part of each zone)
    #[arg(long, default_value = "6M", value_parser = parse_size)]
    pub zone_capacity: u64,
    /// Number of zones of the ZNS namespace (namespace size = zones * zone size)
    #[arg(long, default_value_t = 16)]
    pub zones: u64,
    /// Max open zones of the ZNS namespace (0 = no limit)
    #[arg(long, default_value_t = 4)]
    pub max_open: u32,
    /// Max active zones of the ZNS namespace (0 = no limit)
    #[arg(long, default_value_t = 6)]
    pub max_active: u32,
    /// Logical (and physical) block size of the NVMe namespaces and null_blk
    #[arg(long, default_value_t = 4096)]
    pub block_size: u32,
    /// Zone Append Size Limit, as a power of two in units of 4 KiB (QEMU zoned.zasl; 0 = MDTS)
    #[arg(long, default_value_t = 5)]
    pub zasl: u32,
    /// Size of the conventional NVMe namespace (nsid 2); 0 = none
    #[arg(long, default_value = "64M", value_parser = parse_size)]
    pub conv_size: u64,
    /// null_blk zone size (power of two, whole MiB)
    #[arg(long, default_value = "8M", value_parser = parse_size)]
    pub nullblk_zone_size: u64,
    /// null_blk zone capacity (whole MiB, <= zone size)
    #[arg(long, default_value = "6M", value_parser = parse_size)]
    pub nullblk_zone_capacity: u64,
    /// null_blk device size (whole GiB; memory-backed, only written blocks use guest RAM)
    #[arg(long, default_value_t = 1)]
    pub nullblk_gb: u32,
    /// null_blk max open zones (0 = no limit)
    #[arg(long, default_value_t = 4)]
    pub nullblk_max_open: u32,
    /// null_blk max active zones (0 = no limit)
    #[arg(long, default_value_t = 6)]
    pub nullblk_max_active: u32,
    /// Do not create the zoned null_blk device
    #[arg(long)]
    pub no_nullblk: bool,
    /// Guest scratch disk (sparse ext4 on virtio-blk) holding the writable layer over the host
    /// root, so that files in /tmp etc. support O_DIRECT (tmpfs in 6.1 does not); 0 = RAM
    #[arg(long, default_value = "8G", value_parser = parse_size)]
    pub scratch_size: u64,
    /// 2 MiB hugepages to reserve in the guest (e.g. 512 for SPDK)
    #[arg(long, default_value_t = 0)]
    pub hugepages: u32,
    /// Guest RAM
    #[arg(long, default_value = "2G", value_parser = parse_size)]
    pub mem: u64,
    /// Guest vCPUs
    #[arg(long, default_value_t = 2)]
    pub smp: u32,
    /// Kill the guest after this many seconds (exit status 124)
    #[arg(long, default_value_t = 600)]
    pub timeout_secs: u64,
    /// Host directory shared read-write at the same path in the guest ($ZIOB_OUT_DIR)
    #[arg(long)]
    pub out_dir: Option<PathBuf>,
    /// Extra environment variable for the guest command (KEY=VALUE, repeatable)
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub envs: Vec<String>,
    /// Try KVM first (falls back to TCG). Off by default: on this VM /dev/kvm opens but guests
    /// die with "KVM internal error"; TCG always works
    #[arg(long, env = "ZIOB_VM_KVM")]
    pub kvm: bool,
    /// Stream the guest serial console (kernel + init log) to stderr
    #[arg(long)]
    pub console: bool,
    /// Keep the per-run directory (images, console log, outputs) and print its path
    #[arg(long)]
    pub keep: bool,
}

impl VmOpts {
    /// Options from `vm-run`-style flags (`--zones=8`, ...; none: the `vm-run` defaults),
    /// checked with [`VmOpts::validate`]: what the tasks that boot their own guests use.
    pub fn from_args<I, S>(args: I) -> Result<VmOpts>
    where
        I: IntoIterator<Item = S>,
        S: Into<std::ffi::OsString> + Clone,
    {
        use clap::Parser;
        #[derive(Parser)]
        struct Flags {
            #[command(flatten)]
            vm: VmOpts,
        }
        let words =
            std::iter::once(std::ffi::OsString::from("vm")).chain(args.into_iter().map(Into::into));
        let opts = Flags::try_parse_from(words)?.vm;
        opts.validate()?;
        Ok(opts)
    }

    /// Checks the options against what QEMU and the kernel accept.
    pub fn validate(&self) -> Result<()> {
        let bs = self.block_size as u64;
        if !bs.is_power_of_two() || !(512..=65536).contains(&bs) {
            bail!("--block-size must be a power of two in 512..=65536");
        }
        if !self.zone_size.is_power_of_two() || self.zone_size < bs {
            bail!("--zone-size must be a power of two >= the block size (Linux requires it)");
        }
        if self.zone_capacity == 0
            || self.zone_capacity > self.zone_size
            || !self.zone_capacity.is_multiple_of(bs)
        {
            bail!(
                "--zone-capacity must be a non-zero multiple of the block size and <= --zone-size"
            );
        }
        if self.zones == 0 {
            bail!("--zones must be >= 1");
        }
        if self.max_open > 0 && self.max_active > 0 && self.max_open > self.max_active {
            bail!("--max-open must be <= --max-active (QEMU rejects it otherwise)");
        }
        if !self.no_nullblk {
            let mib = 1 << 20;
            if !self.nullblk_zone_size.is_multiple_of(mib)
                || !(self.nullblk_zone_size / mib).is_power_of_two()
            {
                bail!("--nullblk-zone-size must be a power-of-two number of MiB");
            }
            if !self.nullblk_zone_capacity.is_multiple_of(mib)
                || self.nullblk_zone_capacity == 0
                || self.nullblk_zone_capacity > self.nullblk_zone_size
            {
                bail!("--nullblk-zone-capacity must be whole MiB and <= --nullblk-zone-size");
            }
            if self.nullblk_gb == 0 {
                bail!("--nullblk-gb must be >= 1");
            }
        }
        if self.hugepages as u64 * (2 << 20) > self.mem / 4 * 3 {
            bail!("--hugepages {} does not fit in --mem", self.hugepages);
        }
        for e in &self.envs {
            if !e.contains('=') {
                bail!("--env {e:?}: expected KEY=VALUE");
            }
        }
        Ok(())
    }

    fn nullblk_args(&self) -> String {
        if self.no_nullblk {
            return String::new();
        }
        let mib = 1 << 20;
        format!(
            "nr_devices=1 zoned=1 memory_backed=1 bs={} gb={} zone_size={} zone_capacity={} \
             zone_max_open={} zone_max_active={}",
            self.block_size,
            self.nullblk_gb,
            self.nullblk_zone_size / mib,
            self.nullblk_zone_capacity / mib,
            self.nullblk_max_open,
            self.nullblk_max_active
        )
    }
}

/// Single-quotes a string for POSIX sh.
pub fn sh_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Environment passed from the host to the guest command.
fn passthrough_env(opts: &VmOpts) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (k, v) in std::env::vars() {
        let keep = matches!(
            k.as_str(),
            "PATH" | "HOME" | "USER" | "LANG" | "LC_ALL" | "TERM" | "TZ" | "NO_COLOR"
        ) || k.starts_with("RUST_")
            || (k.starts_with("ZIOB_") && k != "ZIOB_VM_CACHE")
            || k.starts_with("CARGO_TERM_");
        if keep {
            out.push((k, v));
        }
    }
    for e in &opts.envs {
        let (k, v) = e.split_once('=').unwrap();
        out.push((k.to_string(), v.to_string()));
    }
    out
}

/// The start of every guest job script: environment, guest device variables, working dir.
pub fn script_prelude(opts: &VmOpts, cwd: &Path) -> String {
    let mut s = String::from("# generated by cargo xtask\n");
    // The configured geometry, so that guest tests can check against it.
    let geometry = [
        ("ZIOB_ZNS_ZONE_SIZE", opts.zone_size),
        ("ZIOB_ZNS_ZONE_CAPACITY", opts.zone_capacity),
        ("ZIOB_ZNS_ZONES", opts.zones),
        ("ZIOB_ZNS_MAX_OPEN", opts.max_open as u64),
        ("ZIOB_ZNS_MAX_ACTIVE", opts.max_active as u64),
        ("ZIOB_BLOCK_SIZE", opts.block_size as u64),
        ("ZIOB_NULLBLK_ZONE_SIZE", opts.nullblk_zone_size),
        ("ZIOB_NULLBLK_ZONE_CAPACITY", opts.nullblk_zone_capacity),
        ("ZIOB_NULLBLK_MAX_OPEN", opts.nullblk_max_open as u64),
        ("ZIOB_NULLBLK_MAX_ACTIVE", opts.nullblk_max_active as u64),
    ];
    for (k, v) in geometry {
        let _ = writeln!(s, "export {k}={v}");
    }
    for (k, v) in passthrough_env(opts) {
        let _ = writeln!(s, "export {k}={}", sh_quote(&v));
    }
    s.push_str(". /run/ziob-job/devices.env\n");
    let _ = writeln!(
        s,
        "cd {} || {{ echo \"ziob: cannot cd to {}\" >&2; exit 125; }}",
        sh_quote(&cwd.to_string_lossy()),
        cwd.display()
    );
    s
}

pub struct RunOutcome {
    pub exit_code: i32,
    pub boot_secs: Option<f64>,
    pub total_secs: f64,
}

fn create_image(path: &Path, size: u64) -> Result<()> {
    let f = fs::File::create(path)?;
    f.set_len(size)?; // sparse
    Ok(())
}

/// Copies what appeared in `path` since `pos` to `out`.
fn drain(path: &Path, pos: &mut u64, out: &mut dyn Write) {
    let Ok(mut f) = fs::File::open(path) else {
        return;
    };
    if f.seek(SeekFrom::Start(*pos)).is_err() {
        return;
    }
    let mut buf = Vec::new();
    if f.read_to_end(&mut buf).is_ok() && !buf.is_empty() {
        *pos += buf.len() as u64;
        let _ = out.write_all(&buf);
        let _ = out.flush();
    }
}

/// Boots a guest that runs `script` (a POSIX sh script executed in the host root, chrooted),
/// streaming the command's stdout/stderr (written to the 9p job share, not the console).
pub fn run_job(assets: &Assets, opts: &VmOpts, script: &str) -> Result<RunOutcome> {
    opts.validate()?;
    let started = Instant::now();
    let tmp = tempfile::Builder::new().prefix("ziob-vm-").tempdir()?;
    let dir = tmp.path();
    let job = dir.join("job");
    fs::create_dir(&job)?;
    let zns_img = dir.join("zns.img");
    create_image(&zns_img, opts.zones * opts.zone_size)?;
    let conv_img = dir.join("conv.img");
    if opts.conv_size > 0 {
        create_image(&conv_img, opts.conv_size)?;
    }
    let scratch_img = dir.join("scratch.img");
    if opts.scratch_size > 0 {
        create_image(&scratch_img, opts.scratch_size)?;
        let o = Command::new("mkfs.ext4")
            .args([
                "-q",
                "-F",
                "-O",
                "^has_journal",
                "-E",
                "lazy_itable_init=1",
                "-L",
                "ziob-scratch",
            ])
            .arg(&scratch_img)
            .output()
            .context("running mkfs.ext4 (Debian package e2fsprogs)")?;
        if !o.status.success() {
            bail!("mkfs.ext4 failed: {}", String::from_utf8_lossy(&o.stderr));
        }
    }
    let out_dir = match &opts.out_dir {
        Some(d) => {
            fs::create_dir_all(d)?;
            Some(fs::canonicalize(d)?)
        }
        None => None,
    };

    let mut cfg = String::new();
    let _ = writeln!(
        cfg,
        "ZIOB_CFG_NULLBLK_ARGS={}",
        sh_quote(&opts.nullblk_args())
    );
    let _ = writeln!(cfg, "ZIOB_CFG_HUGEPAGES={}", opts.hugepages);
    let _ = writeln!(cfg, "ZIOB_CFG_SCRATCH={}", (opts.scratch_size > 0) as u32);
    let _ = writeln!(cfg, "ZIOB_CFG_NVME_NS={}", 1 + (opts.conv_size > 0) as u32);
    if let Some(d) = &out_dir {
        let _ = writeln!(cfg, "ZIOB_CFG_OUT_DIR={}", sh_quote(&d.to_string_lossy()));
    }
    fs::write(job.join("config.sh"), cfg)?;
    fs::write(job.join("cmd.sh"), script)?;

    let console_log = dir.join("console.log");
    let qemu_log = dir.join("qemu.log");
    let mut cmd = Command::new(&assets.qemu);
    if opts.kvm {
        cmd.args(["-accel", "kvm"]); // falls back to the next -accel if KVM cannot start
    }
    cmd.args(["-accel", "tcg", "-machine", "q35", "-cpu", "max"]);
    cmd.arg("-smp").arg(opts.smp.to_string());
    cmd.arg("-m").arg(format!("{}M", opts.mem >> 20));
    cmd.args([
        "-nodefaults",
        "-nographic",
        "-no-reboot",
        "-monitor",
        "none",
    ]);
    cmd.arg("-serial")
        .arg(format!("file:{}", console_log.display()));
    if let Some(bios) = &assets.bios {
        cmd.arg("-bios").arg(bios);
    }
    cmd.arg("-kernel").arg(&assets.kernel);
    cmd.arg("-initrd").arg(&assets.initramfs);
    let loglevel = if opts.console { 7 } else { 3 };
    let mut append = format!(
        "console=ttyS0 loglevel={loglevel} panic=-1 mitigations=off tsc=reliable init_on_alloc=0"
    );
    if opts.hugepages > 0 {
        // Reserved at boot (cheaper than echo > nr_hugepages later, and unfragmented).
        let _ = write!(append, " hugepagesz=2M hugepages={}", opts.hugepages);
    }
    cmd.arg("-append").arg(append);
    let bs = opts.block_size;
    cmd.arg("-device").arg(format!(
        "nvme,id=nvme0,serial=zns0,zoned.zasl={}",
        opts.zasl
    ));
    cmd.arg("-drive").arg(format!(
        "file={},id=zns0,format=raw,if=none,cache=unsafe",
        zns_img.display()
    ));
    cmd.arg("-device").arg(format!(
        "nvme-ns,drive=zns0,bus=nvme0,nsid=1,logical_block_size={bs},physical_block_size={bs},\
         zoned=true,zoned.zone_size={},zoned.zone_capacity={},zoned.max_open={},zoned.max_active={}",
        opts.zone_size, opts.zone_capacity, opts.max_open, opts.max_active
    ));
    if opts.conv_size > 0 {
        cmd.arg("-drive").arg(format!(
            "file={},id=conv0,format=raw,if=none,cache=unsafe",
            conv_img.display()
        ));
        cmd.arg("-device").arg(format!(
            "nvme-ns,drive=conv0,bus=nvme0,nsid=2,logical_block_size={bs},physical_block_size={bs}"
        ));
    }
    if opts.scratch_size > 0 {
        cmd.arg("-drive").arg(format!(
            "file={},id=scratch,format=raw,if=none,cache=unsafe",
            scratch_img.display()
        ));
        cmd.arg("-device")
            .arg("virtio-blk-pci,drive=scratch,serial=ziob-scratch");
    }
    let mut share = |tag: &str, path: &Path, ro: bool| {
        cmd.arg("-fsdev").arg(format!(
            "local,id={tag},path={},security_model=none,multidevs=remap{}",
            path.display(),
            if ro { ",readonly=on" } else { "" }
        ));
        cmd.arg("-device")
            .arg(format!("virtio-9p-pci,fsdev={tag},mount_tag={tag}"));
    };
    share("hostroot", Path::new("/"), true);
    share("job", &job, false);
    if let Some(d) = &out_dir {
        share("out", d, false);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(&qemu_log)?);
    if std::env::var_os("ZIOB_VM_DEBUG").is_some() {
        eprintln!("[vm] {cmd:?}");
    }
    let mut child = cmd.spawn().context("starting qemu-system-x86_64")?;

    // Stream stdout/stderr from the job share (and the console if asked) while the guest runs.
    let stop = Arc::new(AtomicBool::new(false));
    let streamer = {
        let stop = stop.clone();
        let (job, console_log, console) = (job.clone(), console_log.clone(), opts.console);
        std::thread::spawn(move || {
            let (mut o, mut e, mut c) = (0u64, 0u64, 0u64);
            let mut boot: Option<f64> = None;
            loop {
                let last = stop.load(Ordering::Acquire);
                if boot.is_none() && job.join("started").exists() {
                    boot = Some(started.elapsed().as_secs_f64());
                }
                if console {
                    drain(&console_log, &mut c, &mut std::io::stderr());
                }
                drain(&job.join("stdout"), &mut o, &mut std::io::stdout());
                drain(&job.join("stderr"), &mut e, &mut std::io::stderr());
                if last {
                    return boot;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let deadline = started + Duration::from_secs(opts.timeout_secs);
    let mut timed_out = false;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if Instant::now() >= deadline {
            timed_out = true;
            let _ = child.kill();
            break child.wait()?;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    stop.store(true, Ordering::Release);
    let boot_secs = streamer.join().unwrap_or(None);
    let total_secs = started.elapsed().as_secs_f64();

    let rc = fs::read_to_string(job.join("rc"))
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    let exit_code = match (rc, timed_out) {
        (_, true) => {
            eprintln!("[vm] timeout after {} s: guest killed", opts.timeout_secs);
            124
        }
        (Some(rc), _) => rc,
        (None, _) => {
            eprintln!("[vm] the guest reported no exit status (qemu: {status})");
            125
        }
    };
    if exit_code >= 124 && !opts.console {
        let mut tail = String::new();
        for (what, p) in [("console", &console_log), ("qemu", &qemu_log)] {
            if let Ok(t) = fs::read_to_string(p) {
                let lines: Vec<&str> = t.lines().collect();
                let from = lines.len().saturating_sub(40);
                let _ = writeln!(
                    tail,
                    "--- {what} (last lines) ---\n{}",
                    lines[from..].join("\n")
                );
            }
        }
        if let Ok(t) = fs::read_to_string(job.join("init-error")) {
            tail.push_str(&t);
        }
        eprintln!("{tail}");
    }
    if opts.keep {
        let kept = tmp.keep();
        eprintln!("[vm] run directory kept: {}", kept.display());
    }
    Ok(RunOutcome {
        exit_code,
        boot_secs,
        total_secs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("8M"), Ok(8 << 20));
        assert_eq!(parse_size("8MiB"), Ok(8 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert!(parse_size("8X").is_err());
        assert!(parse_size("M").is_err());
    }

    #[test]
    fn quoting() {
        assert_eq!(sh_quote("abc/d-e"), "abc/d-e");
        assert_eq!(sh_quote(""), "''");
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
    }
}
