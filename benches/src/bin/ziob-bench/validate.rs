//! Checks of the options against the device, made once before the first run, so a bad
//! value fails at once with a message naming its option (not after the runs before it).

use ziob::{Geometry, ZiobConfig};

use crate::options::{Mode, Options, Workload};

/// The buffer configuration of a run (`buffered` or pass-through) with the options' sizes.
pub fn config(opts: &Options, buffered: bool) -> ZiobConfig {
    let mut config = if buffered {
        ZiobConfig::default()
    } else {
        ZiobConfig::pass_through()
    };
    if let Some(b) = opts.buffer_size {
        config.shard_budget_bytes = b;
    }
    config.writeback_unit_bytes = opts.writeback_unit;
    config
}

/// Checks every run the options ask for against a device of geometry `g`; the first
/// problem found, naming its option.
pub fn check(opts: &Options, g: &Geometry) -> Result<(), String> {
    for &zones in &opts.zones {
        if zones > g.zone_count {
            return Err(format!(
                "--zones {zones}: the device has {} zones",
                g.zone_count
            ));
        }
        let tasks = opts.cores as u64 * opts.qd as u64;
        if opts.workload == Workload::Write && u64::from(zones) < tasks {
            return Err(format!(
                "--zones {zones}: the write workload gives every task its own zone, so --zones must be at least --cores × --qd = {tasks}"
            ));
        }
    }
    let pass_through = opts.ziob.contains(&Mode::Off);
    let appends = !matches!(opts.workload, Workload::Write | Workload::Randread);
    let bs_unit = g.block_size_bytes;
    for &bs in &opts.bs {
        if bs > g.zone_capacity_bytes {
            return Err(format!(
                "--bs {bs}: larger than the zone capacity of {} bytes",
                g.zone_capacity_bytes
            ));
        }
        // `manyzones` skips its pass-through run for such sizes instead.
        if pass_through && bs % bs_unit != 0 && opts.workload != Workload::Manyzones {
            return Err(format!(
                "--bs {bs}: pass-through (--ziob off) needs a multiple of the {bs_unit}-byte block size (for smaller records use a device with a smaller block, e.g. mem:...,block_size=512, or a new emu file with --create-block-size 512)"
            ));
        }
        if pass_through && appends && bs > g.max_append_bytes {
            return Err(format!(
                "--bs {bs}: pass-through (--ziob off) appends are limited by the device's zone append size limit of {} bytes",
                g.max_append_bytes
            ));
        }
    }
    for &mode in &opts.ziob {
        config(opts, mode.buffered())
            .validate(g)
            .map_err(|e| format!("--buffer-size / --writeback-unit: {e}"))?;
    }
    if opts.ops.is_none() && opts.timeout() <= opts.runtime {
        return Err(format!(
            "--timeout {:.1}: must be longer than --runtime {:.1}",
            opts.timeout().as_secs_f64(),
            opts.runtime.as_secs_f64()
        ));
    }
    Ok(())
}
