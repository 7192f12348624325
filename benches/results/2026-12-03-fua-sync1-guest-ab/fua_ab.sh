#!/bin/sh
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=4194304 --target_file_size_base=4194304 --cache_size=8388608 --bloom_bits=10 --num=5000 --value_size=100 --seed=1000 --sync=1 --benchmarks=fillseq,fillrandom,overwrite,deleterandom"
for round in 1 2 3; do
  for b in main fua; do
    for dev in nvme zbd; do
      blkzone reset $ZIOB_ZNS_BLOCK
      if [ $dev = nvme ]; then D=nvme:$ZIOB_ZNS_CHAR; else D=zbd:$ZIOB_ZNS_BLOCK; fi
      echo "== round $round $b $dev"
      /tmp/kv-demo-$b $F --db=$D 2>&1 | grep -E "ops/sec"
    done
  done
done
