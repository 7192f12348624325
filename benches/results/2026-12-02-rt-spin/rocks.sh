#!/bin/bash
# usage: rocks.sh SO NAME
SO=$1; N=$2
F="--num=100000 --value_size=100 --compression_type=none --write_buffer_size=4194304 --target_file_size_base=4194304 --seed=1"
rm -f /var/tmp/$N.zns
a=$(LD_PRELOAD=$SO db_bench --fs_uri=ziob://emu:/var/tmp/$N.zns --db=/rdb --benchmarks=fillrandom $F 2>&1 | awk '/^fillrandom/{print $5}')
b=$(LD_PRELOAD=$SO db_bench --fs_uri=ziob://emu:/var/tmp/$N.zns --db=/rdb --benchmarks=readrandom --use_existing_db=1 $F 2>&1 | awk '/^readrandom/{print $5}')
rm -f /var/tmp/$N.zns
echo "fillrandom $a readrandom $b"
