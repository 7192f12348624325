//! Device spec strings: one syntax selects a backend everywhere (API, CLI, benchmarks).
//!
//! | spec | backend |
//! |---|---|
//! | `mem:zones=64,zone_size=64M[,…]` | zones in RAM (tests, fault injection) |
//! | `nil:zones=64,zone_size=64M[,…]` | completes every op at once, stores nothing |
//! | `emu:/path/dev.zns[,lat_us=N][,bw_mbps=N][,discard=1][,direct=0][,zero_ahead=0][,write_behind=0]` | file-backed emulated ZNS device |
//! | `zbd:/dev/nvme0n1` | a Linux zoned block device (ZNS namespace, zoned null_blk, SMR) |
//! | `nvme:/dev/ng0n1` | a ZNS namespace through NVMe passthrough (runtime with 128-byte SQEs) |
//! | `spdk:<addr>` | SPDK's userspace NVMe driver (cargo feature `spdk`) |
//!
//! Geometry options of `mem` and `nil` (sizes take K/M/G/T suffixes, powers of 1024):
//! `zones` (default 64), `zone_size` (default 64M), `zone_capacity` (default = zone size),
//! `block_size` (default 4K), `max_open`, `max_active` (default no limit), `max_append`
//! (default 512K, at most the capacity). Options of `emu`: `lat_us` (added latency per op
//! in µs, at most 10 s) and `bw_mbps` (bandwidth cap in MB/s = 10^6 bytes/s, 1 to 10^6; 0 is
//! refused, leave the option out for no cap); both off by default. `discard=1` makes a reset
//! give the zone's space back to the host filesystem (hole punch; default `discard=0`).
//! `direct=0` reads and writes the file through the host's page cache, as a file-based store
//! such as RocksDB does by default; the default `direct=1` bypasses it (`O_DIRECT`) when the
//! filesystem allows it and the block size is at least 4 KiB, so the device behaves like a
//! drive and a store on it has only the memory it allocates itself. `zero_ahead=0` stops the
//! device from writing zeros over a zone's next host blocks ahead of its short writes (on by
//! default: a flush after writes into blocks the sparse file has not allocated yet also
//! commits their allocation; see [`crate::EmuDevice::zero_ahead`]). `write_behind=0` stops a
//! page-cache device from starting the write-back of each 1 MiB of data its writes fill
//! (which otherwise leaves a flush little to write back; on by default, no effect with
//! `O_DIRECT`; see [`crate::EmuDevice::write_behind`]).
//!
//! **Commas in an emu path.** Everything after `emu:` up to the first trailing `,KEY=VALUE`
//! segment is the path, where a segment is an option if it has the form `KEY=VALUE` with `KEY`
//! made of lowercase letters, digits and `_` (an unknown key is an error). So
//! `emu:/data/a,b.zns` is the file `/data/a,b.zns`, and `emu:/data/a,b.zns,lat_us=5` the same
//! file with an option. A path whose last comma-separated part itself looks like `KEY=VALUE`
//! (e.g. `/data/x,y=1`) cannot be written as a spec; open it with [`EmuDevice::open`].
//!
//! [`EmuDevice::open`]: crate::emu::EmuDevice::open

use std::path::PathBuf;
use std::time::Duration;

use crate::limits;
use crate::model::error::{DeviceError, Result};
use crate::model::geometry::Geometry;

/// An optional per-op latency and bandwidth model (off = both `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LatencyModel {
    /// Fixed latency added to every op.
    pub latency: Option<Duration>,
    /// Bandwidth cap in bytes per second: an op moving `n` bytes takes `n / bw` longer.
    pub bandwidth_bytes_per_sec: Option<u64>,
}

impl LatencyModel {
    /// Extra time an op moving `bytes` bytes takes (zero when the model is off).
    pub fn delay(&self, bytes: u64) -> Duration {
        let fixed = self.latency.unwrap_or_default();
        let transfer = match self.bandwidth_bytes_per_sec {
            Some(bw) if bw > 0 => Duration::from_nanos(
                (u128::from(bytes) * 1_000_000_000 / u128::from(bw)).min(u128::from(u64::MAX))
                    as u64,
            ),
            _ => Duration::ZERO,
        };
        fixed.saturating_add(transfer)
    }

