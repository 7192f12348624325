#!/bin/bash
# alternated builds: kv-demo /tmp/s34/kv-demo-<build> over $BENCHES, page cache unless DBOPT set, 2-core layout
out=$1; rounds=$2; shift 2
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=100000 --value_size=${VS:-1024} --seed=1000 --sync=0"
for r in $(seq 1 $rounds); do for b in "$@"; do
  rm -f /var/tmp/s34.zns
  line=$(/usr/bin/time -f "rss_kb %M cpu_s %U+%S" /tmp/s34/kv-demo-$b --benchmarks=${BENCHES:-fillseq,fillrandom,overwrite} $F --db=emu:/var/tmp/s34.zns${DBOPT-,direct=0} --cores=2 --shards=1 $EXTRA 2>&1 | grep -E 'ops/sec|rss_kb' | awk '/ops\/sec/{printf "%s %s ", $1, $5} /rss_kb/{printf "%s %s %s %s", $1,$2,$3,$4}')
  echo "round $r x:$b: $line" >> $out
done; done
rm -f /var/tmp/s34.zns
