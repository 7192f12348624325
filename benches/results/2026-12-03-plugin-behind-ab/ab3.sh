#!/bin/bash
# usage: ab3.sh ROUNDS BENCH VALUE  (env SO_LIST="name=path[:ENV=1] ...")
A="--num=100000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=$3 --seed=1000 --use_existing_db=0 --benchmarks=$2"
for r in $(seq $1); do
  rm -rf /var/tmp/loc; echo "local $(db_bench $A --db=/var/tmp/loc 2>&1 | grep -E "^$2 " | awk '{print $5}')"
  for e in $SO_LIST; do
    name=${e%%=*}; rest=${e#*=}; so=${rest%%:*}; env=""; [[ "$rest" == *:* ]] && env=${rest#*:}
    F=/var/tmp/p1.zns; rm -f $F; /work/main/target/release/ziob create emu:$F,direct=0 --zones 256 --zone-size 16M --zone-capacity 12M --max-open 14 --max-active 14 >/dev/null
    echo "$name $(env $env LD_PRELOAD=$so db_bench $A --db=/rdb --fs_uri=ziob://emu:$F,direct=0 2>&1 | grep -E "^$2 " | awk '{print $5}')"
  done
done
