//! `kv-demo`: RocksDB db_bench's benchmarks, flags and output on kv-demo's store (or fjall,
//! `--engine=fjall` with the `peers` feature). `kv-demo --help` lists the flags;
//! docs/KV-BENCH.md compares it with db_bench.

use clap::Parser;
use kv_demo::bench::{run_flags, Flags};

/// mimalloc instead of glibc's malloc. A memtable's entries are allocated on the writer's
/// core and freed on another (the flush's) after the flush; glibc returns each such block to the
/// allocating thread's arena under that arena's lock, and in readwhilewriting at 1,000,000
/// keys that lock was where the shard's core spent most of its waits
/// (`perf record -e sched:sched_switch`). With mimalloc (remote frees without a lock) the
/// reader's rate doubled (21k → 42k reads/s, two alternated runs each;
/// `benches/results/2026-12-02-kv-rww-1m/`; without it: `cargo build --release -p kv-demo
/// --no-default-features`). It is also the allocator of `--engine=fjall` in this
/// binary; Debian's db_bench keeps glibc's. Feature `mimalloc` (default): the library
/// itself leaves the allocator to its user.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay`: its index in `mi_option_t` (`mimalloc.h` of v2 and
/// v3; libmimalloc-sys names no constant for it). A test checks it against the option the
/// environment variable `MIMALLOC_PURGE_DELAY` sets.
#[cfg(feature = "mimalloc")]
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Makes mimalloc keep memory that was freed instead of giving it back to the kernel 10 ms
/// later (its default), unless `MIMALLOC_PURGE_DELAY` (or `MIMALLOC_RESET_DELAY`) says otherwise. A memtable's entries
/// (16 MiB of them at the default write buffer) are freed after their flush while the next
/// memtable fills: mimalloc gave those pages back and took fresh ones, 430–480 MiB of them
/// over a 100,000 × 1 KiB fillseq, fillrandom, overwrite — and the kernel faulted each in
/// and zeroed it again, 0.9 s of system time against 0.36–0.39 s when kept, overwrite
/// 220k → 288k ops/s, peak RSS the same (~380 MiB; docs/KV-BENCH.md section 14). The
/// process's footprint is its peak, as with glibc's heap.
#[cfg(feature = "mimalloc")]
fn keep_freed_memory() {
    // Its older name, `MIMALLOC_RESET_DELAY`, sets the same option.
    let given = ["MIMALLOC_PURGE_DELAY", "MIMALLOC_RESET_DELAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
    if !given {
        // SAFETY: `mi_option_set` stores an option's value (no memory is touched); mimalloc
        // allows it from any thread at any time.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    }
}

fn main() {
    #[cfg(feature = "mimalloc")]
    keep_freed_memory();
    ziob::logging::init();
    let flags = Flags::parse();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if let Err(e) = run_flags(&flags, &mut out) {
        eprintln!("kv-demo: {e}");
        std::process::exit(1);
    }
}

#[cfg(all(test, feature = "mimalloc"))]
mod tests {
    use super::MI_OPTION_PURGE_DELAY;

    /// The variable `MIMALLOC_PURGE_DELAY` sets option `MI_OPTION_PURGE_DELAY`: this test
    /// runs itself again (its own test binary, this test only) with the variable set, and
    /// the copy reads the option back.
    #[test]
    fn the_purge_delay_index_is_the_option_the_environment_sets() {
        if std::env::var_os("KV_DEMO_PURGE_DELAY_CHILD").is_some() {
            // SAFETY: `mi_option_get` reads an option's value.
            let got = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
            assert_eq!(
                got, 4321,
                "option {MI_OPTION_PURGE_DELAY} is not the purge delay"
            );
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "tests::the_purge_delay_index_is_the_option_the_environment_sets",
                "--nocapture",
            ])
            .env("KV_DEMO_PURGE_DELAY_CHILD", "1")
            .env("MIMALLOC_PURGE_DELAY", "4321")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the child failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
    }
}
