#!/bin/bash
# kv-bench's order: db_bench with direct I/O (whole sequence minus the slow reads), then kv-demo's whole
# sequence on an O_DIRECT emu file with --ziob=on or off; alternated. Usage: [BENCH=list] onoff.sh OUT ROUNDS VALUE_SIZE BIN
out=$1; rounds=$2; vs=$3; bin=$4
BENCH=${BENCH:-fillseq,fillrandom,overwrite,deleterandom}
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=100000 --value_size=$vs --seed=1000 --sync=0"
for r in $(seq 1 $rounds); do
  if [ $((r % 2)) -eq 1 ]; then order="on off"; else order="off on"; fi
  for z in $order; do
  rm -rf /var/tmp/s39-rd; /usr/bin/db_bench --benchmarks=fillseq,fillrandom,overwrite,readrandom $F --db=/var/tmp/s39-rd --max_bytes_for_level_base=67108864 --use_direct_reads=1 --use_direct_io_for_flush_and_compaction=1 > /dev/null 2>&1
  rm -rf /var/tmp/s39-rd /var/tmp/s39.zns
  line=$( { /usr/bin/time -f "rss %M" $bin --benchmarks=$BENCH $F --db=emu:/var/tmp/s39.zns --ziob=$z 2>&1; } | grep -E 'ops/sec|^rss' | awk '/ops/{printf "%s %s ", $1, $5} /^rss/{printf "%s", $0}')
  echo "round $r $z: $line" >> $out
done; done
rm -f /var/tmp/s39.zns
