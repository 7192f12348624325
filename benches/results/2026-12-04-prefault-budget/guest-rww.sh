#!/bin/sh
# In the guest: kv-demo's fills then readwhilewriting on nvme: with the store's shape logged before and after each benchmark.
BIN=/tmp/s39/kv-demo-final
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=4194304 --target_file_size_base=4194304 --cache_size=8388608 --bloom_bits=10 --num=200000 --value_size=100 --seed=1000 --sync=0 --ziob=on --statistics"
blkzone reset $ZIOB_ZNS_BLOCK
RUST_LOG=kv_demo=info $BIN --benchmarks=fillseq,fillrandom,overwrite,readrandom,readwhilewriting $F --db=nvme:$ZIOB_ZNS_CHAR 2>&1 | grep -E "ops/sec|before|after|kvdemo\.(bytes|flush|compact|stall)" | cut -c1-260
