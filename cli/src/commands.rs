//! The commands, run inside a one-core runtime.
//!
//! The CLI is the only task of its runtime, so reading stdin and writing stdout with
//! blocking calls from the core is fine here (a library must never do that).

use std::io::Write;

use ziob_backends::{
    check_write_target, create_device, DeviceError, Geometry, IoOp, ZoneAction, ZoneState,
    ZoneTarget, ZonedDevice,
};
use ziob_runtime::DmaBuf;

use crate::access::{open, Access};
use crate::input::{read_stdin_within, InputError, Room};
use crate::{output, Command};

/// Bytes moved per device op by `write` and `read`.
const CHUNK_BYTES: usize = 1 << 20;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The device refused or failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// Bad input from the user (not a device error).
    #[error("{0}")]
    Usage(String),
    /// stdin held more than the zone takes, or could not be read.
    #[error(transparent)]
    Input(#[from] InputError),
    /// stdout failed.
    #[error("{0}: {1}")]
    Stdio(&'static str, std::io::Error),
    /// The runtime could not start or stopped.
    #[error("runtime: {0}")]
    Runtime(String),
}

/// A command to run; `write` and `append` read stdin once they know how much fits.
#[derive(Debug)]
pub enum Request {
    Create {
        spec: String,
        geometry: Geometry,
    },
    Info {
        spec: String,
    },
    Report {
        spec: String,
        zone: Option<u32>,
        json: bool,
    },
    Action {
        spec: String,
        action: ZoneAction,
        target: ZoneTarget,
    },
    Write {
        spec: String,
        zone: u32,
        pad: bool,
        append: bool,
    },
    Read {
        spec: String,
        zone: u32,
        offset: u64,
        length: u64,
    },
}

impl Request {
    /// The device spec the request is about.
    pub fn spec(&self) -> &str {
        match self {
            Request::Create { spec, .. }
            | Request::Info { spec }
            | Request::Report { spec, .. }
            | Request::Action { spec, .. }
            | Request::Write { spec, .. }
            | Request::Read { spec, .. } => spec,
        }
    }

    /// The access the request needs to its device.
    pub fn access(&self) -> Access {
        match self {
            Request::Info { .. } | Request::Report { .. } | Request::Read { .. } => {
                Access::ReadOnly
            }
            Request::Create { .. } | Request::Action { .. } | Request::Write { .. } => {
                Access::ReadWrite
            }
        }
    }
}

impl Request {
    /// Turns parsed arguments into a request.
    pub fn from_command(cmd: Command) -> Result<Request, CliError> {
        let action = cmd.action();
        Ok(match cmd {
            Command::Create(a) => {
                let capacity = a.zone_capacity.unwrap_or(a.zone_size);
                let geometry = Geometry {
                    block_size_bytes: a.block_size,
                    zone_size_bytes: a.zone_size,
                    zone_capacity_bytes: capacity,
                    zone_count: a.zones,
                    max_open_zones: a.max_open,
                    max_active_zones: a.max_active,
                    max_append_bytes: a
                        .max_append
                        .unwrap_or(ziob_backends::limits::MAX_APPEND_BYTES_DEFAULT.min(capacity)),
                    volatile_write_cache: true,
                };
                Request::Create {
                    spec: a.dev,
                    geometry,
                }
            }
            Command::Info { dev } => Request::Info { spec: dev },
            Command::Report { dev, zone, json } => Request::Report {
                spec: dev,
                zone,
                json,
            },
            Command::Reset(a) | Command::Open(a) | Command::Close(a) | Command::Finish(a) => {
                Request::Action {
                    spec: a.dev,
                    action: action.expect("zone action command"),
                    target: match a.zone {
                        Some(z) if !a.all => ZoneTarget::One(z),
                        _ => ZoneTarget::All,
                    },
                }
            }
            Command::Write(ref a) | Command::Append(ref a) => Request::Write {
                spec: a.dev.clone(),
                zone: a.zone,
                pad: a.pad,
                append: matches!(cmd, Command::Append(_)),
            },
            Command::Stats(_) => unreachable!("main handles `stats` itself"),
            Command::Fs(_) => unreachable!("main handles `fs` itself"),
            Command::Read {
                dev,
                zone,
                offset,
                length,
            } => Request::Read {
                spec: dev,
                zone,
                offset,
                length,
            },
        })
    }
}

fn stdout_write(bytes: &[u8]) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(|e| CliError::Stdio("writing stdout", e))
}

