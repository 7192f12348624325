#!/bin/sh
# readseq in the guest: the full sequence with extra readseqs, kv-demo on nvme with --cores=2
# (two cores and two shards; kv-bench's default is two cores, one shard) and --cores=1; then fillrandom and
# readseqs alone; db_bench on ext4 for the same lists.
KV=${KV:-/tmp/kv-demo-fua}
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=4194304 --target_file_size_base=4194304 --cache_size=8388608 --bloom_bits=10 --num=200000 --value_size=100 --seed=1000"
SEQ=fillseq,fillrandom,overwrite,readrandom,readseq,readseq,readseq,readwhilewriting,seekrandom
for cores in 2 1; do
  echo "== kv-demo nvme --cores=$cores full sequence"
  blkzone reset $ZIOB_ZNS_BLOCK
  $KV $F --cores=$cores --db=nvme:$ZIOB_ZNS_CHAR --benchmarks=$SEQ 2>&1 | grep -E "ops/sec"
done
echo "== kv-demo nvme (1 core) fillrandom then readseqs"
blkzone reset $ZIOB_ZNS_BLOCK
$KV $F --db=nvme:$ZIOB_ZNS_CHAR --benchmarks=fillrandom,readseq,readseq,readseq,readrandom,readseq,readseq 2>&1 | grep -E "ops/sec"
echo "== kv-demo nvme reopened"
$KV $F --db=nvme:$ZIOB_ZNS_CHAR --use_existing_db=1 --benchmarks=readseq,readseq,readseq 2>&1 | grep -E "ops/sec"
mkdir -p /tmp/e; mkfs.ext4 -q -F $ZIOB_CONV_BLOCK; mount -t ext4 $ZIOB_CONV_BLOCK /tmp/e
echo "== db_bench ext4 full sequence"
db_bench $F --max_bytes_for_level_base=16777216 --db=/tmp/e/db --benchmarks=$SEQ 2>&1 | grep -E "ops/sec"
echo "== db_bench ext4 fillrandom then readseqs"
db_bench $F --max_bytes_for_level_base=16777216 --db=/tmp/e/db --benchmarks=fillrandom,readseq,readseq,readseq,readrandom,readseq,readseq 2>&1 | grep -E "ops/sec"
echo "== db_bench ext4 reopened"
db_bench $F --max_bytes_for_level_base=16777216 --db=/tmp/e/db --use_existing_db=1 --benchmarks=readseq,readseq,readseq 2>&1 | grep -E "ops/sec"
umount /tmp/e
