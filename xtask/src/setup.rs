//! `vm-setup`: host packages, guest kernel (Debian package unpacked with `dpkg -x`, never
//! installed), vmlinux extraction for PVH boot, and the initramfs (busybox + init + modules).
//! Everything lands in the cache directory and is reused when present.

use anyhow::{anyhow, bail, Context, Result};
use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::cpio::{fnv1a64, NewcWriter};

/// The guest's /init. Per-run settings come from the job share, so the initramfs stays cached.
pub const GUEST_INIT: &str = include_str!("guest-init.sh");

/// Modules the guest needs (dependencies are resolved from each module's `.modinfo`).
const WANTED_MODULES: &[&str] = &[
    "virtio_pci",
    "virtio_blk",
    "ext4",
    "9pnet_virtio",
    "9p",
    "overlay",
    "nvme",
    "null_blk",
    "uio_pci_generic",
];
/// Soft dependencies (crypto providers requested by alias) that are loaded if present.
const OPTIONAL_MODULES: &[&str] = &[
    "crct10dif_generic",
    "crc64_rocksoft_generic",
    "crc32c_generic",
    "crc32c_intel",
];
/// Loaded by /init itself with per-run parameters, so kept out of the boot-time list.
const LATE_MODULES: &[&str] = &["null_blk"];

pub const QBOOT_ROM: &str = "/usr/share/qemu/qboot.rom";
const BUSYBOX: &str = "/bin/busybox";

/// What a guest boot needs, all inside the cache directory except the QEMU binary and firmware.
#[derive(Debug, Clone)]
pub struct Assets {
    pub qemu: PathBuf,
    pub bios: Option<PathBuf>,
    /// Uncompressed vmlinux (PVH boot) or the bzImage when PVH is not possible.
    pub kernel: PathBuf,
    pub pvh: bool,
    pub kernel_version: String,
    pub initramfs: PathBuf,
}

pub fn cache_dir() -> PathBuf {
    std::env::var_os("ZIOB_VM_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/ziob-vm"))
}

#[derive(Debug, Clone, Default)]
pub struct SetupOpts {
    /// Install missing Debian packages with apt-get (otherwise: fail with a message).
    pub install: bool,
    /// Explicit kernel package, e.g. linux-image-6.1.0-57-amd64-unsigned.
    pub kernel_pkg: Option<String>,
    /// Re-resolve the kernel package even if one is cached.
    pub refresh_kernel: bool,
    pub verbose: bool,
}

/// Idempotent setup; cheap (a few file checks plus hashing ~3 MB) when everything is cached.
pub fn ensure(opts: &SetupOpts) -> Result<Assets> {
    let cache = cache_dir();
    fs::create_dir_all(&cache)
        .with_context(|| format!("creating cache dir {}", cache.display()))?;
    ensure_host_packages(opts)?;
    let qemu = which("qemu-system-x86_64").ok_or_else(|| anyhow!("qemu-system-x86_64 missing"))?;
    let bios = Path::new(QBOOT_ROM)
        .exists()
        .then(|| PathBuf::from(QBOOT_ROM));
    let kdir = ensure_kernel(&cache, opts)?;
    let version = kernel_version(&kdir)?;
    let (kernel, pvh) = ensure_vmlinux(&kdir)?;
    let initramfs = ensure_initramfs(&cache, &kdir, &version, opts.verbose)?;
    Ok(Assets {
        qemu,
        bios,
        kernel,
        pvh,
        kernel_version: version,
        initramfs,
    })
}

pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn dpkg_installed(pkg: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", pkg])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        .unwrap_or(false)
}

fn ensure_host_packages(opts: &SetupOpts) -> Result<()> {
    let mut missing = Vec::new();
    if which("qemu-system-x86_64").is_none() || !Path::new(QBOOT_ROM).exists() {
        // qboot.rom ships in qemu-system-data, a dependency of qemu-system-x86.
        missing.push("qemu-system-x86");
    }
    if !dpkg_installed("busybox-static") || !Path::new(BUSYBOX).exists() {
        missing.push("busybox-static");
    }
    if which("xz").is_none() {
        missing.push("xz-utils");
    }
    if which("mkfs.ext4").is_none() {
        missing.push("e2fsprogs");
    }
    if missing.is_empty() {
        return Ok(());
    }
    if !opts.install {
        bail!(
            "missing Debian packages: {} — run `cargo xtask vm-setup` (as root) or `apt-get install -y {}`",
            missing.join(" "),
            missing.join(" ")
        );
    }
    eprintln!("[vm-setup] apt-get install -y {}", missing.join(" "));
    if apt_install(&missing).is_err() {
        run(Command::new("apt-get").arg("update"))?;
        apt_install(&missing)?;
    }
    Ok(())
}