    /// Whether the model adds any delay.
    pub fn is_off(&self) -> bool {
        self.latency.is_none() && self.bandwidth_bytes_per_sec.is_none()
    }

    /// Checks the bounds: a latency of at most [`limits::EMU_LATENCY_MAX`], a bandwidth cap
    /// in [`limits::EMU_BANDWIDTH_MBPS_RANGE`] (in bytes per second, × 10^6).
    pub fn validate(&self) -> Result<()> {
        if let Some(l) = self.latency.filter(|l| *l > limits::EMU_LATENCY_MAX) {
            return Err(DeviceError::InvalidArgument(format!(
                "latency {l:?} is longer than the {:?} the latency model allows",
                limits::EMU_LATENCY_MAX
            )));
        }
        let range = &limits::EMU_BANDWIDTH_MBPS_RANGE;
        if let Some(bw) = self.bandwidth_bytes_per_sec {
            if !(range.start() * 1_000_000..=range.end() * 1_000_000).contains(&bw) {
                return Err(DeviceError::InvalidArgument(format!(
                    "bandwidth cap of {bw} bytes/s is outside {} to {} MB/s (leave it out for no cap)",
                    range.start(),
                    range.end()
                )));
            }
        }
        Ok(())
    }
}

/// A parsed device spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSpec {
    /// `mem:…`: RAM-backed device of the given geometry.
    Mem(Geometry),
    /// `nil:…`: state-only device of the given geometry.
    Nil(Geometry),
    /// `emu:PATH[,…]`: file-backed emulated device.
    Emu {
        /// The device file.
        path: PathBuf,
        /// Optional latency model.
        latency: LatencyModel,
        /// `discard=1`: a reset gives the zone's space back to the host filesystem (hole
        /// punch); off by default (see [`crate::EmuDevice::discard_on_reset`]).
        discard: bool,
        /// `direct=0`: data I/O goes through the host's page cache; by default (`direct=1`)
        /// it bypasses it where it can (see [`crate::EmuDevice::is_direct`]).
        direct: bool,
        /// `zero_ahead=0`: short writes do not make the device zero the next host blocks of
        /// their zone; on by default (see [`crate::EmuDevice::zero_ahead`]).
        zero_ahead: bool,
        /// `write_behind=0`: the device does not start the write-back of the data its writes
        /// put in the page cache (the next flush, or the kernel, does it); on by default
        /// (see [`crate::EmuDevice::write_behind`]).
        write_behind: bool,
    },
    /// `zbd:PATH`: a kernel zoned block device (see [`crate::zbd`]).
    Zbd(PathBuf),
    /// `nvme:PATH`: an NVMe generic char device (`/dev/ngXnY`) for passthrough.
    Nvme(PathBuf),
    /// `spdk:ADDR`: a PCI address or transport id (not built in yet).
    Spdk(String),
}

impl DeviceSpec {
    /// Whether the spec asks for a device whose reads are served from host memory: a `mem:`
    /// device, or an `emu:` file through the page cache (`direct=0`) without a latency model
    /// (`lat_us`, `bw_mbps`) — the cases where [`crate::ZonedDevice::read_now`] can answer on
    /// the caller's thread. A cache of its reads in the process would hold a second copy.
    /// As the spec asks: an opened `emu:` file may still fall back to buffered I/O (see
    /// [`crate::EmuDevice::is_direct`]), and a page-cache read of cold data goes to disk.
    pub fn reads_from_host_memory(&self) -> bool {
        match self {
            DeviceSpec::Mem(_) => true,
            DeviceSpec::Emu {
                direct, latency, ..
            } => !*direct && latency.is_off(),
            _ => false,
        }
    }
}

