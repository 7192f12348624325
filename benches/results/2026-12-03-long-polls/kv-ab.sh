#!/bin/bash
# Alternated A/B of the kv-demo 1 KiB sequence: base (main), long (this change), every (look every poll)
out=$1; rounds=${2:-3}; shift 2; builds="$@"
for r in $(seq 1 $rounds); do for b in $builds; do
  rm -f /var/tmp/s32-ab.zns
  line=$(/tmp/s32/kv-demo-$b --benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,readwhilewriting,seekrandom,deleterandom --key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=100000 --value_size=1024 --seed=$((1000+r)) --sync=0 --db=emu:/var/tmp/s32-ab.zns${DBOPT} --ziob=on 2>/dev/null | grep ops/sec | awk '{printf "%s %s ", $1, $5}')
  echo "round $r $b: $line" >> $out
done; done
rm -f /var/tmp/s32-ab.zns
