#!/bin/sh
# In the guest: kv-demo's whole sequence on nvme: (the ZNS namespace, reset first) with
# --tables_on_background_core=off then =on, alternated, ROUNDS rounds; kv-bench's guest flags.
ROUNDS=${1:-3}
BIN=${BIN:-/tmp/s35/kv-demo-place}
F="--benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,readwhilewriting,seekrandom,deleterandom --key_size=16 --threads=1 --compression_type=none --write_buffer_size=4194304 --target_file_size_base=4194304 --cache_size=8388608 --bloom_bits=10 --num=200000 --value_size=100 --seed=1000 --sync=0 --ziob=on"
for r in $(seq $ROUNDS); do
  for v in off on; do
    blkzone reset $ZIOB_ZNS_BLOCK
    line=$($BIN $F --db=nvme:$ZIOB_ZNS_CHAR --tables_on_background_core=$v 2>&1 | grep -E "ops/sec" | awk '{printf "%s=%s ", $1, $5}')
    echo "round$r-$v $line"
  done
done