/// Parses a size with an optional K/M/G/T suffix (powers of 1024; `KiB`, `KB` and lower case
/// are accepted too), e.g. `64M` = 67108864.
pub fn parse_size_bytes(text: &str) -> std::result::Result<u64, String> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(digits_end);
    if num.is_empty() {
        return Err(format!(
            "`{text}` is not a size (expected e.g. 4096, 64K, 1M, 2G)"
        ));
    }
    let value: u64 = num.parse().map_err(|_| format!("`{text}` is too large"))?;
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => {
            return Err(format!(
                "`{text}` has an unknown size suffix (use K, M, G or T)"
            ))
        }
    };
    value
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("`{text}` is too large"))
}

impl DeviceSpec {
    /// Parses a spec string such as `mem:zones=8,zone_size=1M` or `emu:/tmp/d.zns,lat_us=20`.
    pub fn parse(spec: &str) -> Result<DeviceSpec> {
        let invalid = |reason: String| DeviceError::InvalidSpec {
            spec: spec.to_string(),
            reason,
        };
        let (backend, rest) = spec.split_once(':').ok_or_else(|| {
            invalid(
                "expected BACKEND:ARGS, e.g. emu:/path/dev.zns or mem:zones=8,zone_size=1M".into(),
            )
        })?;
        match backend {
            "mem" => Ok(DeviceSpec::Mem(parse_geometry(rest).map_err(invalid)?)),
            "nil" => Ok(DeviceSpec::Nil(parse_geometry(rest).map_err(invalid)?)),
            "emu" => {
                let (path, options) = split_emu_options(rest);
                if path.is_empty() {
                    return Err(invalid(
                        "emu needs a file path, e.g. emu:/tmp/dev.zns".into(),
                    ));
                }
                let mut latency = LatencyModel::default();
                let mut discard = false;
                let mut direct = true;
                let mut zero_ahead = true;
                let mut write_behind = true;
                for (key, value) in options {
                    let n: u64 = value
                        .parse()
                        .map_err(|_| invalid(format!("{key}={value} is not a number")))?;
                    match key {
                        "lat_us" => {
                            let max = limits::EMU_LATENCY_MAX.as_micros();
                            if u128::from(n) > max {
                                return Err(invalid(format!(
                                    "lat_us={n} is more than {max} (10 s)"
                                )));
                            }
                            latency.latency = Some(Duration::from_micros(n));
                        }
                        "bw_mbps" => {
                            let range = &limits::EMU_BANDWIDTH_MBPS_RANGE;
                            if !range.contains(&n) {
                                return Err(invalid(format!(
                                    "bw_mbps={n} is not between {} and {} (leave it out for no cap)",
                                    range.start(),
                                    range.end()
                                )));
                            }
                            latency.bandwidth_bytes_per_sec = Some(n * 1_000_000);
                        }
                        "discard" => {
                            discard =
                                switch(key, n, "discard=1 (punch holes on reset) or discard=0")
                                    .map_err(invalid)?;
                        }
                        "direct" => {
                            direct = switch(
                                key,
                                n,
                                "direct=0 (through the page cache) or direct=1 (O_DIRECT, the \
                                 default)",
                            )
                            .map_err(invalid)?;
                        }
                        "zero_ahead" => {
                            zero_ahead = switch(
                                key,
                                n,
                                "zero_ahead=0 (leave unwritten host blocks to the writes) or \
                                 zero_ahead=1 (zero them ahead of short writes, the default)",
                            )
                            .map_err(invalid)?;
                        }
                        "write_behind" => {
                            write_behind = switch(
                                key,
                                n,
                                "write_behind=0 (leave the write-back to the flushes) or \
                                 write_behind=1 (start it as writes fill each MiB, the default)",
                            )
                            .map_err(invalid)?;
                        }
                        _ => {
                            return Err(invalid(format!(
                                "unknown emu option `{key}` (known: lat_us, bw_mbps, discard, \
                                 direct, zero_ahead, write_behind)"
                            )))
                        }
                    }
                }
                Ok(DeviceSpec::Emu {
                    path: PathBuf::from(path),
                    latency,
                    discard,
                    direct,
                    zero_ahead,
                    write_behind,
                })
            }
            "zbd" | "nvme" if rest.is_empty() => {
                Err(invalid(format!("{backend} needs a device path")))
            }
            "zbd" => Ok(DeviceSpec::Zbd(PathBuf::from(rest))),
            "nvme" => Ok(DeviceSpec::Nvme(PathBuf::from(rest))),
            "spdk" if rest.is_empty() => {
                Err(invalid("spdk needs a PCI address or transport id".into()))
            }
            "spdk" => Ok(DeviceSpec::Spdk(rest.to_string())),
            other => Err(invalid(format!(
                "unknown backend `{other}` (known: mem, nil, emu, zbd, nvme, spdk)"
            ))),
        }
    }
}

