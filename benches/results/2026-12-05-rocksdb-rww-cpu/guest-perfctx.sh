#!/bin/bash
# Guest (cargo xtask vm-run, 128 zones of 16 MiB): the reader's own RocksDB perf context in
# 1 KiB readwhilewriting (db_bench --perf_level=3 prints the reader thread's PERF_CONTEXT).
# Per round and target (ext4 on the conventional namespace, the plugin's zbd:; the order
# alternating): a fresh file system or blank device, fillrandom, then readwhilewriting with
# --perf_level=3 as a process of its own. Prints reads/s, keys written and the reader's
# counters and times (ns, wall) of interest.
# With TARGETS (default "ext4 zbd") a third target zbd2 is the plugin's zbd: with the URI
# options EXTRA (e.g. "&cache=256M") added.
# Usage: bash guest-perfctx.sh ROUNDS [PLUGIN] [EXTRA]
ROUNDS=${1:-3}
PLUGIN=${2:-/work/main/target/release/libziob_rocksdb.so}
EXTRA=${3:-}
TARGETS=${TARGETS:-"ext4 zbd"}
DEV=nvme0n1; MNT=/tmp/pc-ext4
FLAGS="--num=30000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=1024 --seed=1000 --statistics"
FIELDS="user_key_comparison_count block_cache_hit_count block_read_count block_read_byte block_read_time block_checksum_time get_snapshot_time get_from_memtable_time get_from_memtable_count get_post_process_time get_from_output_files_time new_table_block_iter_nanos block_seek_nanos bloom_sst_hit_count bloom_sst_miss_count"
mkdir -p $MNT
run() { # target bench existing extra
  case $1 in
    ext4) db_bench $FLAGS --db=$MNT/db --use_existing_db=$3 --benchmarks=$2 $4 ;;
    zbd) LD_PRELOAD=$PLUGIN db_bench $FLAGS --db=/rocksdb-bench --fs_uri="ziob://zbd:/dev/$DEV?prefault=auto" --use_existing_db=$3 --benchmarks=$2 $4 ;;
    zbd2) LD_PRELOAD=$PLUGIN db_bench $FLAGS --db=/rocksdb-bench --fs_uri="ziob://zbd:/dev/$DEV?prefault=auto$EXTRA" --use_existing_db=$3 --benchmarks=$2 $4 ;;
  esac
}
for r in $(seq 1 "$ROUNDS"); do
  # The order rotates by one target per round.
  order=$(echo $TARGETS | awk -v k=$(( (r - 1) % $(echo $TARGETS | wc -w) )) '{for (i = 0; i < NF; i++) printf "%s ", $((i + k) % NF + 1)}')
  for t in $order; do
    if [ $t = ext4 ]; then
      umount $MNT 2>/dev/null; mkfs.ext4 -q -F $ZIOB_CONV_BLOCK && mount -t ext4 $ZIOB_CONV_BLOCK $MNT
    else
      blkzone reset /dev/$DEV
    fi
    run $t fillrandom 0 > /tmp/pc.out 2>&1
    echo "$r $t fillrandom $(awk '$1=="fillrandom" && $2==":" {print $5}' /tmp/pc.out)"
    run $t readwhilewriting 1 --perf_level=3 > /tmp/pc.out 2>&1
    echo "$r $t readwhilewriting $(awk '$1=="readwhilewriting" && $2==":" {print $5}' /tmp/pc.out) keys_written $(awk '$1=="rocksdb.number.keys.written" {print $4}' /tmp/pc.out)"
    ctx=$(grep -A1 'PERF_CONTEXT:' /tmp/pc.out | tail -1)
    for f in $FIELDS; do
      echo "$r $t perf $f $(echo "$ctx" | tr ',' '\n' | awk -v f=$f '$1==f {print $3; exit}')"
    done
    if [ $t = ext4 ]; then umount $MNT; fi
  done
done
