#!/bin/bash
# usage: alloc-ab.sh ROUNDS VALUE SO_A SO_B — the plugin built with mimalloc as its global
# allocator against the same tree without it (glibc), alternating which goes first; per
# round and build a fresh emu file (direct=0), fillrandom, then readrandom, readseq and
# readwhilewriting on that database.
A="--num=100000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=$2 --seed=1000"
B="fillrandom readrandom readseq readwhilewriting"
for r in $(seq $1); do
  if [ $((r % 2)) = 1 ]; then order="$3 $4"; else order="$4 $3"; fi
  for so in $order; do
    F=/var/tmp/alloc-ab.zns; rm -f $F
    /work/main/target/release/ziob create emu:$F,direct=0 --zones 256 --zone-size 16M --zone-capacity 12M --max-open 14 --max-active 14 >/dev/null
    line="$(basename $so)"; ex=0
    for b in $B; do line="$line $b=$(LD_PRELOAD=$so db_bench $A --db=/rdb --fs_uri="ziob://emu:$F,direct=0" --use_existing_db=$ex --benchmarks=$b 2>&1 | grep -E "^$b " | awk '{print $5}')"; ex=1; done
    echo "$line"
  done
done
