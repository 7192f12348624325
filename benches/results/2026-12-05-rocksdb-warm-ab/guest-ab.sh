#!/bin/bash
# Guest (cargo xtask vm-run, 128 zones of 16 MiB as rocksdb-bench's guest): the plugin with the
# read cache's warm-up (default, warm=auto) against warm=0, alternated, ROUNDS rounds; each
# round and mode: a blank device, fillrandom, then overwrite, readrandom, readwhilewriting
# on that database (db_bench's flags as rocksdb-bench gives them, 30,000 x 1 KiB).
# Prints one line per benchmark: round mode benchmark ops/s.
ROUNDS=${1:-4}
PLUGIN=/work/main/target/release/libziob_rocksdb.so
DEV=/dev/nvme0n1
FLAGS="--num=30000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --db=/rocksdb-bench --value_size=1024 --seed=1000"
run() { # mode round bench existing
  local uri="ziob://zbd:$DEV?prefault=auto"
  [ "$1" = warm0 ] && uri="$uri&warm=0"
  local out
  out=$(LD_PRELOAD=$PLUGIN db_bench $FLAGS --fs_uri="$uri" --use_existing_db=$4 --benchmarks=$3,flush,waitforcompaction 2>&1)
  echo "$2 $1 $3 $(echo "$out" | awk -v b="$3" '$1==b && $2==":" {print $5}')"
}
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order="warm warm0"; else order="warm0 warm"; fi
  for m in $order; do
    blkzone reset $DEV
    run $m $r fillrandom 0 >/dev/null
    for b in overwrite readrandom readwhilewriting; do
      run $m $r $b 1
    done
  done
done
