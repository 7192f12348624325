#!/bin/sh
# In the guest: db_bench on ext4 and kv-demo on nvme: with the L0 write slowdown at
# KV_L0_SLOWDOWN = 1000 (never: the code before), 12 and 8; kv-bench's guest flags and benchmark
# list up to readwhilewriting, one process each. ROUNDS rounds, the kv-demo modes' order rotating.
# Usage: sh guest-slow.sh ROUNDS (BIN: a kv-demo that reads KV_L0_SLOWDOWN — the throwaway
# build of docs/KV-BENCH.md section 25, not kept; l0-slowdown.patch does not read it).
ROUNDS=${1:-3}
BIN=${BIN:-/tmp/s43/kv-demo-slow}
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=4194304 --target_file_size_base=4194304 --cache_size=8388608 --bloom_bits=10 --num=200000 --value_size=100 --seed=1000 --sync=0"
B="--benchmarks=fillseq,fillrandom,overwrite,readrandom,readwhilewriting"
mnt=/tmp/kvm-ext4; mkdir -p $mnt
for r in $(seq $ROUNDS); do
  mkfs.ext4 -q -F $ZIOB_CONV_BLOCK; mount -t ext4 $ZIOB_CONV_BLOCK $mnt
  line=$(db_bench $B $F --db=$mnt/db --max_bytes_for_level_base=16777216 2>&1 | grep -E "ops/sec" | awk '{printf "%s %s ", $1, $5}')
  umount $mnt; echo "round$r ext4: $line"
  case $((r % 3)) in 1) order="1000 12 8";; 2) order="12 8 1000";; 0) order="8 1000 12";; esac
  for t in $order; do
    blkzone reset $ZIOB_ZNS_BLOCK
    out=$(KV_L0_SLOWDOWN=$t RUST_LOG=kv_demo=info $BIN $B $F --db=nvme:$ZIOB_ZNS_CHAR --ziob=on 2>&1)
    line=$(echo "$out" | grep -E "ops/sec" | awk '{printf "%s %s ", $1, $5}')
    echo "round$r nvme-slow$t: $line"
    echo "$out" | grep -E "after (overwrite|readwhilewriting)" | sed 's/.*INFO kv_demo::bench::driver: /    /' | cut -c1-230
  done
done
