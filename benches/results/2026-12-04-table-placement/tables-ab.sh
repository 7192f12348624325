#!/bin/bash
# usage: tables-ab.sh OUT ROUNDS DBOPT  — kv-demo, --cores=2 --shards=1,
# --tables_on_background_core=off then =on, alternated; BENCHES= narrows the list.
out=$1; rounds=$2; dbopt=$3
BIN=${BIN:-/work/main/target/release/kv-demo}
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=100000 --value_size=1024 --seed=1000 --sync=0"
for r in $(seq $rounds); do for v in off on; do
  rm -f /var/tmp/s35.zns
  line=$(/usr/bin/time -f "rss_kb %M cpu_s %U+%S" $BIN --benchmarks=${BENCHES:-fillseq,fillrandom,overwrite,readrandom,readseq,readwhilewriting,seekrandom,deleterandom} $F --db=emu:/var/tmp/s35.zns$dbopt --cores=2 --shards=1 --tables_on_background_core=$v 2>&1 | grep -E 'ops/sec|rss_kb' | awk '/ops\/sec/{printf "%s %s ", $1, $5} /rss_kb/{printf "%s %s %s %s", $1,$2,$3,$4}')
  echo "round $r $v: $line" >> $out
done; done
rm -f /var/tmp/s35.zns
