#!/bin/bash
# alternated, no db_bench in between: kv-demo ($BENCHES) page cache, 2-core layout, variants "ENV:FLAGS"
out=$1; rounds=$2; bin=$3; shift 3
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=100000 --value_size=1024 --seed=1000 --sync=0"
for r in $(seq 1 $rounds); do for e in "$@"; do
  rm -f /var/tmp/s34.zns
  fl=${e#*:}; ev=${e%%:*}; line=$(env $ev /usr/bin/time -f "rss_kb %M cpu_s %U+%S" $bin --benchmarks=${BENCHES:-fillseq,fillrandom,overwrite} $F --db=emu:/var/tmp/s34.zns${DBOPT-,direct=0} ${ZIOB---ziob=on} --cores=2 --shards=1 $EXTRA $fl 2>&1 | grep -E 'ops/sec|rss_kb' | awk '/ops\/sec/{printf "%s %s ", $1, $5} /rss_kb/{printf "%s %s %s %s", $1,$2,$3,$4}')
  echo "round $r $e: $line" >> $out
done; done
rm -f /var/tmp/s34.zns
