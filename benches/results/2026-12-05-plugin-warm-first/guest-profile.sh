#!/bin/bash
# guest: per-thread cpu-clock profile of 1 KiB readwhilewriting, ext4 vs zbd (TARGETS), one run each; perf.data and the
# guest's kallsyms go to OUT (give vm-run --out-dir); read them on the host (guest-profile.txt has the commands).
PLUGIN=${1:-/var/tmp/plugin-head.so}
OUT=${2:-/var/tmp/gprof/out}
TARGETS=${TARGETS:-"ext4 zbd"}
mkdir -p $OUT; echo 0 > /proc/sys/kernel/kptr_restrict; cat /proc/kallsyms > $OUT/kallsyms
DEV=nvme0n1; MNT=/tmp/p-ext4
FLAGS="--num=30000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=1024 --seed=1000 --statistics"
mkdir -p $MNT
run() { # target bench existing
  case $1 in
    ext4) db_bench $FLAGS --db=$MNT/db --use_existing_db=$3 --benchmarks=$2 ;;
    zbd) LD_PRELOAD=$PLUGIN db_bench $FLAGS --db=/rocksdb-bench --fs_uri="ziob://zbd:/dev/$DEV?prefault=auto$EXTRA" --use_existing_db=$3 --benchmarks=$2 ;;
  esac
}
for t in $TARGETS; do
  if [ $t = ext4 ]; then umount $MNT 2>/dev/null; mkfs.ext4 -q -F $ZIOB_CONV_BLOCK && mount -t ext4 $ZIOB_CONV_BLOCK $MNT; else blkzone reset /dev/$DEV; fi
  run $t fillrandom 0 > $OUT/$t-fill.out 2>&1
  sync
  export -f run; export FLAGS MNT DEV PLUGIN EXTRA
  perf record -e cpu-clock -F 1000 -a -o $OUT/$t.data -- bash -c "run $t readwhilewriting 1" > $OUT/$t-rww.out 2>&1
  grep -E '^readwhilewriting|number.keys.written ' $OUT/$t-rww.out
  if [ $t = ext4 ]; then umount $MNT; fi
done
