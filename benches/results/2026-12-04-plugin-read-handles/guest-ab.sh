#!/bin/sh
# Guest: the plugin before (HEAD) and after the read handles on nvme: (read cache on) and on
# an emu file in ext4 through the page cache (read cache off), alternated; ext4 once per round.
# Per variant: fillrandom (fresh), overwrite, readrandom, readseq, readwhilewriting, each its
# own db_bench process as rocksdb-bench runs them. (The run recorded in guest-ab.txt used
# `v` for the ops as well, so its emu-pc lines are labelled with the last number instead of
# base/new: the first emu-pc line of a round is base's, the second new's.)
ROUNDS=${1:-2}
A="--num=30000 --key_size=16 --value_size=1024 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --seed=1000"
run() {
  label=$1
  line="$label"
  for b in "fillrandom,flush,waitforcompaction 0" "overwrite,flush,waitforcompaction 1" "readrandom 1" "readseq 1" "readwhilewriting 1"; do
    bm=${b% *}; ex=${b#* }; name=${bm%%,*}
    ops=$(eval "$PRE db_bench $A $T --use_existing_db=$ex --benchmarks=$bm" 2>&1 | grep -E "^$name " | awk '{print $5}')
    line="$line $name=$ops"
  done
  echo "$line"
}
mkfs.ext4 -qF $ZIOB_CONV_BLOCK && mkdir -p /mnt/e && mount $ZIOB_CONV_BLOCK /mnt/e
for r in $(seq $ROUNDS); do
  rm -rf /mnt/e/db; PRE="" T="--db=/mnt/e/db" run ext4
  for v in base new; do
    so=/tmp/s36/plugin-$v.so
    blkzone reset $ZIOB_ZNS_BLOCK
    PRE="LD_PRELOAD=$so" T="--db=/rdb --fs_uri=ziob://nvme:$ZIOB_ZNS_CHAR" run "$v-nvme"
    rm -f /mnt/e/r.zns
    PRE="LD_PRELOAD=$so" T="--db=/rdb --fs_uri=ziob://emu:/mnt/e/r.zns,direct=0" run "$v-emu-pc"
  done
done
