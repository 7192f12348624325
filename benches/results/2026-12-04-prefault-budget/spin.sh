#!/bin/bash
# --sync=1 writes, 20,000 x 100 B: kv-demo (page cache and O_DIRECT emu) with --idle_spin_us values, fjall and db_bench; alternated.
out=$1; rounds=$2; shift 2
F="--key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=20000 --value_size=100 --seed=1000 --sync=1"
B=fillseq,fillrandom,overwrite
for r in $(seq 1 $rounds); do
  for v in "$@"; do
    rm -rf /var/tmp/s39-rd /var/tmp/s39.zns /var/tmp/s39-fj
    case $v in
      dbb) cmd="/usr/bin/db_bench --benchmarks=$B $F --db=/var/tmp/s39-rd";;
      dbbd) cmd="/usr/bin/db_bench --benchmarks=$B $F --db=/var/tmp/s39-rd --use_direct_reads=1 --use_direct_io_for_flush_and_compaction=1";;
      fjall) cmd="/tmp/s39/kv-demo-new --engine=fjall --benchmarks=$B $F --db=/var/tmp/s39-fj";;
      pc-*) cmd="/tmp/s39/kv-demo-new --benchmarks=$B $F --db=emu:/var/tmp/s39.zns,direct=0 --idle_spin_us=${v#pc-}";;
      d-*) cmd="/tmp/s39/kv-demo-new --benchmarks=$B $F --db=emu:/var/tmp/s39.zns --idle_spin_us=${v#d-}";;
    esac
    line=$( { /usr/bin/time -f "cpu %U+%S" $cmd 2>&1; } | grep -E 'ops/sec|^cpu' | awk '/ops/{printf "%s %s ", $1, $5} /^cpu/{printf "%s", $0}')
    echo "round $r $v: $line" >> $out
  done
done
rm -rf /var/tmp/s39-rd /var/tmp/s39.zns /var/tmp/s39-fj
