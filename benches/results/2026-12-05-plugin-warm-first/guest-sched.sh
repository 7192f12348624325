#!/bin/bash
# guest: perf sched record of 1 KiB readwhilewriting, ext4 and zbd alternating per round; OUT needs vm-run --out-dir.
# Usage: bash guest-sched.sh ROUNDS [PLUGIN] [OUT] [EXTRA_URI_PARAMS]; then perf sched timehist -s --state on the host.
ROUNDS=${1:-1}; PLUGIN=${2:-/var/tmp/plugin-head.so}; OUT=${3:-/var/tmp/gprof/ps}; EXTRA=${4:-}
mkdir -p $OUT
DEV=nvme0n1; MNT=/tmp/s-ext4
FLAGS="--num=30000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=1024 --seed=1000 --statistics"
mkdir -p $MNT
run() {
  case $1 in
    ext4) db_bench $FLAGS --db=$MNT/db --use_existing_db=$3 --benchmarks=$2 ;;
    zbd) LD_PRELOAD=$PLUGIN db_bench $FLAGS --db=/rocksdb-bench --fs_uri="ziob://zbd:/dev/$DEV?prefault=auto$EXTRA" --use_existing_db=$3 --benchmarks=$2 ;;
  esac
}
export -f run; export FLAGS MNT DEV PLUGIN EXTRA
for r in $(seq 1 $ROUNDS); do
  if [ $((r % 2)) = 1 ]; then order="ext4 zbd"; else order="zbd ext4"; fi
  for t in $order; do
    if [ $t = ext4 ]; then umount $MNT 2>/dev/null; mkfs.ext4 -q -F $ZIOB_CONV_BLOCK && mount -t ext4 $ZIOB_CONV_BLOCK $MNT; else blkzone reset /dev/$DEV; fi
    run $t fillrandom 0 >/dev/null 2>&1; sync
    perf sched record -o $OUT/$r-$t.data -- bash -c "run $t readwhilewriting 1" > $OUT/$r-$t.out 2>&1
    echo "$r $t $(grep -E '^readwhilewriting' $OUT/$r-$t.out | awk '{print $5, $7}') keys $(awk '/number.keys.written /{print $4}' $OUT/$r-$t.out)"
    if [ $t = ext4 ]; then umount $MNT; fi
  done
done
