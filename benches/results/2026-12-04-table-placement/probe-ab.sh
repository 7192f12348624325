#!/bin/bash
# usage: split-ab.sh OUT ROUNDS DBOPT  — fills, --cores=2 --shards=1, KVX_SPLIT unset vs set, alternated
out=$1; rounds=$2; dbopt=$3
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=100000 --value_size=1024 --seed=1000 --sync=0"
for r in $(seq $rounds); do for v in base split; do
  rm -f /var/tmp/s35.zns
  if [ $v = split ]; then export KVX_SPLIT=1; else unset KVX_SPLIT; fi
  line=$(/usr/bin/time -f "rss_kb %M cpu_s %U+%S" /work/main/target/release/kv-demo --benchmarks=${BENCHES:-fillseq,fillrandom,overwrite} $F --db=emu:/var/tmp/s35.zns$dbopt --cores=2 --shards=1 2>&1 | grep -E 'ops/sec|rss_kb' | awk '/ops\/sec/{printf "%s %s ", $1, $5} /rss_kb/{printf "%s %s %s %s", $1,$2,$3,$4}')
  echo "round $r $v: $line" >> $out
done; done
unset KVX_SPLIT; rm -f /var/tmp/s35.zns
