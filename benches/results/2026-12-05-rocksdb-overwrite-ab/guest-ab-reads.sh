#!/bin/bash
# Guest (cargo xtask vm-run, 128 zones of 16 MiB as rocksdb-bench's guest): RocksDB's db_bench
# on ext4 (conventional namespace), on the plugin's zbd: and on its nvme:, the order rotating
# per round, ROUNDS rounds; each round and target: a fresh file system or blank device,
# fillrandom, overwrite, readseq, readwhilewriting on that database, each its own db_bench
# process (rocksdb-bench's flags, 30,000 keys of VALUE bytes).
# Prints one line per benchmark: round target benchmark ops/s.
# Usage: bash guest-ab-reads.sh ROUNDS VALUE [PLUGIN]
ROUNDS=${1:-5}; VALUE=${2:-100}
PLUGIN=${3:-/work/main/target/release/libziob_rocksdb.so}
DEV=nvme0n1; MNT=/tmp/ab-ext4
FLAGS="--num=30000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=$VALUE --seed=1000"
mkdir -p $MNT
run() { # target round bench existing
  local out
  case $1 in
    ext4) out=$(db_bench $FLAGS --db=$MNT/db --use_existing_db=$4 --benchmarks=$3,flush,waitforcompaction 2>&1) ;;
    zbd) out=$(LD_PRELOAD=$PLUGIN db_bench $FLAGS --db=/rocksdb-bench --fs_uri="ziob://zbd:/dev/$DEV?prefault=auto" --use_existing_db=$4 --benchmarks=$3,flush,waitforcompaction 2>&1) ;;
    nvme) out=$(LD_PRELOAD=$PLUGIN db_bench $FLAGS --db=/rocksdb-bench --fs_uri="ziob://nvme:/dev/ng0n1?prefault=auto" --use_existing_db=$4 --benchmarks=$3,flush,waitforcompaction 2>&1) ;;
  esac
  echo "$2 $1 $3 $(echo "$out" | awk -v b="$3" '$1==b && $2==":" {print $5}')"
}
for r in $(seq 1 "$ROUNDS"); do
  case $((r % 3)) in 1) order="ext4 zbd nvme";; 2) order="zbd nvme ext4";; 0) order="nvme ext4 zbd";; esac
  for t in $order; do
    if [ $t = ext4 ]; then
      umount $MNT 2>/dev/null; mkfs.ext4 -q -F $ZIOB_CONV_BLOCK && mount -t ext4 $ZIOB_CONV_BLOCK $MNT
    else
      blkzone reset /dev/$DEV
    fi
    run $t $r fillrandom 0
    for b in overwrite readseq readwhilewriting; do run $t $r $b 1; done
    if [ $t = ext4 ]; then umount $MNT; fi
  done
done
