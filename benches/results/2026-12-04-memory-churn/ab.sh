#!/bin/bash
# Alternated A/B of kv-demo builds (/tmp/s33/kv-demo-<name>): the 1 KiB sequence, page-cache emu.
out=$1; rounds=$2; shift 2
for r in $(seq 1 $rounds); do for b in "$@"; do
  rm -f /var/tmp/s33-ab.zns
  line=$(/usr/bin/time -f "rss_kb %M cpu_s %U+%S" /tmp/s33/kv-demo-$b --benchmarks=${BENCHES:-fillseq,fillrandom,overwrite,readrandom,readseq,readwhilewriting,seekrandom,deleterandom} --key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=${NUM:-100000} --value_size=${VS:-1024} --seed=$((1000+r)) --sync=0 --db=emu:/var/tmp/s33-ab.zns${DBOPT-,direct=0} --ziob=on $EXTRA 2>&1 | grep -E 'ops/sec|rss_kb' | awk '/ops/{printf "%s %s ", $1, $5} /rss_kb/{printf "%s %s %s %s", $1,$2,$3,$4}')
  echo "round $r $b: $line" >> $out
done; done
rm -f /var/tmp/s33-ab.zns
