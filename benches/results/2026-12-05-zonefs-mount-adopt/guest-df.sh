#!/bin/bash
# Guest: the space the plugin's zbd: takes after fillseq, fillrandom (a fresh database) and overwrite, 30,000 keys
# (rocksdb-bench's guest sequence, each benchmark its own process), then `ziob fs df` (both counts) and `ziob fs ls -l`.
# PLUGIN below names the plugin (edit it: the guest does not see the host's environment). Run as: cargo xtask vm-run --zones 128 --zone-size 16M --zone-capacity 12M --max-open 14 --max-active 14 \
#   --conv-size 2G --timeout-secs 800 -- bash guest-df.sh   (the guest sees /var/tmp and /work)
DEV=nvme0n1; PLUGIN=${PLUGIN:-/var/tmp/plugin-adopt.so}; CLI=/work/main/target/release/ziob
for V in 100 1024; do
  blkzone reset /dev/$DEV
  F="--num=30000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=$V --seed=1000"
  U="ziob://zbd:/dev/$DEV?prefault=auto"
  LD_PRELOAD=$PLUGIN db_bench $F --db=/rocksdb-bench --fs_uri="$U" --use_existing_db=0 --benchmarks=fillseq,flush,waitforcompaction 2>&1 | grep -E "^fillseq"
  LD_PRELOAD=$PLUGIN db_bench $F --db=/rocksdb-bench --fs_uri="$U" --use_existing_db=0 --benchmarks=fillrandom,flush,waitforcompaction 2>&1 | grep -E "^fillrandom"
  LD_PRELOAD=$PLUGIN db_bench $F --db=/rocksdb-bench --fs_uri="$U" --use_existing_db=1 --benchmarks=overwrite,flush,waitforcompaction 2>&1 | grep -E "^overwrite"
  echo "== value $V"
  $CLI fs df zbd:/dev/$DEV
  $CLI fs ls -l zbd:/dev/$DEV rocksdb-bench | head -40
done