fn apt_install(pkgs: &[&str]) -> Result<()> {
    run(Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends"])
        .args(pkgs)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

fn run(cmd: &mut Command) -> Result<()> {
    let st = cmd
        .status()
        .with_context(|| format!("running {:?}", cmd.get_program()))?;
    if !st.success() {
        bail!("{cmd:?} failed: {st}");
    }
    Ok(())
}

fn output(cmd: &mut Command) -> Result<String> {
    let o = cmd
        .output()
        .with_context(|| format!("running {:?}", cmd.get_program()))?;
    if !o.status.success() {
        bail!(
            "{cmd:?} failed: {}: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Picks the kernel package: the explicit one, else what `linux-image-amd64` depends on
/// (the current Debian 6.1 kernel on bookworm), preferring the identical `-unsigned` build.
fn resolve_kernel_pkg(opts: &SetupOpts) -> Result<String> {
    if let Some(p) = &opts.kernel_pkg {
        return Ok(p.clone());
    }
    let deps = || output(Command::new("apt-cache").args(["depends", "linux-image-amd64"]));
    let text = match deps() {
        Ok(t) if t.contains("Depends: linux-image-") => t,
        _ => {
            run(Command::new("apt-get").arg("update"))?;
            deps()?
        }
    };
    let name = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .find(|n| n.starts_with("linux-image-"))
        .ok_or_else(|| anyhow!("cannot resolve linux-image-amd64's kernel package"))?
        .trim()
        .to_string();
    let unsigned = format!("{name}-unsigned");
    let has_unsigned = output(Command::new("apt-cache").args(["policy", &unsigned]))
        .map(|t| t.contains("Candidate:") && !t.contains("Candidate: (none)"))
        .unwrap_or(false);
    Ok(if has_unsigned { unsigned } else { name })
}

/// Returns the directory holding the unpacked kernel package (`<dir>/root`).
fn ensure_kernel(cache: &Path, opts: &SetupOpts) -> Result<PathBuf> {
    let marker = cache.join("kernel-pkg");
    let pkg = match fs::read_to_string(&marker) {
        Ok(p) if !opts.refresh_kernel && opts.kernel_pkg.is_none() && !p.trim().is_empty() => {
            p.trim().to_string()
        }
        _ => resolve_kernel_pkg(opts)?,
    };
    let kdir = cache.join("kernels").join(&pkg);
    if kdir.join("root").join("boot").is_dir() {
        write_atomic(&marker, pkg.as_bytes())?;
        return Ok(kdir);
    }
    if !opts.install {
        bail!(
            "guest kernel {pkg} is not unpacked in {} — run `cargo xtask vm-setup`",
            cache.display()
        );
    }
    eprintln!(
        "[vm-setup] apt-get download {pkg} + dpkg -x into {}",
        kdir.display()
    );
    let dl = cache.join(format!("download.{}.tmp", std::process::id()));
    let _ = fs::remove_dir_all(&dl);
    fs::create_dir_all(&dl)?;
    run(Command::new("apt-get")
        .args(["-o", "APT::Sandbox::User=root", "download"])
        .arg(&pkg)
        .current_dir(&dl))?;
    let deb = fs::read_dir(&dl)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "deb"))
        .ok_or_else(|| anyhow!("apt-get download {pkg} produced no .deb"))?;
    let tmp = cache
        .join("kernels")
        .join(format!("{pkg}.{}.tmp", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp)?;
    run(Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(tmp.join("root")))?;
    fs::remove_dir_all(&dl)?;
    let _ = fs::remove_dir_all(&kdir);
    if let Err(e) = fs::rename(&tmp, &kdir) {
        // A concurrent vm-setup may have won the race: use its copy.
        let _ = fs::remove_dir_all(&tmp);
        if !kdir.join("root").join("boot").is_dir() {
            return Err(e).context("moving the unpacked kernel into the cache");
        }
    }
    write_atomic(&marker, pkg.as_bytes())?;
    Ok(kdir)
}

fn kernel_version(kdir: &Path) -> Result<String> {
    let mods = kdir.join("root/lib/modules");
    let mods = if mods.is_dir() {
        mods
    } else {
        kdir.join("root/usr/lib/modules")
    };
    for e in fs::read_dir(&mods).with_context(|| format!("reading {}", mods.display()))? {
        let e = e?;
        if e.path().join("kernel").is_dir() {
            return Ok(e.file_name().to_string_lossy().into_owned());
        }
    }
    bail!("no kernel modules in {}", mods.display())
}

fn modules_root(kdir: &Path, version: &str) -> PathBuf {
    let p = kdir.join("root/lib/modules").join(version);
    if p.is_dir() {
        p
    } else {
        kdir.join("root/usr/lib/modules").join(version)
    }
}

fn vmlinuz_path(kdir: &Path) -> Result<PathBuf> {
    fs::read_dir(kdir.join("root/boot"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
        })
        .ok_or_else(|| anyhow!("no vmlinuz in {}", kdir.display()))
}

/// Extracts the uncompressed ELF vmlinux (like the kernel's scripts/extract-vmlinux) and checks
/// for the PVH entry note; returns the image to boot and whether it is a PVH vmlinux.
fn ensure_vmlinux(kdir: &Path) -> Result<(PathBuf, bool)> {
    let vmlinuz = vmlinuz_path(kdir)?;
    let vmlinux = kdir.join("vmlinux");
    let nopvh = kdir.join("vmlinux.nopvh");
    if nopvh.exists() {
        return Ok((vmlinuz, false));
    }
    if vmlinux.exists() {
        return Ok((vmlinux, true));
    }
    let img = fs::read(&vmlinuz)?;
    match extract_vmlinux(&img) {
        Some(elf) if has_pvh_note(&elf) => {
            write_atomic(&vmlinux, &elf)?;
            Ok((vmlinux, true))
        }
        Some(_) => {
            eprintln!("[vm-setup] vmlinux has no PVH entry note: booting the bzImage instead");
            fs::write(&nopvh, b"")?;
            Ok((vmlinuz, false))
        }
        None => {
            eprintln!("[vm-setup] could not extract vmlinux: booting the bzImage instead");
            fs::write(&nopvh, b"")?;
            Ok((vmlinuz, false))
        }
    }
}

fn find_all(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    hay.windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect()
}

/// Decompresses `input` with an external tool, ignoring its exit status (trailing data after
/// the stream makes some of them complain) — the caller validates the output.
fn pipe_through(prog: &str, args: &[&str], input: &[u8]) -> Option<Vec<u8>> {
    let mut child = Command::new(prog)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdin = child.stdin.take()?;
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().ok()?;
    let _ = writer.join();
    Some(out.stdout)
}

pub fn extract_vmlinux(img: &[u8]) -> Option<Vec<u8>> {
    let candidates: [(&[u8], &str, &[&str]); 3] = [
        (b"\xfd7zXZ\x00", "xz", &["-dc", "--single-stream"]),
        (b"\x28\xb5\x2f\xfd", "zstd", &["-dcq"]),
        (b"\x1f\x8b\x08", "gzip", &["-dc"]),
    ];
    for (magic, prog, args) in candidates {
        for off in find_all(img, magic) {
            if let Some(out) = pipe_through(prog, args, &img[off..]) {
                if out.starts_with(b"\x7fELF") {
                    return Some(out);
                }
            }
        }
    }
    None
}

/// True if the ELF has a Xen note of type XEN_ELFNOTE_PHYS32_ENTRY (18): the PVH entry point.
pub fn has_pvh_note(elf: &[u8]) -> bool {
    let rd32 = |o: usize| {
        elf.get(o..o + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    };
    let rd64 = |o: usize| {
        elf.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    };
    let rd16 = |o: usize| {
        elf.get(o..o + 2)
            .map(|b| u16::from_le_bytes(b.try_into().unwrap()))
    };
    if elf.get(..5) != Some(b"\x7fELF\x02") {
        return false;
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (rd64(0x20), rd16(0x36), rd16(0x38)) else {
        return false;
    };
    for i in 0..phnum as usize {
        let ph = phoff as usize + i * phentsize as usize;
        if rd32(ph) != Some(4) {
            continue; // PT_NOTE
        }
        let (Some(off), Some(size)) = (rd64(ph + 8), rd64(ph + 32)) else {
            continue;
        };
        let (mut p, end) = (off as usize, (off + size) as usize);
        while p + 12 <= end {
            let (Some(namesz), Some(descsz), Some(ty)) = (rd32(p), rd32(p + 4), rd32(p + 8)) else {
                break;
            };
            let name = elf.get(p + 12..p + 12 + namesz as usize).unwrap_or(&[]);
            if name == b"Xen\0" && ty == 18 {
                return true;
            }
            p += 12 + (namesz as usize).div_ceil(4) * 4 + (descsz as usize).div_ceil(4) * 4;
        }
    }
    false
}

fn norm(name: &str) -> String {
    name.replace('-', "_")
}

/// Reads a module file, decompressing `.ko.xz` / `.ko.zst` / `.ko.gz` on the host.
fn read_module(path: &Path) -> Result<Vec<u8>> {
    let raw = fs::read(path)?;
    let name = path.to_string_lossy();
    let out = if name.ends_with(".xz") {
        pipe_through("xz", &["-dc"], &raw)
    } else if name.ends_with(".zst") {
        pipe_through("zstd", &["-dcq"], &raw)
    } else if name.ends_with(".gz") {
        pipe_through("gzip", &["-dc"], &raw)
    } else {
        return Ok(raw);
    };
    match out {
        Some(o) if o.starts_with(b"\x7fELF") => Ok(o),
        _ => bail!("cannot decompress {}", path.display()),
    }
}

/// `depends=` from the module's .modinfo section.
fn module_depends(ko: &[u8]) -> Vec<String> {
    for off in find_all(ko, b"\0depends=") {
        let start = off + 9;
        let end = ko[start..].iter().position(|&b| b == 0).map(|e| start + e);
        if let Some(end) = end {
            return String::from_utf8_lossy(&ko[start..end])
                .split(',')
                .filter(|s| !s.is_empty())
                .map(norm)
                .collect();
        }
    }
    Vec::new()
}

fn index_modules(dir: &Path, out: &mut BTreeMap<String, PathBuf>) -> Result<()> {
    for e in fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            index_modules(&p, out)?;
        } else if let Some(n) = p.file_name().map(|n| n.to_string_lossy().into_owned()) {
            if let Some(i) = n.find(".ko") {
                out.insert(norm(&n[..i]), p.clone());
            }
        }
    }
    Ok(())
}

/// Module names in load order (dependencies first) with their uncompressed contents.
pub fn resolve_modules(modroot: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    let mut index = BTreeMap::new();
    index_modules(&modroot.join("kernel"), &mut index)?;
    let builtin: HashSet<String> = fs::read_to_string(modroot.join("modules.builtin"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.rsplit('/').next())
        .filter_map(|n| n.split(".ko").next())
        .map(norm)
        .collect();
    fn visit(
        name: &str,
        index: &BTreeMap<String, PathBuf>,
        builtin: &HashSet<String>,
        seen: &mut HashSet<String>,
        order: &mut Vec<(String, Vec<u8>)>,
    ) -> Result<()> {
        if !seen.insert(name.to_string()) {
            return Ok(());
        }
        let Some(path) = index.get(name) else {
            if builtin.contains(name) {
                return Ok(());
            }
            bail!("kernel module {name} not found (neither a .ko nor built in)");
        };
        let data = read_module(path)?;
        for d in module_depends(&data) {
            visit(&d, index, builtin, seen, order)?;
        }
        order.push((name.to_string(), data));
        Ok(())
    }
    let mut seen = HashSet::new();
    let mut order = Vec::new();
    for m in OPTIONAL_MODULES {
        if index.contains_key(*m) {
            visit(m, &index, &builtin, &mut seen, &mut order)?;
        }
    }
    for m in WANTED_MODULES {
        visit(m, &index, &builtin, &mut seen, &mut order)?;
    }
    Ok(order)
}

fn ensure_initramfs(cache: &Path, kdir: &Path, version: &str, verbose: bool) -> Result<PathBuf> {
    let modules = resolve_modules(&modules_root(kdir, version))?;
    let busybox = fs::read(BUSYBOX).with_context(|| format!("reading {BUSYBOX}"))?;
    let mut w = NewcWriter::new();
    for d in [
        "bin",
        "sbin",
        "usr",
        "usr/bin",
        "usr/sbin",
        "dev",
        "proc",
        "sys",
        "tmp",
        "etc",
        "lib",
        "lib/modules",
        "host",
        "newroot",
        "job",
        "rw",
        "out",
        "run",
    ] {
        w.dir(d);
    }
    w.char_dev("dev/console", 0o600, 5, 1);
    w.char_dev("dev/null", 0o666, 1, 3);
    w.file("bin/busybox", 0o755, &busybox);
    w.symlink("bin/sh", "busybox");
    w.file("init", 0o755, GUEST_INIT.as_bytes());
    let mut early = String::new();
    for (name, data) in &modules {
        w.file(&format!("lib/modules/{name}.ko"), 0o644, data);
        if !LATE_MODULES.contains(&name.as_str()) {
            early.push_str(name);
            early.push('\n');
        }
    }
    w.file("etc/ziob-modules", 0o644, early.as_bytes());
    w.file("etc/ziob-kernel", 0o644, version.as_bytes());
    let img = w.finish();
    let path = cache.join(format!("initramfs-{:016x}.cpio", fnv1a64(&img)));
    if !path.exists() {
        if verbose {
            eprintln!(
                "[vm-setup] initramfs {} ({} KiB, modules: {})",
                path.display(),
                img.len() / 1024,
                modules
                    .iter()
                    .map(|m| m.0.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
        write_atomic(&path, &img)?;
    }
    Ok(path)
}

fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    fs::write(&tmp, data).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, path)?;
    Ok(())
}
