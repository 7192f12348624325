#!/bin/bash
# usage: rww.sh ROUNDS ; env SO_LIST as ab3.sh ; readwhilewriting on a copy of /var/tmp/rww-base.zns, and local on /var/tmp/rww-loc-base
A="--num=100000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=1024 --seed=1000"
if [ ! -d /var/tmp/rww-loc-base ]; then db_bench $A --db=/var/tmp/rww-loc-base --use_existing_db=0 --benchmarks=fillrandom,flush,waitforcompaction >/dev/null 2>&1; fi
for r in $(seq $1); do
  rm -rf /var/tmp/rww-loc; cp -r /var/tmp/rww-loc-base /var/tmp/rww-loc
  echo "local $(db_bench $A --db=/var/tmp/rww-loc --use_existing_db=1 --benchmarks=${2:-readwhilewriting} 2>&1 | grep -E "^${2:-readwhilewriting} " | awk '{print $5}')"
  for e in $SO_LIST; do
    name=${e%%=*}; rest=${e#*=}; so=${rest%%:*}; env=""; [[ "$rest" == *:* ]] && env=${rest#*:}
    cp /var/tmp/rww-base.zns /var/tmp/rww.zns
    echo "$name $(env $env LD_PRELOAD=$so db_bench $A --db=/rdb --fs_uri=ziob://emu:/var/tmp/rww.zns,direct=0 --use_existing_db=1 --benchmarks=${2:-readwhilewriting} 2>&1 | grep -E "^${2:-readwhilewriting} " | awk '{print $5}')"
  done
done
