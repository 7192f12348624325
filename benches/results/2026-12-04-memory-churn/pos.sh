#!/bin/bash
# kv-bench's order: db_bench with direct I/O, then kv-demo on an O_DIRECT emu file (full sequence).
out=$1; rounds=$2; shift 2
for r in $(seq 1 $rounds); do for b in "$@"; do
  rm -rf /var/tmp/s33-rd; /usr/bin/db_bench --benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,readwhilewriting,seekrandom,deleterandom --key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=100000 --value_size=1024 --seed=1000 --sync=0 --db=/var/tmp/s33-rd --max_bytes_for_level_base=67108864 --use_direct_reads=1 --use_direct_io_for_flush_and_compaction=1 > /dev/null 2>&1
  rm -rf /var/tmp/s33-rd /var/tmp/s33-ab.zns
  line=$(/tmp/s33/kv-demo-$b --benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,readwhilewriting,seekrandom,deleterandom --key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=100000 --value_size=1024 --seed=1000 --sync=0 --db=emu:/var/tmp/s33-ab.zns --ziob=on 2>&1 | grep -E 'ops/sec' | awk '{printf "%s %s ", $1, $5}')
  echo "round $r $b: $line" >> $out
done; done
rm -f /var/tmp/s33-ab.zns
