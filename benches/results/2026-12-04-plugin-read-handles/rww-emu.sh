#!/bin/sh
# Guest: readwhilewriting on ext4, on the plugin over an emu file in ext4 read through the
# page cache (direct=0), and on the plugin over nvme:, with --statistics.
A="--num=30000 --key_size=16 --value_size=1024 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --seed=1000"
SO=${SO:-/work/main/target/release/libziob_rocksdb.so}
run() { label=$1; shift
  eval "$PRE db_bench $A $T --use_existing_db=0 --benchmarks=fillrandom,flush,waitforcompaction" > /dev/null 2>&1
  for b in readrandom readwhilewriting; do
    eval "$PRE db_bench $A $T --use_existing_db=1 --statistics --benchmarks=$b" > /tmp/out.txt 2>&1
    echo "$label $(grep -E "^$b " /tmp/out.txt | awk '{print $1, $5, $6, $7}') written=$(grep 'rocksdb.number.keys.written ' /tmp/out.txt | awk '{print $4}') stall_us=$(grep 'rocksdb.stall.micros ' /tmp/out.txt | awk '{print $4}') flushw=$(grep 'rocksdb.flush.write.bytes ' /tmp/out.txt | awk '{print $4}') compw=$(grep 'rocksdb.compact.write.bytes ' /tmp/out.txt | awk '{print $4}') bcmiss=$(grep 'rocksdb.block.cache.miss ' /tmp/out.txt | awk '{print $4}')"
  done
}
mkfs.ext4 -qF $ZIOB_CONV_BLOCK && mkdir -p /mnt/e && mount $ZIOB_CONV_BLOCK /mnt/e
for r in 1 2; do
rm -rf /mnt/e/db; PRE="" T="--db=/mnt/e/db" run ext4
rm -f /mnt/e/r.zns; PRE="LD_PRELOAD=$SO" T="--db=/rdb --fs_uri=ziob://emu:/mnt/e/r.zns,direct=0" run plugin-emu-pc
rm -f /mnt/e/r.zns; PRE="LD_PRELOAD=$SO" T="--db=/rdb --fs_uri=ziob://emu:/mnt/e/r.zns" run plugin-emu-direct
blkzone reset $ZIOB_ZNS_BLOCK; PRE="LD_PRELOAD=$SO" T="--db=/rdb --fs_uri=ziob://nvme:$ZIOB_ZNS_CHAR" run plugin-nvme
done
