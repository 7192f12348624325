#!/bin/bash
# kv-demo before (BASE) and after (NEW) reading ahead through cached blocks, and db_bench with
# direct I/O, alternated, ROUNDS rounds: kv-bench's per-process list up to readseq on an
# O_DIRECT emu file in /var/tmp. SYNC=1: 20,000 x 1 KiB synced (the cell of section 21);
# SYNC=0: 100,000 x 1 KiB. Prints: round mode benchmark ops/s.
BASE=$1; NEW=$2; ROUNDS=${3:-4}; SYNC=${4:-1}
NUM=20000; [ "$SYNC" = 0 ] && NUM=100000
F="--benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq --key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --statistics --num=$NUM --value_size=1024 --sync=$SYNC --seed=1000"
for r in $(seq 1 "$ROUNDS"); do
  order="base new dbb"; [ $((r % 2)) = 0 ] && order="new base dbb"
  for m in $order; do
    rm -rf /var/tmp/ra.zns /var/tmp/radb
    case $m in
      base) out=$($BASE $F --ziob=on --db=emu:/var/tmp/ra.zns 2>&1) ;;
      new) out=$($NEW $F --ziob=on --db=emu:/var/tmp/ra.zns 2>&1) ;;
      dbb) out=$(db_bench $F --max_bytes_for_level_base=67108864 --use_direct_reads=1 --use_direct_io_for_flush_and_compaction=1 --db=/var/tmp/radb 2>&1) ;;
    esac
    echo "$out" | awk -v r=$r -v m=$m '($1=="readrandom"||$1=="readseq"||$1=="fillrandom") && $2==":" {print r, m, $1, $5}'
  done
done
rm -rf /var/tmp/ra.zns /var/tmp/radb
