#!/bin/bash
# usage: abw.sh ROUNDS VALUE SPECOPTS BUILD...  (BUILD: /tmp/s35/plugin-BUILD.so)
# Per round: local (RocksDB's default file system), then each plugin build on a fresh emu file
# (SPECOPTS appended to the spec, "" = O_DIRECT, whose read cache is on by default):
# fillrandom, overwrite, then readrandom, readseq, readwhilewriting on that database.
A="--num=${NUM:-100000} --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=$2 --seed=1000"
B="fillrandom overwrite readrandom readseq readwhilewriting"
rounds=$1; opts=$3; shift 3
for r in $(seq $rounds); do
  rm -rf /var/tmp/abw-loc
  line="local"; ex=0
  for b in $B; do line="$line $b=$(db_bench $A --db=/var/tmp/abw-loc --use_existing_db=$ex --benchmarks=$b 2>&1 | grep -E "^$b " | awk '{print $5}')"; ex=1; done
  echo "$line"
  for so in "$@"; do
    F=/var/tmp/abw.zns; rm -f $F
    /work/main/target/release/ziob create emu:$F$opts --zones 256 --zone-size 16M --zone-capacity 12M --max-open 14 --max-active 14 >/dev/null
    line="$so"; ex=0
    for b in $B; do line="$line $b=$(LD_PRELOAD=/tmp/s35/plugin-$so.so db_bench $A --db=/rdb --fs_uri="ziob://emu:$F$opts" --use_existing_db=$ex --benchmarks=$b 2>&1 | grep -E "^$b " | awk '{print $5}')"; ex=1; done
    echo "$line"
  done
done
rm -rf /var/tmp/abw-loc /var/tmp/abw.zns
