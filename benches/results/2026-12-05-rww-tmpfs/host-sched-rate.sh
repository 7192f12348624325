#!/bin/bash
# Host, 1 KiB readwhilewriting with every writer at 64 MB/s, `local` and the O_DIRECT target
# (`direct`) alternating per round, each after its own fillrandom,flush,waitforcompaction:
# `perf sched record` of the readwhilewriting process, then per thread (run time > 20 ms) the
# columns of `perf sched timehist -s --state`: comm[tid] parent sched-in run-time sleep
# iowait preempt delay (ms). The last two db_bench threads are the writer, then the reader.
# Usage: bash host-sched-rate.sh PLUGIN ROUNDS OUT_DIR   (run from the repository root)
PLUGIN=$1; ROUNDS=$2; OUT=$3
mkdir -p "$OUT"
F="--num=100000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=1024 --seed=1000 --statistics --benchmark_write_rate_limit=64000000"
trap 'rm -rf /var/tmp/hs-db /var/tmp/hs.zns' EXIT
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order="local direct"; else order="direct local"; fi
  for t in $order; do
    if [ $t = local ]; then rm -rf /var/tmp/hs-db; T="--db=/var/tmp/hs-db"; PRE=""
    else rm -f /var/tmp/hs.zns
      target/debug/ziob create emu:/var/tmp/hs.zns --zones 256 --zone-size 16M --zone-capacity 12M --max-open 14 --max-active 14 >/dev/null \
        || { echo "ziob create failed" >&2; exit 1; }
      T="--db=/rdb --fs_uri=ziob://emu:/var/tmp/hs.zns?prefault=auto"; PRE="env LD_PRELOAD=$PLUGIN"; fi
    $PRE db_bench $F $T --benchmarks=fillrandom,flush,waitforcompaction > /dev/null 2>&1 \
      || { echo "$r $t: fillrandom failed" >&2; exit 1; }
    perf sched record -q -o "$OUT/$r-$t.data" -- $PRE db_bench $F $T --use_existing_db=1 --benchmarks=readwhilewriting > "$OUT/$r-$t.out" 2>&1
    echo "$r $t $(awk '$1=="readwhilewriting" {print $5}' "$OUT/$r-$t.out") reads/s, writer keys $(awk '/number.keys.written /{print $4}' "$OUT/$r-$t.out")"
    perf sched timehist -i "$OUT/$r-$t.data" -s --state 2>/dev/null \
      | awk '/^ *[a-zA-Z:_-]+[-0-9]*\[[0-9\/]+\]/ && $4 > 20' | grep -v "perf\b"
  done
done
