#!/bin/bash
# rounds of: for each "BUILD:FLAGS": db_bench direct (whole), then /tmp/s34/kv-demo-BUILD fills on O_DIRECT emu
out=$1; rounds=$2; shift 2
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=100000 --value_size=1024 --seed=1000 --sync=0"
for r in $(seq 1 $rounds); do for e in "$@"; do
  b=${e%%:*}; fl=${e#*:}
  rm -rf /var/tmp/s34-rd; /usr/bin/db_bench --benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,readwhilewriting,seekrandom,deleterandom $F --db=/var/tmp/s34-rd --max_bytes_for_level_base=67108864 --use_direct_reads=1 --use_direct_io_for_flush_and_compaction=1 > /dev/null 2>&1
  rm -rf /var/tmp/s34-rd /var/tmp/s34.zns
  line=$(/usr/bin/time -f "rss_kb %M cpu_s %U+%S" /tmp/s34/kv-demo-$b --benchmarks=fillseq,fillrandom,overwrite $F --db=emu:/var/tmp/s34.zns $fl 2>&1 | grep -E 'ops/sec|rss_kb' | awk '/ops\/sec/{printf "%s %s ", $1, $5} /rss_kb/{printf "%s %s %s %s", $1,$2,$3,$4}')
  echo "round $r $e: $line" >> $out
done; done
rm -f /var/tmp/s34.zns
