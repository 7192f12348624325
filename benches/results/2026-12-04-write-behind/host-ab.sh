#!/bin/bash
# Host A/B of the plugin before (base .so, HEAD) and after emu write-behind (new .so), and local, alternated.
# usage: [MODES="local base-pc new-pc base-direct new-direct"] host-ab.sh ROUNDS VALUE_SIZE OUT

R=$1; V=$2; OUT=$3
A="--num=100000 --key_size=16 --value_size=$V --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1"
run() { # label so opts
  label=$1; so=$2; opts=$3
  if [ "$label" = local ]; then rm -rf /var/tmp/s37db; T="--db=/var/tmp/s37db"; PRE=""; else rm -f /var/tmp/s37ab.zns; T="--db=/rdb --fs_uri=ziob://emu:/var/tmp/s37ab.zns$opts"; PRE="LD_PRELOAD=$so"; fi
  line="$label"
  for b in "fillseq,flush,waitforcompaction 0" "fillrandom,flush,waitforcompaction 0" "overwrite,flush,waitforcompaction 1" "readrandom 1" "readseq 1" "readwhilewriting 1"; do
    bm=${b% *}; ex=${b#* }; name=${bm%%,*}
    v=$(eval "$PRE db_bench $A $T --seed=1000 --use_existing_db=$ex --benchmarks=$bm" 2>&1 | grep -E "^$name " | awk '{print $5}')
    line="$line $name=$v"
  done
  echo "$line" >> $OUT
}
NEW=/tmp/s37/plugin-new.so BASE=/tmp/s37/plugin-base.so
for r in $(seq $R); do
  for m in ${MODES:-local base-pc new-pc base-direct new-direct}; do
    case $m in
      local) run local "" "" ;;
      base-pc) run base-pc $BASE ",direct=0" ;;
      new-pc) run new-pc $NEW ",direct=0" ;;
      base-direct) run base-direct $BASE "" ;;
      new-direct) run new-direct $NEW "" ;;
    esac
  done
done
rm -rf /var/tmp/s37db /var/tmp/s37ab.zns
