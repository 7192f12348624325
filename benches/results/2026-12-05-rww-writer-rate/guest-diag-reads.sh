#!/bin/bash
# Guest, `zbd:`, 1 KiB: fillrandom, then readwhilewriting with the read-cache diagnostics of
# diag-reads.patch (ZIOB_DIAG_READS=1: hits, misses, every read call slower than 1 ms), the writer
# unlimited and at 8 MB/s, 2 rounds. Usage: bash guest-diag-reads.sh PLUGIN.so
SO=$1; DEV=nvme0n1
FLAGS="--num=30000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=1024 --seed=1000 --statistics"
URI="ziob://zbd:/dev/$DEV?prefault=auto"
for r in 1 2; do
for lim in 0 8000000; do
  blkzone reset /dev/$DEV
  LD_PRELOAD=$SO db_bench $FLAGS --db=/rocksdb-bench --fs_uri="$URI" --benchmarks=fillrandom,flush,waitforcompaction > /tmp/fill.out 2>&1
  LD_PRELOAD=$SO ZIOB_DIAG_READS=1 db_bench $FLAGS --db=/rocksdb-bench --fs_uri="$URI" --use_existing_db=1 --benchmark_write_rate_limit=$lim --benchmarks=readwhilewriting > /tmp/rww.out 2>/tmp/rww.err
  echo "== round $r limit $lim: $(awk '$1=="readwhilewriting" {print $5, "reads/s"}' /tmp/rww.out) keys $(awk '/rocksdb.number.keys.written /{print $4}' /tmp/rww.out)"
  grep -h 'rocksdb.sst.read.micros' /tmp/rww.out
  grep -c 'ZIOB_DIAG slow' /tmp/rww.err
  grep 'ZIOB_DIAG slow' /tmp/rww.err | head -30
  grep 'ZIOB_DIAG reads' /tmp/rww.err | tail -1
done
done
