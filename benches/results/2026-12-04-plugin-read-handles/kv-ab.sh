#!/bin/bash
# kv-demo before (HEAD) and after table reads through zonefs FileReaders, alternated.
# usage: kv-ab.sh OUT ROUNDS DBOPT
out=$1; rounds=$2; dbopt=$3
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=100000 --value_size=1024 --seed=1000 --sync=0"
for r in $(seq $rounds); do for v in base new; do
  rm -f /var/tmp/s36kv.zns
  line=$(/tmp/s36/kv-demo-$v --benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,readwhilewriting,seekrandom,deleterandom $F --db=emu:/var/tmp/s36kv.zns$dbopt --cores=2 --shards=1 2>&1 | grep -E 'ops/sec' | awk '{printf "%s=%s ", $1, $5}')
  echo "$v $line" >> $out
done; done
rm -f /var/tmp/s36kv.zns
