//! The `ziob://` URI: a ZIOB device spec, then options after `?`.
//!
//! `ziob://<device spec>[?key=value[&key=value…]]`, e.g. `ziob://emu:/var/tmp/r.zns`,
//! `ziob://emu:/var/tmp/r.zns,discard=1?cores=2`, `ziob://nvme:/dev/ng0n1?buffer=off`.
//! The device spec is everything before the first `?` (ZIOB's own syntax, commas included).

use std::fmt;
use std::path::PathBuf;

use ziob::backends::DeviceSpec;
use ziob::runtime::prefault::{available_bytes, Prefault};
#[cfg(doc)]
use ziob::ZiobConfig;
use ziob::SHARD_BUDGET_BYTES_DEFAULT;

/// The URI scheme prefix RocksDB hands to the factory.
pub const SCHEME: &str = "ziob://";

/// Default geometry of an `emu:` file the plugin creates: zones.
pub const EMU_ZONES_DEFAULT: u32 = 128;
/// Default geometry of an `emu:` file the plugin creates: zone size (64 MiB; 8 GiB in all,
/// a sparse file).
pub const EMU_ZONE_BYTES_DEFAULT: u64 = 64 << 20;
/// Smallest read cache `cache=auto` gives (and all of it when the memory available is
/// unknown): 64 MiB.
pub const CACHE_BYTES_AUTO_MIN: u64 = 64 << 20;
/// Largest read cache `cache=auto` gives: 1 GiB.
pub const CACHE_BYTES_AUTO_MAX: u64 = 1 << 30;
/// `cache=auto` takes this fraction of the memory available when the URI is read: 1/4.
pub const CACHE_AUTO_DIVISOR: u64 = 4;
/// Most ZIOB cores (`cores=N`) accepted.
pub const CORES_MAX: usize = 64;
/// Default write-back unit of the zone write buffer (`unit=`): 4 MiB, at most the device's
/// zone capacity ([`ZiobConfig::fit_unit_bytes`]). ZIOB's own default (512 KiB) made about twice the
/// writes and completions, and a tenth to a fifth more wake-ups of the ZIOB core, which a
/// two-CPU machine running RocksDB's threads pays in reads (docs/ROCKSDB-BENCH.md §3r).
pub const UNIT_BYTES_DEFAULT: u64 = 4 << 20;
/// Largest `unit=`: half of a core's zone write buffer (the plugin's buffer has ZIOB's
/// default budget, [`SHARD_BUDGET_BYTES_DEFAULT`], which must hold two units).
pub const UNIT_BYTES_MAX: u64 = SHARD_BUDGET_BYTES_DEFAULT / 2;
/// Granularity of `unit=`: 4 KiB (a multiple of every device block size up to 4 KiB).
pub const UNIT_ALIGN_BYTES: u64 = 4 << 10;

/// What a `ziob://` URI asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsUri {
    /// The ZIOB device spec (`emu:/path`, `nvme:/dev/ng0n1`, `zbd:/dev/…`, `mem:…`).
    pub spec: String,
    /// `buffer=on|off`: the ZIOB zone write buffer (default on); off = pass-through.
    pub buffered: bool,
    /// `cores=N`: ZIOB runtime cores (threads), default 1.
    pub cores: usize,
    /// `poll=busy|sleep`: ZIOB cores spin instead of sleeping in the kernel when idle
    /// (lower latency per call, one CPU busy per core). Default `sleep`.
    pub busy_poll: bool,
    /// `cache=S|auto`: bytes of recently read file ranges kept in the process (0 = off); by
    /// default `auto` ([`auto_cache_bytes`] of the memory available), or 0 when the
    /// device's reads come from host memory.
    pub cache_bytes: u64,
    /// Whether `cache_bytes` is `auto`'s: sized from the memory available when the URI was
    /// read (a later open of the same device with `auto` matches it whatever the memory
    /// then).
    pub cache_auto: bool,
    /// `zones=N`: zones of an `emu:` file created because it did not exist.
    pub emu_zones: u32,
    /// `zone_size=S` (K/M/G suffixes): zone size of such a file.
    pub emu_zone_bytes: u64,
    /// `prefault=auto|S` (0 = none, the default): memory touched at mount
    /// ([`crate::memory`]); `auto` is the mount's configured buffers. It acts at the first
    /// mount in a process only, so it is not one of the options a later open of the same
    /// device must repeat.
    pub prefault: Prefault,
    /// `warm=auto|S` (K/M/G suffixes, 0 = off): bytes of the newest tables read into the
    /// read cache after the mount, in the background ([`crate::warm`]); `auto` (the
    /// default, `None`) is half the read cache; at most the cache. Like `prefault=`, it acts
    /// at the first mount in a process only.
    pub warm_bytes: Option<u64>,
    /// `unit=S` (K/M/G suffixes, a multiple of 4K, at most [`UNIT_BYTES_MAX`]): the zone
    /// write buffer's write-back unit, [`UNIT_BYTES_DEFAULT`] by default; the mount uses at
    /// most the device's zone capacity ([`ZiobConfig::fit_unit_bytes`]). Compared as asked when the
    /// same device is opened again (also with `buffer=off`, where it is unused).
    pub unit_bytes: u64,
}

