#!/bin/bash
# usage: kv.sh BIN NAME  (env passes through)
BIN=$1; NAME=$2
rm -f /var/tmp/$NAME.zns
$BIN --benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,readwhilewriting,seekrandom,deleterandom --key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --target_file_size_base=16777216 --cache_size=8388608 --bloom_bits=10 --num=100000 --value_size=100 --seed=1000 --sync=0 --db=emu:/var/tmp/$NAME.zns --cores=2 2>&1 | awk '/ops\/sec|op;/{print $1, $5}' | tr '\n' ' '
rm -f /var/tmp/$NAME.zns
echo
