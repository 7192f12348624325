#!/bin/bash
# Guest (cargo xtask vm-run, 128 zones of 16 MiB): where the CPU goes in 1 KiB readwhilewriting.
# Per round and target (ext4 on the conventional namespace, the plugin's zbd:): a fresh file
# system or blank device, fillrandom, then readwhilewriting in a process of its own, whose
# threads' CPU times (utime+stime from /proc/PID/task/*/stat, sampled every 0.2 s, the last
# non-empty sample per thread kept) and the guest's busy/idle ticks (/proc/stat) are printed.
# Usage: bash guest-cpu.sh ROUNDS [PLUGIN] [EXTRA_URI_PARAMS]
ROUNDS=${1:-2}
PLUGIN=${2:-/work/main/target/release/libziob_rocksdb.so}
EXTRA=${3:-}
DEV=nvme0n1; MNT=/tmp/cpu-ext4
FLAGS="--num=30000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=1024 --seed=1000 --statistics"
mkdir -p $MNT
cpu() { awk '$1=="cpu" {b=$2+$3+$4+$7+$8; print b, $5+$6}' /proc/stat; }
bench() { # target bench existing -> runs db_bench in the background, sets PID
  case $1 in
    ext4) db_bench $FLAGS --db=$MNT/db --use_existing_db=$3 --benchmarks=$2 >/tmp/cpu.out 2>&1 & ;;
    zbd) LD_PRELOAD=$PLUGIN db_bench $FLAGS --db=/rocksdb-bench --fs_uri="ziob://zbd:/dev/$DEV?prefault=auto$EXTRA" --use_existing_db=$3 --benchmarks=$2 >/tmp/cpu.out 2>&1 & ;;
  esac
  PID=$!
}
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order="ext4 zbd"; else order="zbd ext4"; fi
  for t in $order; do
    if [ $t = ext4 ]; then
      umount $MNT 2>/dev/null; mkfs.ext4 -q -F $ZIOB_CONV_BLOCK && mount -t ext4 $ZIOB_CONV_BLOCK $MNT
    else
      blkzone reset /dev/$DEV
    fi
    bench $t fillrandom 0; wait $PID
    echo "$r $t fillrandom $(awk '$1=="fillrandom" && $2==":" {print $5}' /tmp/cpu.out)"
    sync
    c0=$(cpu)
    bench $t readwhilewriting 1
    rm -f /tmp/cpu.snap.*
    while kill -0 $PID 2>/dev/null; do
      for d in /proc/$PID/task/*; do x=$(cat $d/stat 2>/dev/null) && [ -n "$x" ] && echo "$x" > /tmp/cpu.snap.${d##*/}; done
      sleep 0.2
    done
    wait $PID
    c1=$(cpu)
    echo "$r $t readwhilewriting $(awk '$1=="readwhilewriting" && $2==":" {print $5}' /tmp/cpu.out) guest busy/idle ticks: $c0 -> $c1"
    grep -E 'rocksdb.(number.keys.written|compact.write.bytes|block.cache.data.miss) ' /tmp/cpu.out | awk -v r=$r -v t=$t '{print r, t, "stat", $1, $4}'
    # per thread name: ticks (utime+stime), threads
    # (db_bench's own threads one by one, by thread id: main, writer, reader, ...)
    cat /tmp/cpu.snap.* | sed 's/^\([0-9]*\) (\([^)]*\)) /\2 \1 /' | awk -v r=$r -v t=$t '{n=$1; sub(/[0-9]+$/, "N", n); if (n=="db_bench") n=n "-" $2; c[n]+=$14+$15; k[n]++} END {for (n in c) print r, t, "thread", n, c[n], k[n]}' | sort -k5 -n -r
    if [ $t = ext4 ]; then umount $MNT; fi
  done
done
