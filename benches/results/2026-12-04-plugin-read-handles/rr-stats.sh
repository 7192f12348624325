#!/bin/sh
A="--num=30000 --key_size=16 --value_size=1024 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --seed=1000"
SO=${SO:-/work/main/target/release/libziob_rocksdb.so}
mkfs.ext4 -qF $ZIOB_CONV_BLOCK && mkdir -p /mnt/e && mount $ZIOB_CONV_BLOCK /mnt/e
show() { grep -E "^readrandom|^readwhile|block.cache.(data|index|filter).miss |sst.read.micros|read.block.get.micros|db.get.micros|rocksdb.no.file.opens|file.read.get.micros|table.open.io.micros|bytes.read " /tmp/o.txt | sed "s/^/$1 /"; }
db_bench $A --db=/mnt/e/db --use_existing_db=0 --benchmarks=fillrandom,flush,waitforcompaction > /dev/null 2>&1
ls /mnt/e/db | grep -c sst
db_bench $A --db=/mnt/e/db --use_existing_db=1 --statistics --benchmarks=readrandom > /tmp/o.txt 2>&1; show ext4
T="--db=/rdb --fs_uri=ziob://emu:/mnt/e/r.zns,direct=0"
LD_PRELOAD=$SO db_bench $A $T --use_existing_db=0 --benchmarks=fillrandom,flush,waitforcompaction > /dev/null 2>&1
LD_PRELOAD=$SO db_bench $A $T --use_existing_db=1 --statistics --benchmarks=readrandom > /tmp/o.txt 2>&1; show plugin-pc
ls /rdb 2>/dev/null | head -2
