#!/bin/sh
# In the guest: the plugin with and without table pages kept on write (/tmp/s35/plugin-{off,on}.so)
# on the ZNS namespace (nvme:), alternated, ROUNDS rounds; RocksDB on ext4 once for scale.
# Per variant: fillrandom (fresh, then flush and waitforcompaction), overwrite, readrandom,
# readseq, readwhilewriting on that database, each its own db_bench process as rocksdb-bench runs them.
ROUNDS=${1:-3}
A="--num=30000 --key_size=16 --value_size=1024 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --seed=1000"
run() { # label, then the db_bench target flags
  label=$1; shift
  line="$label"
  for b in "fillrandom,flush,waitforcompaction 0" "overwrite,flush,waitforcompaction 1" "readrandom 1" "readseq 1" "readwhilewriting 1"; do
    set -- "$@"
    bm=${b% *}; ex=${b#* }; name=${bm%%,*}
    v=$(eval "$PRE db_bench $A $T --use_existing_db=$ex --benchmarks=$bm" 2>&1 | grep -E "^$name " | awk '{print $5}')
    line="$line $name=$v"
  done
  echo "$line"
}
mkfs.ext4 -qF $ZIOB_CONV_BLOCK && mkdir -p /mnt/e && mount $ZIOB_CONV_BLOCK /mnt/e
PRE="" T="--db=/mnt/e/db" run ext4
for r in $(seq $ROUNDS); do
  for so in off on; do
    blkzone reset $ZIOB_ZNS_BLOCK
    PRE="LD_PRELOAD=/tmp/s35/plugin-$so.so" T="--db=/rdb --fs_uri=ziob://nvme:$ZIOB_ZNS_CHAR" run "round$r-$so"
  done
done
