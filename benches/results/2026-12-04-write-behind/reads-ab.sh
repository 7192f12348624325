#!/bin/bash
# Read benchmarks of base and new kv-demo on the same store, alternated: one fill
# (fillrandom, overwrite by the new binary), a copy of the device file, then per round and
# binary readrandom, seekrandom and readwhilewriting on a fresh copy (--use_existing_db=1).
# usage: reads-ab.sh OUT ROUNDS
out=$1; rounds=$2
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=100000 --value_size=1024 --seed=1000 --sync=0 --cores=2 --shards=1"
rm -f /var/tmp/s37r.zns /var/tmp/s37r0.zns
/tmp/s37/kv-demo-new --benchmarks=fillrandom,overwrite $F --db=emu:/var/tmp/s37r0.zns,direct=0 > /dev/null 2>&1
for r in $(seq $rounds); do for v in base new; do
  cp /var/tmp/s37r0.zns /var/tmp/s37r.zns
  line=$(/tmp/s37/kv-demo-$v --benchmarks=readrandom,seekrandom,readwhilewriting --use_existing_db=1 $F --db=emu:/var/tmp/s37r.zns,direct=0 2>&1 | grep -E 'ops/sec' | awk '{printf "%s=%s ", $1, $5}')
  echo "$v $line" >> $out
done; done
rm -f /var/tmp/s37r.zns /var/tmp/s37r0.zns
