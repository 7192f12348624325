#!/bin/bash
# usage: abq.sh ROUNDS VALUE "QUERY1 QUERY2 ..."  (a query "-" = none, the default of the .so;
#   e.g. "?cache=64M ?cache=0"). ab-1024.txt and ab-100.txt were run as
#   abq.sh 3 1024 "- ?cache=0" with the plugin of 7c4685b, whose default was cache=64M: their
#   "plugin" rows are cache=64M. Since 3fb8320 the default on emu direct=0 is cache=0, so to
#   repeat them name both: "?cache=64M ?cache=0".
# Per round and variant: a fresh database filled by fillrandom, then readrandom, readseq and
# readwhilewriting on it (use_existing_db=1), as rocksdb-bench orders them. local = RocksDB's
# default file system; the plugin on an emu file behind the page cache (direct=0).
SO=${SO:-/work/main/target/release/libziob_rocksdb.so}
A="--num=100000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=$2 --seed=1000"
B="fillrandom readrandom readseq readwhilewriting"
for r in $(seq $1); do
  rm -rf /var/tmp/abq-loc
  line="local"; ex=0
  for b in $B; do line="$line $b=$(db_bench $A --db=/var/tmp/abq-loc --use_existing_db=$ex --benchmarks=$b 2>&1 | grep -E "^$b " | awk '{print $5}')"; ex=1; done
  echo "$line"
  for q in $3; do
    [ "$q" = "-" ] && q=""
    F=/var/tmp/abq.zns; rm -f $F
    /work/main/target/release/ziob create emu:$F,direct=0 --zones 256 --zone-size 16M --zone-capacity 12M --max-open 14 --max-active 14 >/dev/null
    line="plugin$q"; ex=0
    for b in $B; do line="$line $b=$(LD_PRELOAD=$SO db_bench $A --db=/rdb --fs_uri="ziob://emu:$F,direct=0$q" --use_existing_db=$ex --benchmarks=$b 2>&1 | grep -E "^$b " | awk '{print $5}')"; ex=1; done
    echo "$line"
  done
done
