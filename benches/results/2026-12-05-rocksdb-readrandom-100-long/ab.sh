#!/bin/bash
# Host: 100 B readrandom with 10x the reads (--reads=1000000 over 100,000 keys), RocksDB on
# the local file system against the plugin's page-cache emu file, alternated ROUNDS rounds
# (order local plugin, then plugin local). Each mode: a fresh database, fillrandom (then
# flush, waitforcompaction), then readrandom as a process of its own; rocksdb-bench's flags.
# Prints: mode fillrandom=OPS readrandom=OPS (med.py of 2026-12-05-plugin-prefault reads it).
# QUERY (default prefault=auto, as rocksdb-bench gives it) is the plugin URI's query.
# Usage: [QUERY=...] ab.sh ROUNDS PLUGIN OUT
R=$1; PLUGIN=$2; OUT=$3
A="--num=100000 --key_size=16 --value_size=100 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --seed=1000"
one() { # mode
  if [ $1 = local ]; then rm -rf /var/tmp/rr-db; PRE=""; T="--db=/var/tmp/rr-db"
  else rm -f /var/tmp/rr.zns; PRE="env LD_PRELOAD=$PLUGIN"; T="--db=/rdb --fs_uri=ziob://emu:/var/tmp/rr.zns,direct=0?${QUERY:-prefault=auto}"; fi
  f=$($PRE db_bench $A $T --use_existing_db=0 --benchmarks=fillrandom,flush,waitforcompaction 2>&1 | awk '$1=="fillrandom" {print $5}')
  r=$($PRE db_bench $A $T --use_existing_db=1 --reads=1000000 --benchmarks=readrandom 2>&1 | awk '$1=="readrandom" {print $5}')
  echo "$1 fillrandom=$f readrandom=$r" | tee -a $OUT
}
for i in $(seq $R); do
  if [ $((i % 2)) = 1 ]; then one local; one plugin; else one plugin; one local; fi
done
rm -rf /var/tmp/rr-db /var/tmp/rr.zns
