#!/bin/bash
# Host A/B of the L0 write slowdown: kv-demo without it (NOSLOW: the same tree with
# L0_SLOWDOWN_WRITES = usize::MAX) and with it (SLOW), alternated, ROUNDS rounds, kv-bench's
# host flags and list, NUM × VALUE bytes on an emu file in /var/tmp (DIRECT=0: page cache).
# Prints: round mode benchmark ops/s, and the store's write stalls / slowdowns after each
# write benchmark. Usage: host-ab.sh NOSLOW SLOW ROUNDS [NUM] [VALUE] [DIRECT]
NOSLOW=$1; SLOW=$2; ROUNDS=${3:-3}; NUM=${4:-1000000}; VALUE=${5:-100}; DIRECT=${6:-0}
spec=emu:/var/tmp/l0ab.zns; [ "$DIRECT" = 0 ] && spec="$spec,direct=0"
F="--benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,readwhilewriting,seekrandom,deleterandom --key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=$NUM --value_size=$VALUE --seed=1000 --sync=0"
for r in $(seq 1 "$ROUNDS"); do
  order="noslow slow"; [ $((r % 2)) = 0 ] && order="slow noslow"
  for m in $order; do
    bin=$NOSLOW; [ $m = slow ] && bin=$SLOW
    rm -f /var/tmp/l0ab.zns
    out=$(RUST_LOG=kv_demo=info $bin $F --db=$spec 2>&1)
    echo "$out" | awk -v r=$r -v m=$m '$2==":" && /ops\/sec/ {print r, m, $1, $5}'
    echo "$out" | grep -E "after (fillrandom|overwrite|readwhilewriting|deleterandom)" | sed -E 's/.*after ([a-z]+):.*(write stalls [0-9]+); (write slowdowns [0-9]+).*/    \1: \2, \3/' | sed "s/^/  $r $m/"
  done
done
rm -f /var/tmp/l0ab.zns