/// A URI that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad ziob URI {uri:?}: {reason}")]
pub struct UriError {
    /// The URI as given.
    pub uri: String,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for FsUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{SCHEME}{}?buffer={}&cores={}&poll={}&cache={}&prefault={}&warm={}&unit={}",
            self.spec,
            if self.buffered { "on" } else { "off" },
            self.cores,
            if self.busy_poll { "busy" } else { "sleep" },
            if self.cache_auto {
                "auto".to_string()
            } else {
                self.cache_bytes.to_string()
            },
            match self.prefault {
                Prefault::Auto => "auto".to_string(),
                Prefault::Bytes(n) => n.to_string(),
            },
            match self.warm_bytes {
                None => "auto".to_string(),
                Some(n) => n.to_string(),
            },
            self.unit_bytes
        )
    }
}

/// The read cache a device spec gets without `cache=`: none (`Some(0)`) when the device's
/// reads come from host memory already (the OS page cache, or RAM), where the cache would
/// be a second copy that costs a copy per miss; `auto` (`None`) otherwise (and for a spec
/// that does not parse: opening it reports the error).
fn default_cache(spec: &str) -> Option<u64> {
    match DeviceSpec::parse(spec) {
        Ok(d) if d.reads_from_host_memory() => Some(0),
        _ => None,
    }
}

/// `cache=auto`'s size for `available` bytes of memory: a quarter
/// ([`CACHE_AUTO_DIVISOR`]), at least [`CACHE_BYTES_AUTO_MIN`] and at most
/// [`CACHE_BYTES_AUTO_MAX`]; the least when the memory available is unknown. The page cache
/// gives a local file system's reads whatever memory is free; a fixed 64 MiB held less than
/// the tables a write-heavy phase of ten seconds wrote (docs/ROCKSDB-BENCH.md §3k).
pub fn auto_cache_bytes(available: Option<u64>) -> u64 {
    available.map_or(CACHE_BYTES_AUTO_MIN, |a| {
        (a / CACHE_AUTO_DIVISOR).clamp(CACHE_BYTES_AUTO_MIN, CACHE_BYTES_AUTO_MAX)
    })
}

