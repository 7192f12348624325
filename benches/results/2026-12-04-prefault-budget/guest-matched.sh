#!/bin/sh
# In the guest: fillrandom then readwhilewriting with the same --benchmark_write_rate_limit for db_bench on ext4
# (conventional namespace) and kv-demo on nvme: and zbd: (ZNS namespace); kv-bench's guest flags otherwise. ROUNDS rounds.
ROUNDS=${1:-2}; RATE=${RATE:-1160000}
BIN=/tmp/s39/kv-demo-wrl
F="--benchmarks=fillrandom,readwhilewriting --key_size=16 --threads=1 --compression_type=none --write_buffer_size=4194304 --target_file_size_base=4194304 --cache_size=8388608 --bloom_bits=10 --num=200000 --value_size=100 --seed=1000 --sync=0 --benchmark_write_rate_limit=$RATE"
mnt=/tmp/kvm-ext4; mkdir -p $mnt
for r in $(seq $ROUNDS); do
  mkfs.ext4 -q -F $ZIOB_CONV_BLOCK; mount -t ext4 $ZIOB_CONV_BLOCK $mnt
  line=$(db_bench $F --db=$mnt/db --max_bytes_for_level_base=16777216 2>&1 | grep -E "ops/sec" | awk '{printf "%s %s ", $1, $5}')
  umount $mnt; echo "round$r ext4: $line"
  for d in nvme:$ZIOB_ZNS_CHAR zbd:$ZIOB_ZNS_BLOCK; do
    blkzone reset $ZIOB_ZNS_BLOCK
    line=$($BIN $F --db=$d --ziob=on 2>&1 | grep -E "ops/sec" | awk '{printf "%s %s ", $1, $5}')
    echo "round$r ${d%%:*}: $line"
  done
done
