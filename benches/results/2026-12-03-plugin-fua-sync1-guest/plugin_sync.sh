#!/bin/sh
# db_bench --sync=1 through the ZIOB plugin on the ZNS namespace (old and new .so) and on ZenFS.
F="--key_size=16 --value_size=100 --threads=1 --compression_type=none --bloom_bits=10 --cache_size=8388608 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --num=3000 --seed=1000 --sync=1 --benchmarks=fillrandom,overwrite"
DEV=$(basename $ZIOB_ZNS_BLOCK)
ORIG=$(sed 's/.*\[\(.*\)\].*/\1/' /sys/block/$DEV/queue/scheduler)
for round in 1 2 3; do
  for so in main new; do
    blkzone reset $ZIOB_ZNS_BLOCK
    echo "== round $round ziob-nvme $so"
    LD_PRELOAD=/tmp/plugin-$so.so db_bench $F --fs_uri=ziob://nvme:$ZIOB_ZNS_CHAR --db=/rdb 2>&1 | grep -E "ops/sec"
  done
  echo mq-deadline > /sys/block/$DEV/queue/scheduler
  rm -rf /tmp/zaux; /opt/zenfs/bin/zenfs mkfs --zbd=$DEV --aux_path=/tmp/zaux --force > /dev/null 2>&1
  echo "== round $round zenfs"
  LD_PRELOAD=/opt/zenfs/lib/libzenfs.so db_bench $F --fs_uri=zenfs://dev:$DEV --db=/rdb 2>&1 | grep -E "ops/sec"
  echo $ORIG > /sys/block/$DEV/queue/scheduler
done
