//! What one measurement runs: workload, I/O mode, queue depth, runner and timing.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;

/// Size of every read, in bytes.
pub const BLOCK_SIZE_BYTES: u64 = 4096;

/// What the operations are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// `IORING_OP_NOP` round trips: the floor of a ring's per-op cost.
    Nop,
    /// 4 KiB reads at random 4 KiB-aligned offsets of the test file.
    Randread,
    /// No I/O: QD tasks each looping on a yield (wake + run queue + poll), the cost of one
    /// task switch in the runner's harness.
    Yield,
}

/// How the test file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Through the page cache, which is warmed first (reads are memory copies).
    Buffered,
    /// `O_DIRECT`: every read goes to the device.
    Direct,
}

/// Who performs the operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "String")]
pub enum Runner {
    /// The ZIOB runtime: QD tasks, each looping on one op.
    Ziob {
        /// Registered buffers (`DmaBuf::fixed`) and a registered file.
        fixed: bool,
        /// `SubmitPolicy::Eager` instead of the default `Adaptive`.
        eager: bool,
    },
    /// A hand-written io-uring loop keeping QD ops in flight.
    Plain {
        /// Registered buffers (`READ_FIXED`) and a registered file.
        fixed: bool,
        /// Submit every refill at once (one `io_uring_enter` each) instead of once per turn.
        eager: bool,
    },
    /// fio's io_uring engine.
    Fio {
        /// `fixedbufs` and `registerfiles`.
        fixed: bool,
    },
    /// tokio-uring (feature `peers`).
    TokioUring,
    /// monoio with its io_uring driver (feature `peers`).
    Monoio,
    /// glommio (feature `peers`).
    Glommio,
    /// A bare async-task loop: no io_uring, no runtime, `spawn_local` tasks whose wakers push
    /// their `Runnable` onto a `VecDeque` (yield workload only): the minimum any async-task
    /// executor pays per wake + poll.
    AsyncTask,
}

impl Runner {
    /// Every runner name `--runners` accepts.
    pub const NAMES: &'static [&'static str] = &[
        "ziob",
        "ziob-fixed",
        "ziob-eager",
        "ziob-fixed-eager",
        "plain",
        "plain-fixed",
        "plain-eager",
        "plain-fixed-eager",
        "fio",
        "fio-fixed",
        "tokio-uring",
        "monoio",
        "glommio",
        "async-task",
    ];

    /// Whether the runner can do `workload` (see [`Runner::unsupported_reason`]).
    pub fn supports(&self, workload: Workload) -> bool {
        self.unsupported_reason(workload).is_none()
    }

    /// Why the runner cannot do `workload`, or `None` if it can.
    pub fn unsupported_reason(&self, workload: Workload) -> Option<&'static str> {
        match (workload, self) {
            (Workload::Randread, Runner::AsyncTask) | (Workload::Nop, Runner::AsyncTask) => {
                Some("a bare task loop without I/O (yield workload only)")
            }
            (Workload::Randread, _) => None,
            (Workload::Nop, Runner::Fio { .. }) => Some("fio has no NOP workload"),
            (Workload::Nop, Runner::Monoio) => {
                Some("monoio 0.2.4 exposes no IORING_OP_NOP (its driver has no nop op)")
            }
            (Workload::Nop, _) => None,
            (Workload::Yield, Runner::Ziob { fixed, eager }) if !fixed && !eager => None,
            (Workload::Yield, Runner::Ziob { .. }) => {
                Some("yield does no I/O: measured once, with the plain ziob runner")
            }
            (Workload::Yield, Runner::AsyncTask) => None,
            (Workload::Yield, _) => Some("yield rows measure task harnesses: ziob and async-task"),
        }
    }

    /// Whether the runner is one of the peers behind the `peers` feature.
    pub fn is_peer(&self) -> bool {
        matches!(self, Runner::TokioUring | Runner::Monoio | Runner::Glommio)
    }
}

impl fmt::Display for Runner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Runner::Ziob {
                fixed: false,
                eager: false,
            } => "ziob",
            Runner::Ziob {
                fixed: true,
                eager: false,
            } => "ziob-fixed",
            Runner::Ziob {
                fixed: false,
                eager: true,
            } => "ziob-eager",
            Runner::Ziob {
                fixed: true,
                eager: true,
            } => "ziob-fixed-eager",
            Runner::Plain {
                fixed: false,
                eager: false,
            } => "plain",
            Runner::Plain {
                fixed: true,
                eager: false,
            } => "plain-fixed",
            Runner::Plain {
                fixed: false,
                eager: true,
            } => "plain-eager",
            Runner::Plain {
                fixed: true,
                eager: true,
            } => "plain-fixed-eager",
            Runner::Fio { fixed: false } => "fio",
            Runner::Fio { fixed: true } => "fio-fixed",
            Runner::TokioUring => "tokio-uring",
            Runner::Monoio => "monoio",
            Runner::Glommio => "glommio",
            Runner::AsyncTask => "async-task",
        };
        f.write_str(s)
    }
}

