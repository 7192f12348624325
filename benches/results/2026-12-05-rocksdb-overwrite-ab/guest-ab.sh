#!/bin/bash
# Guest (cargo xtask vm-run, 128 zones of 16 MiB as rocksdb-bench's guest): RocksDB's db_bench
# on ZenFS, on the plugin's zbd: and on its nvme:, the order rotating per round, ROUNDS rounds;
# each round and target: a blank device, fillrandom, then overwrite on that database, each its
# own db_bench process (db_bench's flags as rocksdb-bench gives them, 30,000 x 1 KiB).
# Prints one line per benchmark: round target benchmark ops/s.
# Usage: bash guest-ab.sh ROUNDS [PLUGIN]
ROUNDS=${1:-5}
PLUGIN=${2:-/work/main/target/release/libziob_rocksdb.so}
DEV=nvme0n1
FLAGS="--num=30000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --db=/rocksdb-bench --value_size=1024 --seed=1000"
old_sched=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/block/$DEV/queue/scheduler)
run() { # target round bench existing
  local out
  case $1 in
    zenfs) out=$(LD_PRELOAD=/opt/zenfs/lib/libzenfs.so db_bench $FLAGS --fs_uri=zenfs://dev:$DEV --use_existing_db=$4 --benchmarks=$3,flush,waitforcompaction 2>&1) ;;
    zbd) out=$(LD_PRELOAD=$PLUGIN db_bench $FLAGS --fs_uri="ziob://zbd:/dev/$DEV?prefault=auto" --use_existing_db=$4 --benchmarks=$3,flush,waitforcompaction 2>&1) ;;
    nvme) out=$(LD_PRELOAD=$PLUGIN db_bench $FLAGS --fs_uri="ziob://nvme:/dev/ng0n1?prefault=auto" --use_existing_db=$4 --benchmarks=$3,flush,waitforcompaction 2>&1) ;;
  esac
  echo "$2 $1 $3 $(echo "$out" | awk -v b="$3" '$1==b && $2==":" {print $5}')"
}
for r in $(seq 1 "$ROUNDS"); do
  case $((r % 3)) in 1) order="zenfs zbd nvme";; 2) order="zbd nvme zenfs";; 0) order="nvme zenfs zbd";; esac
  for t in $order; do
    if [ $t = zenfs ]; then
      echo mq-deadline > /sys/block/$DEV/queue/scheduler
      rm -rf /tmp/zenfs-aux
      /opt/zenfs/bin/zenfs mkfs --zbd=$DEV --aux_path=/tmp/zenfs-aux --force > /dev/null 2>&1
    else
      echo "$old_sched" > /sys/block/$DEV/queue/scheduler
      blkzone reset /dev/$DEV
    fi
    run $t $r fillrandom 0
    run $t $r overwrite 1
  done
done
echo "$old_sched" > /sys/block/$DEV/queue/scheduler
