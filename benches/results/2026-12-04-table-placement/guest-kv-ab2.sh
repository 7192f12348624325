#!/bin/sh
# In the guest: fillrandom then readwhilewriting on nvme:, kv-bench's guest flags;
# variants off, on, on with KVX_DEVREAD=1 (a throwaway build: runtime cores read clean
# copies of other cores' zones from the device too), alternated, ROUNDS rounds.
ROUNDS=${1:-2}
BIN=/tmp/s35/kv-demo-devread
F="--benchmarks=fillrandom,readwhilewriting --key_size=16 --threads=1 --compression_type=none --write_buffer_size=4194304 --target_file_size_base=4194304 --cache_size=8388608 --bloom_bits=10 --num=200000 --value_size=100 --seed=1000 --sync=0 --ziob=on"
for r in $(seq $ROUNDS); do
  for v in off on devread; do
    blkzone reset $ZIOB_ZNS_BLOCK
    t=on; [ $v = off ] && t=off
    if [ $v = devread ]; then export KVX_DEVREAD=1; else unset KVX_DEVREAD; fi
    line=$($BIN $F --db=nvme:$ZIOB_ZNS_CHAR --tables_on_background_core=$t 2>&1 | grep -E "ops/sec" | awk '{printf "%s=%s ", $1, $5}')
    echo "round$r-$v $line"
  done
done
