#!/bin/bash
# What one host readwhilewriting process costs the kernel through the plugin: after a fresh
# fillrandom,flush,waitforcompaction (as ab.sh), `perf record` of the readwhilewriting process
# with io_uring's submit/complete tracepoints, the workqueue items run, and the scheduler's
# wake-ups (system-wide: run nothing else); ops_summary.py then counts the ring ops (the ZIOB core's) by kind and size, the
# workqueue items (iomap_dio_complete_work: an O_DIRECT write into newly allocated blocks,
# completed by a kworker), and who woke the ZIOB core.
# Usage: bash ops.sh PLUGIN_SO "URI_QUERY" OUT_PREFIX   (from the repository root; needs
#   target/debug/ziob, db_bench, perf), e.g.
#   bash benches/results/2026-12-06-writeback-unit/ops.sh /var/tmp/p.so "?prefault=auto&unit=512K" /tmp/u512
SO=$1; Q=$2; OUT=$3
F="--num=100000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=${VALUE:-1024} --seed=1000 --statistics"
trap 'rm -f /var/tmp/ops.zns' EXIT
rm -f /var/tmp/ops.zns
target/debug/ziob create emu:/var/tmp/ops.zns --zones 256 --zone-size 16M --zone-capacity 12M --max-open 14 --max-active 14 >/dev/null \
  || { echo "ziob create failed" >&2; exit 1; }
T="--db=/rdb --fs_uri=ziob://emu:/var/tmp/ops.zns$Q"
env LD_PRELOAD="$SO" db_bench $F $T --benchmarks=fillrandom,flush,waitforcompaction > "$OUT-fill.out" 2>&1 \
  || { echo "fillrandom failed, see $OUT-fill.out" >&2; exit 1; }
perf record -q -a -o "$OUT.data" -e io_uring:io_uring_submit_req -e io_uring:io_uring_complete \
  -e workqueue:workqueue_execute_start -e sched:sched_wakeup -e sched:sched_switch \
  -- env LD_PRELOAD="$SO" db_bench $F $T --use_existing_db=1 --benchmarks=readwhilewriting > "$OUT.out" 2>&1 \
  || { echo "readwhilewriting failed, see $OUT.out" >&2; exit 1; }
echo "$OUT: $(awk '$1=="readwhilewriting" {print $5}' "$OUT.out") reads/s, writer keys $(awk '/number.keys.written /{print $4}' "$OUT.out")"
perf script -i "$OUT.data" 2>/dev/null | python3 "$(dirname "$0")/ops_summary.py"