fn parse_size(v: &str) -> Option<u64> {
    let (num, mult) = match v.as_bytes().last()? {
        b'K' | b'k' => (&v[..v.len() - 1], 1u64 << 10),
        b'M' | b'm' => (&v[..v.len() - 1], 1 << 20),
        b'G' | b'g' => (&v[..v.len() - 1], 1 << 30),
        _ => (v, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

impl FsUri {
    /// Parses `uri`, with or without the `ziob://` prefix.
    pub fn parse(uri: &str) -> Result<FsUri, UriError> {
        let bad = |reason: String| UriError {
            uri: uri.to_string(),
            reason,
        };
        let rest = uri.strip_prefix(SCHEME).unwrap_or(uri);
        let (spec, query) = match rest.split_once('?') {
            Some((s, q)) => (s, Some(q)),
            None => (rest, None),
        };
        if spec.is_empty() {
            return Err(bad(
                "no device spec (e.g. ziob://emu:/var/tmp/db.zns)".into()
            ));
        }
        let mut out = FsUri {
            spec: spec.to_string(),
            buffered: true,
            cores: 1,
            busy_poll: false,
            cache_bytes: 0,
            cache_auto: false,
            emu_zones: EMU_ZONES_DEFAULT,
            emu_zone_bytes: EMU_ZONE_BYTES_DEFAULT,
            prefault: Prefault::Bytes(0),
            warm_bytes: None,
            unit_bytes: UNIT_BYTES_DEFAULT,
        };
        // `cache=`: a size, `None` for `auto`; the spec's default when not given.
        let mut cache: Option<Option<u64>> = None;
        for kv in query.into_iter().flat_map(|q| q.split('&')) {
            if kv.is_empty() {
                continue;
            }
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| bad(format!("option {kv:?} is not key=value")))?;
            match k {
                "buffer" => {
                    out.buffered = match v {
                        "on" | "1" | "true" => true,
                        "off" | "0" | "false" => false,
                        _ => return Err(bad(format!("buffer={v}: expected on or off"))),
                    }
                }
                "cores" => {
                    out.cores = v
                        .parse()
                        .ok()
                        .filter(|c| (1..=CORES_MAX).contains(c))
                        .ok_or_else(|| bad(format!("cores={v}: expected 1..={CORES_MAX}")))?
                }
                "poll" => {
                    out.busy_poll = match v {
                        "busy" => true,
                        "sleep" => false,
                        _ => return Err(bad(format!("poll={v}: expected busy or sleep"))),
                    }
                }
                "cache" if v == "auto" => cache = Some(None),
                "cache" => {
                    cache = Some(Some(parse_size(v).ok_or_else(|| {
                        bad(format!(
                            "cache={v}: expected a size (K/M/G suffixes; 0 = off) or auto"
                        ))
                    })?))
                }
                "zones" => {
                    out.emu_zones = v
                        .parse()
                        .ok()
                        .filter(|z| *z >= 4)
                        .ok_or_else(|| bad(format!("zones={v}: expected a number >= 4")))?
                }
                "zone_size" => {
                    out.emu_zone_bytes = parse_size(v)
                        .filter(|s| *s >= 1 << 20 && s % 4096 == 0)
                        .ok_or_else(|| {
                            bad(format!(
                                "zone_size={v}: expected a size >= 1M, a multiple of 4K (K/M/G suffixes)"
                            ))
                        })?
                }
                "prefault" => {
                    out.prefault = match v {
                        "auto" => Prefault::Auto,
                        _ => Prefault::Bytes(parse_size(v).ok_or_else(|| {
                            bad(format!(
                                "prefault={v}: expected auto or a size (K/M/G suffixes), 0 = none"
                            ))
                        })?),
                    }
                }
                "warm" => {
                    out.warm_bytes = match v {
                        "auto" => None,
                        _ => Some(parse_size(v).ok_or_else(|| {
                            bad(format!(
                                "warm={v}: expected auto or a size (K/M/G suffixes), 0 = off"
                            ))
                        })?),
                    }
                }
                "unit" => {
                    out.unit_bytes = parse_size(v)
                        .filter(|u| *u > 0 && u % UNIT_ALIGN_BYTES == 0)
                        .ok_or_else(|| {
                            bad(format!(
                                "unit={v}: expected a size > 0, a multiple of 4K (K/M/G suffixes)"
                            ))
                        })?;
                    if out.unit_bytes > UNIT_BYTES_MAX {
                        return Err(bad(format!(
                            "unit={v}: at most {}M (half of each ZIOB core's {}M zone write buffer)",
                            UNIT_BYTES_MAX >> 20,
                            SHARD_BUDGET_BYTES_DEFAULT >> 20
                        )));
                    }
                }
                _ => {
                    return Err(bad(format!(
                        "unknown option {k:?} (known: buffer, cores, poll, cache, zones, zone_size, prefault, warm, unit)"
                    )))
                }
            }
        }
        (out.cache_bytes, out.cache_auto) = match cache.unwrap_or_else(|| default_cache(spec)) {
            Some(bytes) => (bytes, false),
            None => (auto_cache_bytes(available_bytes()), true),
        };
        Ok(out)
    }

    /// Bytes the read cache's warm-up reads after the mount: `warm=`, by default half of
    /// `cache=`, at most `cache=` (more would push the newest tables' pages, read first, out
    /// again); 0 when the cache is off.
    pub fn warm_budget(&self) -> u64 {
        self.warm_bytes
            .unwrap_or(self.cache_bytes / 2)
            .min(self.cache_bytes)
    }

    /// The file of an `emu:` spec (as ZIOB's spec parser reads it); `None` for another
    /// backend or a spec that does not parse (opening it reports why).
    pub fn emu_path(&self) -> Option<PathBuf> {
        match DeviceSpec::parse(&self.spec) {
            Ok(DeviceSpec::Emu { path, .. }) => Some(path),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_spec_and_options() {
        let u = FsUri::parse("ziob://emu:/var/tmp/a,b.zns,discard=1?buffer=off&cores=2&poll=busy")
            .unwrap();
        assert!(u.busy_poll);
        assert_eq!(u.spec, "emu:/var/tmp/a,b.zns,discard=1");
        assert!(!u.buffered);
        assert_eq!(u.cores, 2);
        assert_eq!(u.emu_path(), Some(PathBuf::from("/var/tmp/a,b.zns")));
        let d = FsUri::parse("nvme:/dev/ng0n1").unwrap();
        assert!(d.buffered);
        assert_eq!(d.cores, 1);
        assert_eq!(d.emu_path(), None);
        let g = FsUri::parse("ziob://emu:/x?zones=16&zone_size=8M&cache=0").unwrap();
        assert_eq!(g.cache_bytes, 0);
        assert!(d.cache_auto);
        assert!((CACHE_BYTES_AUTO_MIN..=CACHE_BYTES_AUTO_MAX).contains(&d.cache_bytes));
        assert_eq!((g.emu_zones, g.emu_zone_bytes), (16, 8 << 20));
        assert_eq!(g.prefault, Prefault::Bytes(0));
        let p = |u: &str| FsUri::parse(u).unwrap().prefault;
        assert_eq!(p("ziob://emu:/x?prefault=auto"), Prefault::Auto);
        assert_eq!(p("ziob://emu:/x?prefault=0"), Prefault::Bytes(0));
        assert_eq!(p("ziob://emu:/x?prefault=96M"), Prefault::Bytes(96 << 20));
        let warm = |u: &str| FsUri::parse(u).unwrap().warm_budget();
        // (`cache=auto` depends on the memory available at each parse: sizes given here.)
        let auto = FsUri::parse("ziob://nvme:/dev/ng0n1").unwrap();
        assert_eq!(auto.warm_budget(), auto.cache_bytes / 2);
        assert_eq!(warm("ziob://nvme:/dev/ng0n1?cache=8M"), 4 << 20);
        assert_eq!(warm("ziob://nvme:/dev/ng0n1?warm=0"), 0);
        assert_eq!(warm("ziob://nvme:/dev/ng0n1?cache=64M&warm=auto"), 32 << 20);
        assert_eq!(warm("ziob://nvme:/dev/ng0n1?warm=10M"), 10 << 20);
        assert_eq!(
            warm("ziob://nvme:/dev/ng0n1?cache=64M&warm=1G"),
            64 << 20,
            "at most the cache"
        );
        assert_eq!(
            warm("ziob://nvme:/dev/ng0n1?cache=0&warm=10M"),
            0,
            "no cache, no warm-up"
        );
        assert_eq!(
            warm("ziob://emu:/x,direct=0"),
            0,
            "no cache by default there"
        );
        // What Display prints (all but an emu file's geometry) parses back to the same.
        for u in [
            "ziob://emu:/x?prefault=96M&cores=2",
            "ziob://nvme:/dev/ng0n1",
            "ziob://nvme:/dev/ng0n1?warm=3M",
            "ziob://nvme:/dev/ng0n1?warm=0",
            "ziob://nvme:/dev/ng0n1?cache=8M",
            "ziob://emu:/x,direct=0?cache=auto",
            "ziob://emu:/x,direct=0",
            "ziob://emu:/x?unit=512K",
        ] {
            let once = FsUri::parse(u).unwrap();
            let mut again = FsUri::parse(&once.to_string()).unwrap();
            // `auto` parses back as `auto`, sized from the memory available now.
            assert_eq!(again.cache_auto, once.cache_auto, "{u}");
            assert_eq!(
                once.to_string().contains("&cache=auto&"),
                once.cache_auto,
                "{u}: {once}"
            );
            again.cache_bytes = once.cache_bytes;
            assert_eq!(again, once, "{u}");
        }
    }

    #[test]
    fn no_read_cache_by_default_where_reads_come_from_host_memory() {
        let cache = |u: &str| {
            let u = FsUri::parse(u).unwrap();
            (u.cache_auto, u.cache_bytes)
        };
        let auto = |u: &str| {
            let (is_auto, bytes) = cache(u);
            is_auto && (CACHE_BYTES_AUTO_MIN..=CACHE_BYTES_AUTO_MAX).contains(&bytes)
        };
        assert!(auto("ziob://emu:/x"));
        assert!(auto("ziob://emu:/x,direct=1"));
        assert_eq!(cache("ziob://emu:/x,direct=0"), (false, 0));
        assert!(auto("ziob://emu:/x,direct=0,lat_us=20"));
        assert!(auto("ziob://emu:/x,direct=0,bw_mbps=100"));
        assert_eq!(cache("ziob://emu:/x,direct=0?cache=8M"), (false, 8 << 20));
        assert!(
            auto("ziob://emu:/x,direct=0?cache=auto"),
            "auto when asked for"
        );
        assert_eq!(cache("ziob://mem:zones=8,zone_size=1M"), (false, 0));
        assert!(auto("ziob://nvme:/dev/ng0n1"));
        assert!(auto("ziob://zbd:/dev/nvme0n1"));
        assert_eq!(
            cache("ziob://zbd:/dev/nvme0n1?cache=auto&cache=0"),
            (false, 0)
        );
    }

    /// `cache=auto` is a quarter of the memory available, within 64 MiB and 1 GiB, and the
    /// least when the memory is unknown.
    #[test]
    fn the_automatic_read_cache_is_a_quarter_of_the_memory_available_within_bounds() {
        let mib = 1u64 << 20;
        assert_eq!(auto_cache_bytes(None), 64 * mib);
        assert_eq!(auto_cache_bytes(Some(0)), 64 * mib);
        assert_eq!(auto_cache_bytes(Some(200 * mib)), 64 * mib);
        assert_eq!(auto_cache_bytes(Some(1600 * mib)), 400 * mib);
        assert_eq!(auto_cache_bytes(Some(3 << 30)), 768 * mib);
        assert_eq!(auto_cache_bytes(Some(24 << 30)), 1024 * mib);
        assert_eq!(auto_cache_bytes(Some(u64::MAX)), 1024 * mib);
    }

    /// `unit=`: 4 MiB by default, any multiple of 4 KiB up to 32 MiB (a mount fits it to
    /// the zones with `ZiobConfig::fit_unit_bytes`, tested in `ziob`).
    #[test]
    fn the_writeback_unit_is_asked_for_within_bounds() {
        let unit = |u: &str| FsUri::parse(u).unwrap().unit_bytes;
        assert_eq!(unit("ziob://emu:/x"), UNIT_BYTES_DEFAULT);
        assert_eq!(unit("ziob://emu:/x?unit=512K"), 512 << 10);
        assert_eq!(unit("ziob://emu:/x?unit=12288"), 12 << 10);
        assert_eq!(unit("ziob://emu:/x?unit=32M"), UNIT_BYTES_MAX);
        let e = FsUri::parse("ziob://emu:/x?unit=33M").unwrap_err();
        assert!(e.reason.contains("at most 32M"), "{e}");
    }

    #[test]
    fn rejects_bad_options() {
        for bad in [
            "ziob://",
            "ziob://?cores=1",
            "ziob://emu:/x?cores=0",
            "ziob://emu:/x?buffer=maybe",
            "ziob://emu:/x?color=red",
            "ziob://emu:/x?zone_size=3",
            "ziob://emu:/x?cache=lots",
            "ziob://emu:/x?cores",
            "ziob://emu:/x?poll=fast",
            "ziob://emu:/x?prefault=lots",
            "ziob://emu:/x?prefault=-1",
            "ziob://emu:/x?warm=lots",
            "ziob://emu:/x?warm=",
            "ziob://emu:/x?unit=0",
            "ziob://emu:/x?unit=6000",
            "ziob://emu:/x?unit=1M2",
            "ziob://emu:/x?unit=",
            "ziob://emu:/x?unit=64M",
        ] {
            assert!(FsUri::parse(bad).is_err(), "{bad}");
        }
    }
}
