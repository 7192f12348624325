#!/bin/bash
# Plugin fills with write-behind's task count 1 and 4 (a throwaway build reading
# TEMP_WB_WORKERS) and base, alternated. usage: workers-ab.sh ROUNDS OUT
R=$1; OUT=$2
A="--num=100000 --key_size=16 --value_size=1024 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1"
for r in $(seq $R); do for m in base k1 k4; do
  case $m in base) so=/tmp/s37/plugin-base.so; k=1;; k1) so=/tmp/s37/plugin-k.so; k=1;; k4) so=/tmp/s37/plugin-k.so; k=4;; esac
  line=$m
  for b in "fillseq 0" "fillrandom 0" "overwrite 1"; do
    bm=${b% *}; ex=${b#* }
    rm -f /var/tmp/s37w.zns.keep
    [ $bm = fillseq ] && rm -f /var/tmp/s37w.zns
    v=$(TEMP_WB_WORKERS=$k LD_PRELOAD=$so db_bench $A --db=/rdb --fs_uri=ziob://emu:/var/tmp/s37w.zns,direct=0 --seed=1000 --use_existing_db=$ex --benchmarks=$bm,flush,waitforcompaction 2>&1 | grep -E "^$bm " | awk '{print $5}')
    line="$line $bm=$v"
  done
  echo "$line" >> $OUT
done; done
rm -f /var/tmp/s37w.zns
