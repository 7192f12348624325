//! # ziob-benches: how fast is the runtime, measured against what it is built on
//!
//! `rt-bench` drives the same workloads — NOP round trips and 4 KiB random reads at a queue
//! depth (QD) of N, buffered or `O_DIRECT` — through several *runners* in one process run:
//!
//! * `ziob`, `ziob-fixed` (and `-eager` variants): the ZIOB runtime, QD N = N tasks each
//!   looping `read_at` on random 4 KiB-aligned offsets ([`ziob_rt`]);
//! * `plain`, `plain-fixed` (and `-eager` variants): a hand-written `io-uring` loop keeping N
//!   reads in flight, the floor a runtime is measured against ([`plain_uring`]);
//! * `fio`, `fio-fixed`: fio's io_uring engine ([`fio`]);
//! * `tokio-uring`, `monoio`, `glommio` behind the `peers` feature (module `peers`);
//! * `async-task`: a bare async-task loop without I/O, for the `yield` workload (QD tasks each
//!   looping on a yield), the floor of any async-task executor's task switch
//!   ([`bare_async_task`]).
//!
//! `client-bench` measures the cross-thread [`ziob::Client`] against calls on the owning core
//! ([`client_bench`], [`client_round_trip`], [`client_throughput`]).
//!
//! Every in-process runner counts operations through one [`meter::Meter`], which also takes
//! the CPU time (`getrusage`, user + system) at the start and end of the measured window, so
//! "CPU per op" means the same thing for every runner. Speed is only ever reported (medians
//! and ratios against a runner of the same run), never asserted.
#![warn(missing_docs)]

pub mod args;
pub mod bare_async_task;
pub mod client_bench;
pub mod client_round_trip;
pub mod client_throughput;
pub mod cpu;
pub mod db_bench;
pub mod fio;
pub mod guest_run;
pub mod meter;
pub mod plain_uring;
pub mod process;
pub mod report;
pub mod rng;
pub mod spec;
pub mod testfile;
pub mod zenfs_peer;
pub mod ziob_rt;

#[cfg(feature = "peers")]
pub mod peers;
