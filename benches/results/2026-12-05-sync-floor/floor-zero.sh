#!/bin/bash
# The emu flush's floor with zero-ahead (floor.c modes 2, 3, 4) alternated with kv-demo's
# synced fill on a page-cache emu file with zero-ahead on (default) and off, ROUNDS rounds,
# in DIR (default /var/tmp). Usage: floor-zero.sh KV_DEMO ROUNDS [DIR]
set -e
KV=$1; ROUNDS=${2:-5}; DIR=${3:-/var/tmp}
here=$(cd "$(dirname "$0")" && pwd)
gcc -O2 -o /tmp/sync-floor "$here/floor.c"
F="--benchmarks=fillseq --key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --cache_size=8388608 --bloom_bits=10 --num=5000 --value_size=1024 --sync=1 --seed=1000"
for r in $(seq 1 "$ROUNDS"); do
  for m in 2 3 4; do echo "round$r $(/tmp/sync-floor $m 5000 $DIR/sync-floor.bin)"; done
  rm -f $DIR/floor.zns; echo "round$r kv-demo $($KV $F --db=emu:$DIR/floor.zns,direct=0 2>&1 | awk '$1=="fillseq"{print $3, "us/op"}')"
  rm -f $DIR/floor.zns; echo "round$r kv-demo-zero_ahead=0 $($KV $F --db=emu:$DIR/floor.zns,direct=0,zero_ahead=0 2>&1 | awk '$1=="fillseq"{print $3, "us/op"}')"
done
rm -f $DIR/floor.zns
