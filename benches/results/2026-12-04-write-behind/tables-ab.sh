#!/bin/bash
# kv-demo (write-behind) with --tables_on_background_core off and on, alternated, whole
# sequence, 100,000 x 1 KiB, page cache, 2 cores / 1 shard. usage: tables-ab.sh OUT ROUNDS
out=$1; rounds=$2
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=100000 --value_size=1024 --seed=1000 --sync=0"
for r in $(seq $rounds); do for v in off on; do
  rm -f /var/tmp/s37t.zns
  line=$(/tmp/s37/kv-demo-new --benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,readwhilewriting,seekrandom,deleterandom $F --db=emu:/var/tmp/s37t.zns,direct=0 --cores=2 --shards=1 --tables_on_background_core=$v 2>&1 | grep -E 'ops/sec' | awk '{printf "%s=%s ", $1, $5}')
  echo "$v $line" >> $out
done; done
rm -f /var/tmp/s37t.zns
