#!/bin/bash
# 1 KiB readwhilewriting through the page cache, kv-demo (emu:...,direct=0) against fjall,
# alternated, ROUNDS rounds: kv-bench's host flags and its list up to readwhilewriting in one
# process each, 100,000 x 1 KiB, --sync=0, in /var/tmp. Prints: round engine benchmark ops/s.
# Usage: ab.sh KV_DEMO [ROUNDS]   (default 5; KV_DEMO built with --features kv-demo/peers)
KV=$1; ROUNDS=${2:-5}
F="--benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,readwhilewriting --key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=100000 --value_size=1024 --seed=1000 --sync=0"
for r in $(seq 1 "$ROUNDS"); do
  order="kv-demo fjall"; [ $((r % 2)) = 0 ] && order="fjall kv-demo"
  for e in $order; do
    rm -rf /var/tmp/rww1k.zns /var/tmp/rww1k-fjall
    if [ $e = kv-demo ]; then out=$($KV $F --db=emu:/var/tmp/rww1k.zns,direct=0 2>&1)
    else out=$($KV $F --engine=fjall --db=/var/tmp/rww1k-fjall 2>&1); fi
    echo "$out" | awk -v r=$r -v e=$e '$2==":" && /ops\/sec/ {print r, e, $1, $5}'
  done
done
rm -rf /var/tmp/rww1k.zns /var/tmp/rww1k-fjall