/// An on/off option: `0` or `1`; anything else is an error naming the choices (`use`).
fn switch(key: &str, n: u64, choices: &str) -> std::result::Result<bool, String> {
    match n {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(format!("{key}={n}: use {choices}")),
    }
}

/// Splits `PATH[,KEY=VALUE]...` into the path and its trailing options (see the module doc:
/// trailing segments of the form `KEY=VALUE`, `KEY` of lowercase letters, digits and `_`).
fn split_emu_options(rest: &str) -> (&str, Vec<(&str, &str)>) {
    let is_option = |seg: &str| {
        seg.split_once('=').is_some_and(|(k, _)| {
            !k.is_empty()
                && k.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        })
    };
    let mut path = rest;
    let mut options = Vec::new();
    while let Some((head, last)) = path.rsplit_once(',') {
        if !is_option(last) {
            break;
        }
        let (k, v) = last.split_once('=').expect("an option has `=`");
        options.push((k, v));
        path = head;
    }
    options.reverse();
    (path, options)
}

fn split_option(opt: &str) -> std::result::Result<(&str, &str), String> {
    opt.split_once('=')
        .filter(|(k, v)| !k.is_empty() && !v.is_empty())
        .ok_or_else(|| format!("option `{opt}` is not KEY=VALUE"))
}

