#!/bin/bash
# usage: wrk-ab.sh MODE -> one line: MODE fillrandom=.. overwrite=.. readwhilewriting=.. (host, O_DIRECT emu, 1 KiB; plugin at /var/tmp/plugin-batch.so = sched-batch.patch)
# MODE: local | normal (sched=normal) | wrk (sched=normal, io_uring workers set to SCHED_BATCH by a 5 ms chrt loop) | batch
# host-direct-wrk.txt came from: for r in 1 2 3; do for m in local normal wrk batch; do ./wrk-ab.sh $m; done;
#   for m in batch wrk normal local; do ./wrk-ab.sh $m; done; done
m=$1
A="--num=100000 --key_size=16 --value_size=1024 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --seed=1000"
case $m in
  local) rm -rf /var/tmp/h40db; T="--db=/var/tmp/h40db"; PRE="";;
  normal|wrk) rm -f /var/tmp/h40.zns; T="--db=/rdb --fs_uri=ziob://emu:/var/tmp/h40.zns?prefault=auto&sched=normal"; PRE="env LD_PRELOAD=/var/tmp/plugin-batch.so";;
  batch) rm -f /var/tmp/h40.zns; T="--db=/rdb --fs_uri=ziob://emu:/var/tmp/h40.zns?prefault=auto"; PRE="env LD_PRELOAD=/var/tmp/plugin-batch.so";;
esac
line=$m
for b in fillrandom,flush,waitforcompaction:0 overwrite,flush,waitforcompaction:1 readwhilewriting:1; do
  bm=${b%:*}; ex=${b#*:}; name=${bm%%,*}
  $PRE db_bench $A $T --use_existing_db=$ex --benchmarks=$bm > /tmp/wrk-out.$$ 2>&1 &
  pid=$!
  if [ $m = wrk ]; then
    while kill -0 $pid 2>/dev/null; do
      for t in /proc/$pid/task/*; do
        c=$(cat $t/comm 2>/dev/null) || continue
        case $c in iou-wrk*) chrt -b -p 0 ${t##*/} >/dev/null 2>&1;; esac
      done
      sleep 0.005
    done
  fi
  wait $pid
  line="$line $name=$(awk -v n=$name '$1==n {print $5}' /tmp/wrk-out.$$)"
done
echo $line
rm -f /tmp/wrk-out.$$
