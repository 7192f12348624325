#!/bin/sh
# In the guest: db_bench on ext4, then kv-demo on nvme: with the slowdown (NEW) and without
# it (NOSLOW: the same tree with L0_SLOWDOWN_WRITES = usize::MAX), the two alternating in
# order; kv-bench's guest flags, its list up to readwhilewriting in one process, ROUNDS rounds.
# Usage: sh guest-ab.sh NEW NOSLOW ROUNDS
NEW=$1; NOSLOW=$2; ROUNDS=${3:-3}
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=4194304 --target_file_size_base=4194304 --cache_size=8388608 --bloom_bits=10 --num=200000 --value_size=100 --seed=1000 --sync=0"
B="--benchmarks=fillseq,fillrandom,overwrite,readrandom,readwhilewriting"
mnt=/tmp/kvm-ext4; mkdir -p $mnt
for r in $(seq $ROUNDS); do
  mkfs.ext4 -q -F $ZIOB_CONV_BLOCK; mount -t ext4 $ZIOB_CONV_BLOCK $mnt
  line=$(db_bench $B $F --db=$mnt/db --max_bytes_for_level_base=16777216 2>&1 | grep -E "ops/sec" | awk '{printf "%s %s ", $1, $5}')
  umount $mnt; echo "round$r ext4: $line"
  order="new noslow"; [ $((r % 2)) = 0 ] && order="noslow new"
  for m in $order; do
    bin=$NEW; [ $m = noslow ] && bin=$NOSLOW
    blkzone reset $ZIOB_ZNS_BLOCK
    out=$(RUST_LOG=kv_demo=info $bin $B $F --db=nvme:$ZIOB_ZNS_CHAR --ziob=on 2>&1)
    line=$(echo "$out" | grep -E "ops/sec" | awk '{printf "%s %s ", $1, $5}')
    echo "round$r $m: $line"
    echo "$out" | grep -E "after (overwrite|readwhilewriting)" | sed 's/.*INFO kv_demo::bench::driver: /    /' | cut -c1-230
  done
done
