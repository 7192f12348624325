#!/bin/bash
# Host, 1 KiB readwhilewriting after its own fillrandom on local / page-cache emu (pc) / O_DIRECT emu
# (direct), rounds in that order: reads/s, keys the writer put, MB written to the host disk (vda)
# during the benchmark and until a sync after it, and the machine's CPU ticks (/proc/stat) over it.
# EXTRA adds db_bench flags (e.g. EXTRA=--disable_wal=1).
# Usage: [EXTRA=...] disk.sh PLUGIN ROUNDS   (run from the repository root: uses target/debug/ziob)
PLUGIN=$1; ROUNDS=$2
F="--num=100000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=1024 --seed=1000 --statistics $EXTRA"
sect() { awk '$3=="vda" {print $10}' /proc/diskstats; }
for r in $(seq $ROUNDS); do
for t in local pc direct; do
  case $t in
    local) rm -rf /var/tmp/dk-db; T="--db=/var/tmp/dk-db"; PRE="";;
    pc) rm -f /var/tmp/dk.zns; T="--db=/rdb --fs_uri=ziob://emu:/var/tmp/dk.zns,direct=0?prefault=auto"; PRE="env LD_PRELOAD=$PLUGIN";;
    direct) rm -f /var/tmp/dk.zns; T="--db=/rdb --fs_uri=ziob://emu:/var/tmp/dk.zns?prefault=auto"; PRE="env LD_PRELOAD=$PLUGIN";;
  esac
  [ $t != local ] && target/debug/ziob create emu:/var/tmp/dk.zns --zones 256 --zone-size 16M --zone-capacity 12M --max-open 14 --max-active 14 >/dev/null
  $PRE db_bench $F $T --benchmarks=fillrandom,flush,waitforcompaction > /tmp/dk-fill.out 2>&1
  sync; sleep 1
  s0=$(sect); c0=$(head -1 /proc/stat)
  $PRE db_bench $F $T --use_existing_db=1 --benchmarks=readwhilewriting > /tmp/dk-rww.out 2>/dev/null
  s1=$(sect); c1=$(head -1 /proc/stat)
  sync; s2=$(sect)
  echo "$r $t reads/s=$(awk '$1=="readwhilewriting" {print $5}' /tmp/dk-rww.out) keys=$(awk '$1=="rocksdb.number.keys.written" {print $4}' /tmp/dk-rww.out) disk_MB_during=$(( (s1-s0)/2048 )) disk_MB_incl_sync=$(( (s2-s0)/2048 )) | cpu: $(python3 -c "
a='$c0'.split()[1:];b='$c1'.split()[1:];d=[int(y)-int(x) for x,y in zip(a,b)];n=['user','nice','sys','idle','iowait','irq','softirq'];print(' '.join('%s=%d'%(k,v) for k,v in zip(n,d)))")"
done; done
rm -rf /var/tmp/dk-db /var/tmp/dk.zns
