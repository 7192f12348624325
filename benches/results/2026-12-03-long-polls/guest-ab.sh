#!/bin/sh
# Alternated A/B in one guest boot: kv-demo main (7ef022f's runtime and 256 KiB table appends,
# plus the flush/compaction debug events) and kv-demo final (22bfb9a), on nvme, kv-bench's
# default layout (two cores, one shard), the guest flags, 3 rounds; db_bench on ext4
# once, for scale.
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=4194304 --target_file_size_base=4194304 --cache_size=8388608 --bloom_bits=10 --num=200000 --value_size=100 --seed=1000"
SEQ=fillseq,fillrandom,overwrite,readrandom,readseq,readwhilewriting,seekrandom,deleterandom
mkdir -p /tmp/e; mkfs.ext4 -q -F $ZIOB_CONV_BLOCK; mount -t ext4 $ZIOB_CONV_BLOCK /tmp/e
echo "== round 1 db_bench ext4"
db_bench $F --db=/tmp/e/db --benchmarks=$SEQ 2>&1 | grep -E "ops/sec"
umount /tmp/e
for r in 1 2 3; do
  for b in main final; do
    echo "== round $r kv-demo-$b nvme"
    blkzone reset $ZIOB_ZNS_BLOCK
    /tmp/kv-demo-$b $F --db=nvme:$ZIOB_ZNS_CHAR --benchmarks=$SEQ 2>&1 | grep -E "ops/sec"
  done
done
