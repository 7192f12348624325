#!/bin/sh
# Diagnosis only (throwaway build): readwhilewriting with the writer paced to KVX_RWW_RATE bytes/s.
BIN=/tmp/s39/kv-demo-rate
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=4194304 --target_file_size_base=4194304 --cache_size=8388608 --bloom_bits=10 --num=200000 --value_size=100 --seed=1000 --sync=0 --ziob=on --statistics"
for rate in none 1200000 2400000 4800000; do
  blkzone reset $ZIOB_ZNS_BLOCK
  if [ $rate = none ]; then unset KVX_RWW_RATE; else export KVX_RWW_RATE=$rate; fi
  line=$(RUST_LOG=kv_demo=info $BIN --benchmarks=fillseq,fillrandom,overwrite,readrandom,readwhilewriting $F --db=nvme:$ZIOB_ZNS_CHAR 2>&1 | grep -E "^readwhilewriting|after readwhilewriting|kvdemo.bytes.written" | sed 's/.*INFO kv_demo::bench::driver: //' | tr '\n' ' ')
  echo "rate=$rate: $line"
done
