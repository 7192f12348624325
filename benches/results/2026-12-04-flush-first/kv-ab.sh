#!/bin/bash
# kv-demo binaries alternated, whole sequence, 100,000 x VALUE, the kv-bench layout
# (2 cores, 1 shard), through the page cache (DEV=",direct=0", the default) or O_DIRECT (DEV="").
# usage: [PAIR="base ff"] [DEV=",direct=0"] kv-ab.sh OUT ROUNDS [VALUE]
# binaries: /tmp/s38/kv-demo-LABEL (`cargo build --release -p kv-demo --features peers` of each tree)
# table: python3 benches/results/2026-12-04-write-behind/med.py OUT
out=$1; rounds=$2; value=${3:-1024}
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=100000 --value_size=$value --seed=1000 --sync=0"
for r in $(seq $rounds); do for v in ${PAIR:-base ff}; do
  rm -f /var/tmp/s38kv.zns
  line=$(/tmp/s38/kv-demo-$v --benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,readwhilewriting,seekrandom,deleterandom $F --db=emu:/var/tmp/s38kv.zns${DEV-,direct=0} --cores=2 --shards=1 2>&1 | grep -E 'ops/sec' | awk '{printf "%s=%s ", $1, $5}')
  echo "$v $line" >> $out
done; done
rm -f /var/tmp/s38kv.zns
