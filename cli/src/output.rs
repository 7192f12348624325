//! Text and JSON renderings of device information.

use ziob_backends::{AnyDevice, ZoneInfo, ZoneState, ZonedDevice};

fn human(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (unit, name) in UNITS {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{} {name}", bytes / unit);
        }
    }
    format!("{bytes} B")
}

fn limit(v: Option<u32>) -> String {
    v.map_or_else(|| "no limit".to_string(), |n| n.to_string())
}

/// The line `create` prints.
pub fn created(dev: &AnyDevice) -> String {
    let g = dev.geometry();
    format!(
        "created {}: {} zones of {} (capacity {}), block size {} bytes\n",
        dev.name(),
        g.zone_count,
        human(g.zone_size_bytes),
        human(g.zone_capacity_bytes),
        g.block_size_bytes
    )
}

/// `info`: geometry, limits and a count of zones per state.
pub fn info(dev: &AnyDevice, zones: &[ZoneInfo]) -> String {
    let g = dev.geometry();
    let backend = match dev {
        AnyDevice::Emu(e) if e.is_direct() => "emu (O_DIRECT)",
        AnyDevice::Emu(_) => "emu (buffered)",
        AnyDevice::Mem(_) => "mem",
        AnyDevice::Nil(_) => "nil",
        AnyDevice::Nvme(_) => "nvme",
        AnyDevice::Zbd(_) => "zbd",
        #[allow(unreachable_patterns)]
        _ => dev.name().split(':').next().unwrap_or("?"),
    };
    let mut s = format!(
        "device:               {}\n\
         backend:              {backend}\n\
         block size:           {} bytes\n\
         zone size:            {} bytes ({})\n\
         zone capacity:        {} bytes ({})\n\
         zones:                {}\n\
         device size:          {} bytes ({})\n\
         max open zones:       {}\n\
         max active zones:     {}\n\
         max append size:      {} bytes ({})\n\
         volatile write cache: {}\n",
        dev.name(),
        g.block_size_bytes,
        g.zone_size_bytes,
        human(g.zone_size_bytes),
        g.zone_capacity_bytes,
        human(g.zone_capacity_bytes),
        g.zone_count,
        g.device_size_bytes(),
        human(g.device_size_bytes()),
        limit(g.max_open_zones),
        limit(g.max_active_zones),
        g.max_append_bytes,
        human(g.max_append_bytes),
        if g.volatile_write_cache { "yes" } else { "no" },
    );
    let counts: Vec<String> = ZoneState::ALL
        .iter()
        .filter_map(|&st| {
            let n = zones.iter().filter(|z| z.state == st).count();
            (n > 0).then(|| format!("{} {n}", st.as_str()))
        })
        .collect();
    s += &format!("zone states:          {}\n", counts.join(", "));
    s
}

/// `report`: one line per zone in the style of `blkzone report` (values in bytes, hex).
pub fn report_table(zones: &[ZoneInfo]) -> String {
    zones
        .iter()
        .map(|z| {
            format!(
                "  zone {:>4}: start 0x{:012x}, cap 0x{:09x}, wptr 0x{:09x}, zcond: {:>2}({}) {}\n",
                z.index,
                z.start_bytes,
                z.capacity_bytes,
                z.write_pointer_bytes,
                z.state.nvme_code(),
                z.state.short_name(),
                z.state
            )
        })
        .collect()
}

/// `report --json`: an array of `{index, start, capacity, write_pointer, state}` (bytes;
/// `write_pointer` from the zone start; `state` as in `ZoneState::as_str`).
pub fn report_json(zones: &[ZoneInfo]) -> String {
    let list: Vec<serde_json::Value> = zones
        .iter()
        .map(|z| {
            serde_json::json!({
                "index": z.index,
                "start": z.start_bytes,
                "capacity": z.capacity_bytes,
                "write_pointer": z.write_pointer_bytes,
                "state": z.state.as_str(),
            })
        })
        .collect();
    let mut s = serde_json::to_string_pretty(&list).expect("JSON of plain values");
    s.push('\n');
    s
}