fn parse_geometry(options: &str) -> std::result::Result<Geometry, String> {
    let mut g = Geometry::new(64, 64 << 20);
    let mut capacity = None;
    let mut max_append = None;
    for opt in options.split(',').filter(|o| !o.is_empty()) {
        let (key, value) = split_option(opt)?;
        let size = || parse_size_bytes(value);
        let count = || -> std::result::Result<u32, String> {
            value
                .parse()
                .map_err(|_| format!("{key}={value} is not a count"))
        };
        match key {
            "zones" => g.zone_count = count()?,
            "zone_size" => g.zone_size_bytes = size()?,
            "zone_capacity" => capacity = Some(size()?),
            "block_size" => g.block_size_bytes = size()?,
            "max_open" => g.max_open_zones = Some(count()?),
            "max_active" => g.max_active_zones = Some(count()?),
            "max_append" => max_append = Some(size()?),
            _ => {
                return Err(format!(
                    "unknown option `{key}` (known: zones, zone_size, zone_capacity, block_size, max_open, max_active, max_append)"
                ))
            }
        }
    }
    g.zone_capacity_bytes = capacity.unwrap_or(g.zone_size_bytes);
    g.max_append_bytes =
        max_append.unwrap_or(limits::MAX_APPEND_BYTES_DEFAULT.min(g.zone_capacity_bytes));
    g.validate().map_err(|e| e.to_string())?;
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_from_host_memory_only_for_mem_and_page_cache_emu_without_latency() {
        let yes = |spec: &str| DeviceSpec::parse(spec).unwrap().reads_from_host_memory();
        assert!(yes("mem:zones=8,zone_size=1M"));
        assert!(yes("emu:/x,direct=0"));
        assert!(!yes("emu:/x"));
        assert!(!yes("emu:/x,direct=1"));
        assert!(!yes("emu:/x,direct=0,lat_us=20"));
        assert!(!yes("emu:/x,direct=0,bw_mbps=100"));
        assert!(!yes("nil:zones=8,zone_size=1M"));
        assert!(!yes("zbd:/dev/nvme0n1"));
        assert!(!yes("nvme:/dev/ng0n1"));
    }

    #[test]
    fn sizes_take_suffixes() {
        assert_eq!(parse_size_bytes("4096"), Ok(4096));
        assert_eq!(parse_size_bytes("64K"), Ok(64 << 10));
        assert_eq!(parse_size_bytes("1m"), Ok(1 << 20));
        assert_eq!(parse_size_bytes("2GiB"), Ok(2 << 30));
        assert!(parse_size_bytes("12Q").is_err());
        assert!(parse_size_bytes("M").is_err());
        assert!(parse_size_bytes("99999999999999999999").is_err());
    }

    #[test]
    fn parses_every_backend() {
        let DeviceSpec::Mem(g) = DeviceSpec::parse(
            "mem:zones=8,zone_size=1M,zone_capacity=768K,max_open=2,max_active=3",
        )
        .unwrap() else {
            panic!("not mem")
        };
        assert_eq!(g.zone_count, 8);
        assert_eq!(g.zone_capacity_bytes, 768 << 10);
        assert_eq!(g.max_open_zones, Some(2));
        assert_eq!(g.max_append_bytes, 512 << 10);
        let spec = DeviceSpec::parse("emu:/tmp/x.zns,lat_us=20,bw_mbps=100").unwrap();
        let DeviceSpec::Emu { path, latency, .. } = spec else {
            panic!("not emu")
        };
        assert_eq!(path, PathBuf::from("/tmp/x.zns"));
        assert_eq!(latency.delay(1_000_000), Duration::from_micros(10_020));
        assert_eq!(
            DeviceSpec::parse("zbd:/dev/nvme0n1").unwrap(),
            DeviceSpec::Zbd("/dev/nvme0n1".into())
        );
        assert!(matches!(
            DeviceSpec::parse("nil:").unwrap(),
            DeviceSpec::Nil(_)
        ));
    }

    #[test]
    fn refuses_with_a_reason() {
        let e = DeviceSpec::parse("tape:/dev/st0").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid device spec `tape:/dev/st0`: unknown backend `tape` (known: mem, nil, emu, zbd, nvme, spdk)"
        );
        let e = DeviceSpec::parse("mem:zones=8,zone_size=1M,zone_capacity=2M").unwrap_err();
        assert!(e.to_string().contains("zone capacity"), "{e}");
        assert!(DeviceSpec::parse("emu:").is_err());
        assert!(DeviceSpec::parse("emu:/x,lat=3").is_err());
        assert!(DeviceSpec::parse("emu:,lat_us=3").is_err());
    }

    #[test]
    fn emu_zero_ahead_is_on_unless_turned_off_and_only_0_or_1() {
        let zero_ahead = |spec: &str| match DeviceSpec::parse(spec).unwrap() {
            DeviceSpec::Emu { zero_ahead, .. } => zero_ahead,
            other => panic!("{other:?}"),
        };
        assert!(zero_ahead("emu:/x.zns"));
        assert!(zero_ahead("emu:/x.zns,zero_ahead=1"));
        assert!(!zero_ahead("emu:/x.zns,direct=0,zero_ahead=0"));
        let e = DeviceSpec::parse("emu:/x.zns,zero_ahead=yes").unwrap_err();
        assert!(e.to_string().contains("zero_ahead=yes"), "{e}");
        let e = DeviceSpec::parse("emu:/x.zns,zero_ahead=2").unwrap_err();
        assert!(e.to_string().contains("zero_ahead=2"), "{e}");
    }

    #[test]
    fn emu_write_behind_is_on_unless_turned_off_and_only_0_or_1() {
        let write_behind = |spec: &str| match DeviceSpec::parse(spec).unwrap() {
            DeviceSpec::Emu { write_behind, .. } => write_behind,
            other => panic!("{other:?}"),
        };
        assert!(write_behind("emu:/x.zns,direct=0"));
        assert!(write_behind("emu:/x.zns,write_behind=1"));
        assert!(!write_behind("emu:/x.zns,direct=0,write_behind=0"));
        let e = DeviceSpec::parse("emu:/x.zns,write_behind=on").unwrap_err();
        assert!(e.to_string().contains("write_behind=on"), "{e}");
        let e = DeviceSpec::parse("emu:/x.zns,write_behind=2").unwrap_err();
        assert!(e.to_string().contains("write_behind=2"), "{e}");
    }

    #[test]
    fn emu_discard_is_off_unless_asked_and_only_0_or_1() {
        let discard = |spec: &str| match DeviceSpec::parse(spec).unwrap() {
            DeviceSpec::Emu { discard, .. } => discard,
            other => panic!("{other:?}"),
        };
        assert!(!discard("emu:/x.zns"));
        assert!(!discard("emu:/x.zns,discard=0"));
        assert!(discard("emu:/x.zns,lat_us=5,discard=1"));
        let e = DeviceSpec::parse("emu:/x.zns,discard=2").unwrap_err();
        assert!(e.to_string().contains("discard=2"), "{e}");
    }

    #[test]
    fn emu_direct_is_on_unless_turned_off_and_only_0_or_1() {
        let direct = |spec: &str| match DeviceSpec::parse(spec).unwrap() {
            DeviceSpec::Emu { direct, .. } => direct,
            other => panic!("{other:?}"),
        };
        assert!(direct("emu:/x.zns"));
        assert!(direct("emu:/x.zns,direct=1"));
        assert!(!direct("emu:/x.zns,discard=1,direct=0"));
        let e = DeviceSpec::parse("emu:/x.zns,direct=2").unwrap_err();
        assert!(e.to_string().contains("direct=2"), "{e}");
    }

    fn emu(spec: &str) -> (PathBuf, LatencyModel) {
        match DeviceSpec::parse(spec).unwrap() {
            DeviceSpec::Emu { path, latency, .. } => (path, latency),
            other => panic!("not emu: {other:?}"),
        }
    }

    #[test]
    fn an_emu_path_may_contain_commas() {
        assert_eq!(emu("emu:/d/a,b.zns").0, PathBuf::from("/d/a,b.zns"));
        assert_eq!(emu("emu:/d/a,,b").0, PathBuf::from("/d/a,,b"));
        let (path, lat) = emu("emu:/d/a,b.zns,lat_us=5,bw_mbps=7");
        assert_eq!(path, PathBuf::from("/d/a,b.zns"));
        assert_eq!(lat.latency, Some(Duration::from_micros(5)));
        assert_eq!(lat.bandwidth_bytes_per_sec, Some(7_000_000));
        // Options are only the trailing segments.
        assert_eq!(
            emu("emu:/d/lat_us=5,x.zns").0,
            PathBuf::from("/d/lat_us=5,x.zns")
        );
        assert_eq!(emu("emu:/d/Dir=1,x").0, PathBuf::from("/d/Dir=1,x"));
    }

    #[test]
    fn latency_options_that_overflow_or_mean_forever_are_refused() {
        let reason = |spec: &str| match DeviceSpec::parse(spec) {
            Err(DeviceError::InvalidSpec { reason, .. }) => reason,
            other => panic!("{spec}: {other:?}"),
        };
        assert_eq!(
            reason("emu:/x,bw_mbps=0"),
            "bw_mbps=0 is not between 1 and 1000000 (leave it out for no cap)"
        );
        assert!(reason("emu:/x,bw_mbps=18446744073709551615").contains("not between"));
        assert!(reason("emu:/x,bw_mbps=18446744073709551616").contains("not a number"));
        assert_eq!(
            reason("emu:/x,lat_us=18446744073709551615"),
            "lat_us=18446744073709551615 is more than 10000000 (10 s)"
        );
        assert!(reason("emu:/x,lat_us=-1").contains("not a number"));
        let (_, lat) = emu("emu:/x,lat_us=10000000,bw_mbps=1000000");
        assert_eq!(lat.validate().map_err(|e| e.to_string()), Ok(()));
        let forever = LatencyModel {
            latency: Some(Duration::MAX),
            bandwidth_bytes_per_sec: Some(0),
        };
        assert!(forever.validate().is_err());
        // delay never panics, whatever the fields hold.
        let _ = forever.delay(u64::MAX);
    }
}