impl From<Runner> for String {
    fn from(r: Runner) -> String {
        r.to_string()
    }
}

impl FromStr for Runner {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "ziob" => Runner::Ziob {
                fixed: false,
                eager: false,
            },
            "ziob-fixed" => Runner::Ziob {
                fixed: true,
                eager: false,
            },
            "ziob-eager" => Runner::Ziob {
                fixed: false,
                eager: true,
            },
            "ziob-fixed-eager" => Runner::Ziob {
                fixed: true,
                eager: true,
            },
            "plain" => Runner::Plain {
                fixed: false,
                eager: false,
            },
            "plain-fixed" => Runner::Plain {
                fixed: true,
                eager: false,
            },
            "plain-eager" => Runner::Plain {
                fixed: false,
                eager: true,
            },
            "plain-fixed-eager" => Runner::Plain {
                fixed: true,
                eager: true,
            },
            "fio" => Runner::Fio { fixed: false },
            "fio-fixed" => Runner::Fio { fixed: true },
            "tokio-uring" => Runner::TokioUring,
            "monoio" => Runner::Monoio,
            "glommio" => Runner::Glommio,
            "async-task" => Runner::AsyncTask,
            other => {
                return Err(format!(
                    "unknown runner {other:?}; expected one of {}",
                    Runner::NAMES.join(", ")
                ))
            }
        })
    }
}

impl FromStr for Workload {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "nop" => Ok(Workload::Nop),
            "randread" => Ok(Workload::Randread),
            "yield" => Ok(Workload::Yield),
            other => Err(format!(
                "unknown workload {other:?}; expected nop, randread or yield"
            )),
        }
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "buffered" => Ok(Mode::Buffered),
            "direct" => Ok(Mode::Direct),
            other => Err(format!(
                "unknown mode {other:?}; expected buffered or direct"
            )),
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Workload::Nop => "nop",
            Workload::Randread => "randread",
            Workload::Yield => "yield",
        })
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Buffered => "buffered",
            Mode::Direct => "direct",
        })
    }
}

/// Parses a size such as `1G`, `16M`, `512K` or `4096` (binary units) into bytes.
pub fn parse_size_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 10),
        Some((i, 'M' | 'm')) => (&t[..i], 20),
        Some((i, 'G' | 'g')) => (&t[..i], 30),
        Some((i, 'T' | 't')) => (&t[..i], 40),
        _ => (t, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("bad size {s:?}: expected e.g. 1G, 16M, 4096"))?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("size {s:?} overflows"))
}

/// One measurement: a runner doing a workload at a queue depth for a while.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// What the ops are.
    pub workload: Workload,
    /// How the file is opened (ignored for NOP).
    pub mode: Mode,
    /// Ops kept in flight.
    pub qd: usize,
    /// Test file.
    pub path: PathBuf,
    /// Size of the test file in bytes (a multiple of [`BLOCK_SIZE_BYTES`]).
    pub file_size_bytes: u64,
    /// Time run before the measured window starts.
    pub warmup: Duration,
    /// Length of the measured window.
    pub duration: Duration,
}

impl RunSpec {
    /// Number of 4 KiB blocks in the test file.
    pub fn blocks_count(&self) -> u64 {
        self.file_size_bytes / BLOCK_SIZE_BYTES
    }
    /// `open(2)` flags for the test file.
    pub fn open_flags(&self) -> i32 {
        match self.mode {
            Mode::Buffered => libc::O_RDONLY,
            Mode::Direct => libc::O_RDONLY | libc::O_DIRECT,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size_bytes("1G"), Ok(1 << 30));
        assert_eq!(parse_size_bytes("16M"), Ok(16 << 20));
        assert_eq!(parse_size_bytes("4096"), Ok(4096));
        assert!(parse_size_bytes("x").is_err());
    }

    #[test]
    fn runner_names_round_trip() {
        for name in Runner::NAMES {
            let r: Runner = name.parse().unwrap();
            assert_eq!(r.to_string(), *name);
        }
        assert!("nope".parse::<Runner>().is_err());
    }
}
