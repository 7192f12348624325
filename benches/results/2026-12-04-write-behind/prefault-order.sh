#!/bin/bash
# kv-demo's O_DIRECT fillseq right after a db_bench run with direct I/O (kv-bench's order),
# --prefault_memory=auto against 400M, alternated. usage: prefault-order.sh OUT ROUNDS
out=$1; rounds=$2
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=100000 --value_size=1024 --seed=1000 --sync=0"
for r in $(seq $rounds); do for p in auto 400M; do
  rm -rf /var/tmp/s37db; rm -f /var/tmp/s37p.zns
  db_bench --benchmarks=fillseq,fillrandom,overwrite,readrandom $F --statistics --db=/var/tmp/s37db --max_bytes_for_level_base=67108864 --use_direct_reads=1 --use_direct_io_for_flush_and_compaction=1 > /dev/null 2>&1
  line=$(/usr/bin/time -f "rss=%M" /tmp/s37/kv-demo-new --benchmarks=fillseq,fillrandom,overwrite $F --db=emu:/var/tmp/s37p.zns --cores=2 --shards=1 --prefault_memory=$p 2>&1 | grep -E 'ops/sec|rss=' | awk '/rss=/{printf "%s ", $1; next} {printf "%s=%s ", $1, $5}')
  echo "$p $line" >> $out
done; done
rm -rf /var/tmp/s37db /var/tmp/s37p.zns
