#!/bin/bash
# Alternates the floor's three modes with the stores' synced fills, ROUNDS rounds, all in DIR
# (default /var/tmp): db_bench (its default buffered I/O), fjall and kv-demo on a page-cache
# emu file, --sync=1, 5,000 × 1 KiB fillseq (no flush happens at 16 MiB memtables).
# Usage: floor.sh KV_DEMO ROUNDS [DIR]   (KV_DEMO built with --features kv-demo/peers)
set -e
KV=$1; ROUNDS=${2:-5}; DIR=${3:-/var/tmp}
here=$(cd "$(dirname "$0")" && pwd)
gcc -O2 -o /tmp/sync-floor "$here/floor.c"
F="--benchmarks=fillseq --key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --cache_size=8388608 --bloom_bits=10 --num=5000 --value_size=1024 --sync=1 --seed=1000"
for r in $(seq 1 "$ROUNDS"); do
  for m in 0 1 2; do echo "round$r $(/tmp/sync-floor $m 5000 $DIR/sync-floor.bin)"; done
  rm -rf $DIR/floor-db; echo "round$r db_bench $(db_bench $F --db=$DIR/floor-db 2>&1 | awk '$1=="fillseq"{print $3, "us/op"}')"
  rm -rf $DIR/floor-fj; echo "round$r fjall $($KV $F --engine=fjall --db=$DIR/floor-fj 2>&1 | awk '$1=="fillseq"{print $3, "us/op"}')"
  rm -f $DIR/floor.zns; echo "round$r kv-demo $($KV $F --db=emu:$DIR/floor.zns,direct=0 2>&1 | awk '$1=="fillseq"{print $3, "us/op"}')"
done
rm -rf $DIR/floor-db $DIR/floor-fj $DIR/floor.zns
