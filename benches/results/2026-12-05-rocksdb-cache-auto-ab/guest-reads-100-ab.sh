#!/bin/bash
# Guest (cargo xtask vm-run, 128 zones of 16 MiB): the plugin's nvme: with its default read
# cache (auto) against cache=64M, alternated, ROUNDS rounds; per round and mode a blank
# device, fillrandom, then readrandom, readseq and readwhilewriting on that database, each its own
# db_bench process (rocksdb-bench's flags, 30,000 x 100 B, prefault=auto as rocksdb-bench
# gives it), 100 B values. Prints: round mode benchmark ops/s.
# Usage: bash guest-reads-100-ab.sh ROUNDS [PLUGIN]
ROUNDS=${1:-3}
PLUGIN=${2:-/work/main/target/release/libziob_rocksdb.so}
DEV=nvme0n1
FLAGS="--num=30000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=100 --seed=1000"
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order="auto 64M"; else order="64M auto"; fi
  for m in $order; do
    blkzone reset /dev/$DEV
    for b in fillrandom:0 readrandom:1 readseq:1 readwhilewriting:1; do
      out=$(LD_PRELOAD=$PLUGIN db_bench $FLAGS --db=/rocksdb-bench --fs_uri="ziob://nvme:/dev/ng0n1?prefault=auto&cache=$m" --use_existing_db=${b#*:} --benchmarks=${b%:*} 2>&1)
      echo "$r $m ${b%:*} $(echo "$out" | awk -v n=${b%:*} '$1==n && $2==":" {print $5}')"
    done
  done
done
