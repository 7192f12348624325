#!/bin/bash
# Host: 100,000 x 1 KiB readwhilewriting on RocksDB's local file system and on the plugin's
# page-cache emu file, each after its own fillrandom, under `perf record` (no call graphs,
# 4999 Hz, every thread of the process), and the CPU time of each thread
# (/proc/PID/task/*/stat, sampled every 0.1 s). Prints (and appends to OUTDIR/summary.txt)
# reads/s, keys written and the per-thread ticks; leaves OUTDIR/{local,plugin}.perf.data.
# The reader is db_bench's third thread after the rocksdb ones (timer, writer, reader);
# reader-profile.txt was counted from the perf.data files by the commands in its header.
# Usage: profile.sh PLUGIN OUTDIR
PLUGIN=$1; OUT=$2; mkdir -p $OUT
F="--num=100000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=1024 --seed=1000 --statistics"
for t in local plugin; do
  if [ $t = local ]; then rm -rf /var/tmp/prof-db; T="--db=/var/tmp/prof-db"; PRE=""
  else rm -f /var/tmp/prof.zns; T="--db=/rdb --fs_uri=ziob://emu:/var/tmp/prof.zns,direct=0?prefault=auto"; PRE="env LD_PRELOAD=$PLUGIN"; fi
  $PRE db_bench $F $T --benchmarks=fillrandom,flush,waitforcompaction > $OUT/$t-fill.out 2>&1
  perf record -F 4999 -o $OUT/$t.perf.data -- $PRE db_bench $F $T --use_existing_db=1 --benchmarks=readwhilewriting > $OUT/$t-rww.out 2>&1 &
  sleep 0.3
  PID=$(pgrep -n -x db_bench)
  rm -f /tmp/prof.snap.*
  while kill -0 $PID 2>/dev/null; do
    for d in /proc/$PID/task/*; do x=$(cat $d/stat 2>/dev/null) && [ -n "$x" ] && echo "$x" > /tmp/prof.snap.${d##*/}; done
    sleep 0.1
  done
  wait
  echo "== $t: $(awk '$1=="readwhilewriting" {print $5, "reads/s"}' $OUT/$t-rww.out) keys=$(awk '$1=="rocksdb.number.keys.written" {print $4}' $OUT/$t-rww.out)" | tee -a $OUT/summary.txt
  cat /tmp/prof.snap.* | sed 's/^\([0-9]*\) (\([^)]*\)) /\2 \1 /' | awk '{print "  thread", $1, $2, $14+$15}' | sort -k3 -n | tee -a $OUT/summary.txt
done
rm -rf /var/tmp/prof-db /var/tmp/prof.zns
