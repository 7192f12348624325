#!/bin/sh
# Alternated A/B in one guest boot: db_bench on ext4, kv-demo main (fc8a08d's runtime, plus the
# shape log lines) and kv-demo with the turn slice, on nvme, kv-bench's default layout (--cores=0:
# two cores, one shard), the guest flags, 3 rounds.
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=4194304 --target_file_size_base=4194304 --cache_size=8388608 --bloom_bits=10 --num=200000 --value_size=100 --seed=1000"
SEQ=fillseq,fillrandom,overwrite,readrandom,readseq,readwhilewriting,seekrandom,deleterandom
mkdir -p /tmp/e; mkfs.ext4 -q -F $ZIOB_CONV_BLOCK; mount -t ext4 $ZIOB_CONV_BLOCK /tmp/e
for r in 1 2 3; do
  echo "== round $r db_bench ext4"
  rm -rf /tmp/e/db
  db_bench $F --max_bytes_for_level_base=16777216 --db=/tmp/e/db --benchmarks=$SEQ 2>&1 | grep -E "ops/sec"
  for b in main slice; do
    echo "== round $r kv-demo-$b nvme"
    blkzone reset $ZIOB_ZNS_BLOCK
    /tmp/kv-demo-$b $F --db=nvme:$ZIOB_ZNS_CHAR --benchmarks=$SEQ 2>&1 | grep -E "ops/sec"
  done
done
umount /tmp/e
