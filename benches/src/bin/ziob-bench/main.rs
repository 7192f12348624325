//! `ziob-bench`: appends, writes and reads through ZIOB (buffer on) or straight to the
//! device (`--ziob off`, the same API in pass-through), on any device spec.
//!
//! ```text
//! ziob-bench --dev emu:/var/tmp/zb.zns,lat_us=20,bw_mbps=1000 --workload append --bs 4K \
//!            --qd 8 --zones 8 --cores 2 --runtime 5 --ziob on,off
//! ```
//! Lists (`--bs 4K,16K --zones 1,8,64 --ziob on,off`) run every combination in one process
//! and print ratios of `on` to `off`. `--json` prints one JSON object per run (an array when
//! several runs).
//!
//! Workloads: `append`, `write`, `randread`, `readafterwrite` (one result shape), and the
//! three of issue #12 with their own: `commitlog` (appends with a `flush` every
//! `--flush-every` appends; append and flush latency, device cache flushes), `latency`
//! (append and read-back percentiles with an idle buffer and under background flushes, and
//! their p99 ratio) and `manyzones` (tiny appends to many zones; how far it got, memory used
//! against the budget). 512-byte records pass through only on a 512-byte-block device:
//! `mem:...,block_size=512`, or a new emu file with `--create-block-size 512`.

mod commitlog;
mod latency;
mod manyzones;
mod options;
mod run;
mod validate;
mod watchdog;

use clap::Parser;
use options::Options;

fn main() {
    ziob::logging::init();
    let opts = Options::parse();
    if let Err(e) = run::main(opts) {
        eprintln!("ziob-bench: {e}");
        std::process::exit(1);
    }
}
