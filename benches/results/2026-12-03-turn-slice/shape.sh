#!/bin/sh
# The store's shape before and after each benchmark (RUST_LOG=kv_demo=info), kv-demo on nvme in the
# guest, kv-bench's default layout (--cores=0: two cores, one shard) and one core. KV = the binary
# (guest-shape-before.txt: code of fc8a08d plus the log lines; guest-shape-after.txt: a first version of the
# turn slice, a look and a clock read every 8 polls; guest-shape-final.txt: the final rule, commit 1fa5fa7's).
# cargo xtask vm-run --zones 128 --zone-size 16M --zone-capacity 12M --max-open 14 --max-active 14 \
#     --conv-size 2G --timeout-secs 800 --out-dir /tmp/g -- shape.sh
KV=${KV:-/tmp/kv-demo-diag}
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=4194304 --target_file_size_base=4194304 --cache_size=8388608 --bloom_bits=10 --num=200000 --value_size=100 --seed=1000"
SEQ=fillseq,fillrandom,overwrite,readrandom,readseq,readseq,readwhilewriting,seekrandom
for c in 0 1; do
echo "== kv-demo nvme cores=$c (0 = kv-bench's default layout)"
blkzone reset $ZIOB_ZNS_BLOCK
RUST_LOG=kv_demo=info $KV $F --cores=$c --db=nvme:$ZIOB_ZNS_CHAR --benchmarks=$SEQ 2>&1 | grep -E "ops/sec|before|after" | sed 's/^.*INFO [a-z_:]*: //'
done
