#!/bin/bash
# kv-demo's 100 B writes and reads for BASE and NEW, alternated, ROUNDS rounds (kv-bench's
# host flags, 100,000 keys, O_DIRECT emu file in /var/tmp, ZIOB on): the per-operation
# timing of ZIOB's metrics is on every path here. Prints: round build benchmark ops/s.
# Usage: ops-ab.sh BASE NEW [ROUNDS]
BASE=$1; NEW=$2; ROUNDS=${3:-6}
F="--benchmarks=fillseq,fillrandom,overwrite,readrandom --key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=100000 --value_size=100 --seed=1000 --sync=0"
for r in $(seq 1 "$ROUNDS"); do
  order="base new"; [ $((r % 2)) = 0 ] && order="new base"
  for m in $order; do
    bin=$BASE; [ $m = new ] && bin=$NEW
    rm -f /var/tmp/ops-ab.zns
    "$bin" $F --db=emu:/var/tmp/ops-ab.zns --ziob=on 2>&1 | awk -v r=$r -v m=$m '$2==":" && /ops\/sec/ {print r, m, $1, $5}'
  done
done
rm -f /var/tmp/ops-ab.zns
