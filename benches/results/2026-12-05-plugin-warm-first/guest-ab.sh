#!/bin/bash
# Guest (cargo xtask vm-run, 128 zones of 16 MiB as rocksdb-bench's guest): RocksDB's db_bench
# on ext4 (conventional namespace) and on plugins given as modes, the order rotating per
# round; each round and mode: a fresh ext4 or a blank ZNS namespace, fillrandom, then each
# benchmark of BENCHES on that database, each its own db_bench process (rocksdb-bench's flags,
# 30,000 keys of VALUE bytes, with --statistics). Prints one line per benchmark: round mode
# benchmark ops/s, and the keys the process wrote (readwhilewriting: its writer's).
# Usage: bash guest-ab.sh ROUNDS VALUE MODE...
#   MODE = ext4 | tmpfs | NAME:PLUGIN.so:zbd[:OPTIONS] | NAME:PLUGIN.so:nvme[:OPTIONS]
#   (tmpfs: RocksDB's default file system on a fresh tmpfs, no device at all)
#   (OPTIONS: more URI options, appended after ?prefault=auto, e.g. &sched=normal)
# EXTRA adds db_bench flags to every process (e.g. EXTRA=--benchmark_write_rate_limit=8000000).
ROUNDS=$1; VALUE=$2; shift 2; MODES=("$@")
BENCHES=${BENCHES:-"overwrite readrandom readwhilewriting"}
DEV=nvme0n1; MNT=/tmp/ab-mnt # ext4 or tmpfs
FLAGS="--num=30000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=$VALUE --seed=1000 --statistics $EXTRA"
mkdir -p $MNT
run() { # mode round bench existing
  local out name so kind
  if [ "$1" = ext4 ] || [ "$1" = tmpfs ]; then
    name=$1
    out=$(db_bench $FLAGS --db=$MNT/db --use_existing_db=$4 --benchmarks=$3,flush,waitforcompaction 2>&1)
  else
    IFS=: read name so kind opts <<< "$1"
    case $kind in zbd) uri="ziob://zbd:/dev/$DEV?prefault=auto$opts";; nvme) uri="ziob://nvme:/dev/ng0n1?prefault=auto$opts";; esac
    out=$(LD_PRELOAD=$so db_bench $FLAGS --db=/rocksdb-bench --fs_uri="$uri" --use_existing_db=$4 --benchmarks=$3,flush,waitforcompaction 2>&1)
  fi
  echo "$2 $name $3 $(echo "$out" | awk -v b="$3" '$1==b && $2==":" {print $5}') keys $(echo "$out" | awk '/rocksdb.number.keys.written /{print $4}')"
}
n=${#MODES[@]}
for r in $(seq 1 "$ROUNDS"); do
  for i in $(seq 0 $((n - 1))); do
    m=${MODES[$(( (i + r) % n ))]}
    if [ "$m" = ext4 ]; then
      umount $MNT 2>/dev/null; mkfs.ext4 -q -F $ZIOB_CONV_BLOCK && mount -t ext4 $ZIOB_CONV_BLOCK $MNT || { echo "ext4 mount failed" >&2; exit 1; }
    elif [ "$m" = tmpfs ]; then
      umount $MNT 2>/dev/null; mount -t tmpfs -o size=1G tmpfs $MNT || { echo "tmpfs mount failed" >&2; exit 1; }
    else
      blkzone reset /dev/$DEV
    fi
    run "$m" $r fillrandom 0
    for b in $BENCHES; do run "$m" $r $b 1; done
    if [ "$m" = ext4 ] || [ "$m" = tmpfs ]; then umount $MNT; fi
  done
done
