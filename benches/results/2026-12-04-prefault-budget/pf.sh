#!/bin/bash
# db_bench direct fills, then kv-demo O_DIRECT fills with a given prefault; alternated.
out=$1; rounds=$2; shift 2
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=100000 --value_size=1024 --seed=1000 --sync=0"
for r in $(seq 1 $rounds); do for pf in "$@"; do
  rm -rf /var/tmp/s39-rd; /usr/bin/db_bench --benchmarks=fillseq,fillrandom,overwrite $F --db=/var/tmp/s39-rd --max_bytes_for_level_base=67108864 --use_direct_reads=1 --use_direct_io_for_flush_and_compaction=1 > /dev/null 2>&1
  rm -rf /var/tmp/s39-rd /var/tmp/s39.zns
  line=$( { /usr/bin/time -f "rss %M sys %S usr %U" /tmp/s39/kv-demo-cur --benchmarks=fillseq,fillrandom,overwrite $F --db=emu:/var/tmp/s39.zns --ziob=on --prefault_memory=$pf 2>&1; } | grep -E 'ops/sec|rss' | awk '/ops/{printf "%s %s ", $1, $5} /rss/{printf "%s", $0}')
  echo "round $r $pf: $line" >> $out
done; done
rm -f /var/tmp/s39.zns
