#!/bin/bash
# usage: ab.sh ROUNDS VALUE OUT MODES...   mode = local | NAME:SO:ENV(comma-separated)
R=$1; V=$2; OUT=$3; shift 3
A="--num=100000 --key_size=16 --value_size=$V --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1"
BENCHES=${BENCHES:-"fillseq,flush,waitforcompaction:0 fillrandom,flush,waitforcompaction:0 overwrite,flush,waitforcompaction:1"}
for r in $(seq $R); do
  for m in "$@"; do
    case $m in sync) sync; continue;; sleep*) sleep ${m#sleep}; continue;; esac
    if [ "$m" = local ]; then label=local; PRE=""; T="--db=/var/tmp/s40db"; rm -rf /var/tmp/s40db
    else IFS=: read label so envs suffix <<< "$m"; PRE="env ${envs//,/ } LD_PRELOAD=$so"; T="--db=/rdb --fs_uri=ziob://emu:/var/tmp/s40ab.zns${DBOPT-,direct=0}$suffix"; rm -f /var/tmp/s40ab.zns; fi
    line="$label"
    for b in $BENCHES; do bm=${b%:*}; ex=${b#*:}; name=${bm%%,*}
      v=$($PRE db_bench $A $T --seed=1000 --use_existing_db=$ex --benchmarks=$bm 2>&1 | grep -E "^$name " | awk '{print $5}')
      line="$line $name=$v"
    done
    echo "$line" | tee -a $OUT
  done
done
rm -rf /var/tmp/s40db /var/tmp/s40ab.zns