/// Runs a request on the current core.
pub async fn run(request: Request) -> Result<(), CliError> {
    let access = request.access();
    match request {
        Request::Create { spec, geometry } => {
            let dev = create_device(&spec, &geometry).await?;
            dev.flush().await?;
            stdout_write(output::created(&dev).as_bytes())
        }
        Request::Info { spec } => {
            let dev = open(&spec, access).await?;
            let zones = dev.report_all().await?;
            stdout_write(output::info(&dev, &zones).as_bytes())
        }
        Request::Report { spec, zone, json } => {
            let dev = open(&spec, access).await?;
            let zones = match zone {
                Some(z) => dev.report_zones(z, 1).await?,
                None => dev.report_all().await?,
            };
            let text = if json {
                output::report_json(&zones)
            } else {
                output::report_table(&zones)
            };
            stdout_write(text.as_bytes())
        }
        Request::Action {
            spec,
            action,
            target,
        } => {
            let dev = open(&spec, access).await?;
            dev.zone_action(action, target).await?;
            dev.flush().await?;
            Ok(())
        }
        Request::Write {
            spec,
            zone,
            pad,
            append,
        } => {
            let dev = open(&spec, access).await?;
            let data = read_input(&dev, zone, append).await?;
            let data = whole_blocks(data, dev.geometry().block_size_bytes, pad)?;
            if append {
                let (res, _) = dev.append(zone, DmaBuf::from_slice(&data)).await;
                let offset = res?;
                dev.flush().await?;
                stdout_write(format!("{offset}\n").as_bytes())
            } else {
                write_whole(&dev, zone, &data).await?;
                dev.flush().await.map_err(CliError::from)
            }
        }
        Request::Read {
            spec,
            zone,
            offset,
            length,
        } => {
            let dev = open(&spec, access).await?;
            check_read_range(&dev, zone, offset, length).await?;
            let mut done = 0u64;
            while done < length {
                let len = (length - done).min(CHUNK_BYTES as u64) as usize;
                let (res, buf) = dev
                    .read(zone, offset + done, len, DmaBuf::with_capacity(len))
                    .await;
                res?;
                stdout_write(&buf)?;
                done += len as u64;
            }
            Ok(())
        }
    }
}

/// Reads stdin for a write (or an append) to `zone`: at most what fits, so input that is
/// too large is refused before it is all read. A zone that takes no write at all (Full,
/// Read Only, Offline) is refused first, with the device's wording.
async fn read_input<D: ZonedDevice>(dev: &D, zone: u32, append: bool) -> Result<Vec<u8>, CliError> {
    let g = *dev.geometry();
    let info = dev.report_zones(zone, 1).await?[0];
    let wp = info.write_pointer_bytes;
    let (op, at) = if append {
        (IoOp::Append, None)
    } else {
        (IoOp::Write, Some(wp))
    };
    check_write_target(&g, op, zone, info.state, wp, at, 0)?;
    Ok(read_stdin_within(&Room::of(&g, &info, append))?)
}

/// Refuses a read range whole (before anything is printed), with the device's wording.
async fn check_read_range<D: ZonedDevice>(
    dev: &D,
    zone: u32,
    offset: u64,
    length: u64,
) -> Result<(), CliError> {
    let g = *dev.geometry();
    dev.report_zones(zone, 1).await?;
    g.check_aligned(IoOp::Read, zone, offset, length)?;
    g.check_read_end(zone, offset, length)?;
    Ok(())
}

/// The input as whole blocks: padded with zeros if asked, refused otherwise.
fn whole_blocks(mut data: Vec<u8>, bs: u64, pad: bool) -> Result<Vec<u8>, CliError> {
    let rem = data.len() as u64 % bs;
    if data.is_empty() {
        return Err(CliError::Usage("no data on stdin".into()));
    }
    if rem != 0 {
        if !pad {
            return Err(CliError::Usage(format!(
                "input of {} bytes is not a multiple of the {bs}-byte block size (use --pad to fill the last block with zeros)",
                data.len()
            )));
        }
        data.resize(data.len() + (bs - rem) as usize, 0);
    }
    Ok(data)
}

/// Writes all of `data` at the write pointer, in chunks, after checking it fits the zone:
/// a write that cannot fit is refused whole, with the device's Zone Boundary Error wording.
async fn write_whole<D: ZonedDevice>(dev: &D, zone: u32, data: &[u8]) -> Result<(), CliError> {
    let g = *dev.geometry();
    let info = dev.report_zones(zone, 1).await?[0];
    let wp = info.write_pointer_bytes;
    let len = data.len() as u64;
    let writable = matches!(
        info.state,
        ZoneState::Empty
            | ZoneState::ImplicitlyOpened
            | ZoneState::ExplicitlyOpened
            | ZoneState::Closed
    );
    if writable && wp + len > g.zone_capacity_bytes {
        return Err(g.capacity_error(IoOp::Write, zone, wp, len).into());
    }
    let mut done = 0usize;
    while done < data.len() {
        let n = (data.len() - done).min(CHUNK_BYTES);
        let (res, _) = dev
            .write(
                zone,
                wp + done as u64,
                DmaBuf::from_slice(&data[done..done + n]),
            )
            .await;
        res?;
        done += n;
    }
    Ok(())
}
