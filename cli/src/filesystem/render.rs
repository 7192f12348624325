//! What `ziob fs` prints: text for people, JSON for scripts.

use std::io::Write;

use ziob::Geometry;
use ziob_zonefs::{FileStat, FsckProblem, FsckReport, SpaceUsage, WriteLifetime, ZoneUse};

use super::FsCmdError;

/// One line of `ls`.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The name (relative to the listed directory).
    pub name: String,
    /// `None` for a directory.
    pub file: Option<FileStat>,
}

impl Entry {
    /// A file entry.
    pub fn file(name: &str, stat: FileStat) -> Entry {
        Entry {
            name: name.to_string(),
            file: Some(stat),
        }
    }

    /// A directory entry.
    pub fn dir(name: &str) -> Entry {
        Entry {
            name: name.to_string(),
            file: None,
        }
    }
}

/// Writes `text` to stdout; a reader that went away (`| head`) is not an error.
pub fn print(text: &str) -> Result<(), FsCmdError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(FsCmdError::Stdout(e)),
        _ => Ok(()),
    }
}

/// A size for people: bytes below 1 KiB, else one decimal in the largest binary unit.
pub fn human(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (unit, name) in UNITS {
        if bytes >= unit {
            return format!("{:.1} {name}", bytes as f64 / unit as f64);
        }
    }
    format!("{bytes} B")
}

/// The name of a lifetime class on the command line and in JSON.
pub fn lifetime_name(l: WriteLifetime) -> &'static str {
    match l {
        WriteLifetime::NotSet => "not-set",
        WriteLifetime::None => "none",
        WriteLifetime::Short => "short",
        WriteLifetime::Medium => "medium",
        WriteLifetime::Long => "long",
        WriteLifetime::Extreme => "extreme",
        WriteLifetime::Wal => "wal",
    }
}

/// What `mkfs` prints.
pub fn formatted(dev: &str, g: &Geometry, journal_zones: u32) -> String {
    let data = g.zone_count - journal_zones;
    format!(
        "formatted {dev}: journal in zones 0..{journal_zones}, {data} data zones of {} ({} for files)\n",
        human(g.zone_capacity_bytes),
        human(data as u64 * g.zone_capacity_bytes)
    )
}

/// `ls`: one name per line, directories with a trailing `/`; `long` adds a header and the
/// size in bytes, lifetime class and extent count of each file.
pub fn ls_text(entries: &[Entry], long: bool) -> String {
    let mut out = String::new();
    if long {
        out += &format!(
            "{:>14}  {:<8} {:>7}  {}\n",
            "SIZE", "LIFETIME", "EXTENTS", "NAME"
        );
    }
    for e in entries {
        match (&e.file, long) {
            (Some(_), false) => out += &format!("{}\n", e.name),
            (None, false) => out += &format!("{}/\n", e.name),
            (Some(f), true) => {
                out += &format!(
                    "{:>14}  {:<8} {:>7}  {}\n",
                    f.size_bytes,
                    lifetime_name(f.lifetime),
                    f.extents,
                    e.name
                )
            }
            (None, true) => out += &format!("{:>14}  {:<8} {:>7}  {}/\n", "-", "dir", "-", e.name),
        }
    }
    out
}

/// `ls --json`.
pub fn ls_json(entries: &[Entry]) -> String {
    let list: Vec<serde_json::Value> = entries
        .iter()
        .map(|e| match &e.file {
            Some(f) => serde_json::json!({
                "name": e.name,
                "type": "file",
                "size": f.size_bytes,
                "lifetime": lifetime_name(f.lifetime),
                "extents": f.extents,
            }),
            None => serde_json::json!({"name": e.name, "type": "dir"}),
        })
        .collect();
    pretty(&serde_json::Value::Array(list))
}

/// `df`: the data zones' space, like `zenfs df`.
pub fn df_text(u: &SpaceUsage) -> String {
    let pct = |n: u64| {
        if u.total_bytes == 0 {
            0.0
        } else {
            n as f64 * 100.0 / u.total_bytes as f64
        }
    };
    let line = |label: &str, n: u64| {
        format!(
            "{label:<21}{:>12}  {:>5.1}%  ({n} bytes)\n",
            human(n),
            pct(n)
        )
    };
    let amp = u.space_amplification();
    format!(
        "{}{}{}{}{}space amplification: {amp:.2}  (reclaimable is {:.0}% of used; {:.2} counting full zones only, as zenfs df does)\ndata zones:         {} ({} free)\n",
        line("total:", u.total_bytes),
        line("free:", u.free_bytes),
        line("used:", u.used_bytes),
        line("reclaimable:", u.reclaimable_bytes),
        line("  in full zones:", u.reclaimable_in_full_zones_bytes),
        (amp - 1.0) * 100.0,
        u.space_amplification_full_zones(),
        u.data_zones,
        u.free_zones,
    )
}

/// `df --json`.
pub fn df_json(u: &SpaceUsage) -> String {
    pretty(&serde_json::json!({
        "total_bytes": u.total_bytes,
        "free_bytes": u.free_bytes,
        "used_bytes": u.used_bytes,
        "reclaimable_bytes": u.reclaimable_bytes,
        "reclaimable_in_full_zones_bytes": u.reclaimable_in_full_zones_bytes,
        "space_amplification": u.space_amplification(),
        "space_amplification_full_zones": u.space_amplification_full_zones(),
        "data_zones": u.data_zones,
        "free_zones": u.free_zones,
    }))
}

/// `fsck`: a summary, every problem, and with `verbose` every data zone.
pub fn fsck_text(dev: &str, r: &FsckReport, verbose: bool) -> String {
    let mut out = format!(
        "{dev}: {} files, {} extents, {} in files ({} bytes)\n",
        r.files,
        r.extents,
        human(r.live_bytes),
        r.live_bytes
    );
    out += &format!(
        "journal: zone {}, generation {}, {} deltas replayed{}\n",
        r.journal_zone,
        r.generation,
        r.deltas_replayed,
        match &r.journal_cut {
            Some(why) => format!(" (replay stopped early: {why})"),
            None => String::new(),
        }
    );
    for c in &r.files_cut {
        out += &format!(
            "cut by the mount: {} from {} to {} bytes (a crash before its sync's cache flush)\n",
            c.path, c.journaled, c.kept
        );
    }
    if verbose {
        out += &format!(
            "{:>6}  {:<8} {:<18} {:>12} {:>12}\n",
            "ZONE", "USE", "STATE", "WP", "LIVE"
        );
        for z in &r.zones {
            out += &format!(
                "{:>6}  {:<8} {:<18} {:>12} {:>12}\n",
                z.zone,
                zone_use(z.usage),
                z.state.as_str(),
                z.write_pointer,
                z.live
            );
        }
    }
    if r.is_clean() {
        out += &format!("clean: {} data zones checked\n", r.zones.len());
    } else {
        for p in &r.problems {
            out += &format!("problem: {}\n", describe(p));
        }
        out += &format!("INCONSISTENT: {} problem(s)\n", r.problems.len());
    }
    out
}

fn zone_use(u: ZoneUse) -> String {
    match u {
        ZoneUse::Free => "free".into(),
        ZoneUse::Open(slot) => format!("open:{slot}"),
        ZoneUse::Closed => "closed".into(),
        ZoneUse::Unusable => "unusable".into(),
    }
}

/// One problem in words.
fn describe(p: &FsckProblem) -> String {
    let ext = |e: &ziob_zonefs::records::Extent| {
        format!("zone {} bytes {}..{}", e.zone, e.offset, e.offset + e.len)
    };
    match p {
        FsckProblem::ExtentOutOfBounds { path, extent } => {
            format!("{path}: extent {} is outside the data zones", ext(extent))
        }
        FsckProblem::ExtentBeyondWritePointer {
            path,
            extent,
            write_pointer,
        } => format!(
            "{path}: extent {} ends past the zone's write pointer {write_pointer}",
            ext(extent)
        ),
        FsckProblem::OverlappingExtents {
            zone,
            first,
            second,
        } => format!(
            "zone {zone}: {} ({}) overlaps {} ({})",
            first.0,
            ext(&first.1),
            second.0,
            ext(&second.1)
        ),
        FsckProblem::LiveBytesMismatch {
            zone,
            tracked,
            recomputed,
        } => format!(
            "zone {zone}: {tracked} live bytes tracked, the files' extents hold {recomputed}"
        ),
        FsckProblem::FreeZoneNotEmpty { zone, state } => {
            format!("zone {zone} is free for the file system but {state} on the device")
        }
        FsckProblem::UnreferencedZone {
            zone,
            write_pointer,
        } => format!("zone {zone} holds {write_pointer} written bytes that no file uses"),
        FsckProblem::Journal { reason } => format!("journal: {reason}"),
    }
}

fn pretty(v: &serde_json::Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("JSON of plain values");
    s.push('\n');
    s
}
