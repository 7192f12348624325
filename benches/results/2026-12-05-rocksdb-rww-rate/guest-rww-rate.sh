#!/bin/bash
# Guest (cargo xtask vm-run, 128 zones of 16 MiB, 2 GiB conventional namespace): 1 KiB
# readwhilewriting with db_bench's writer limited to RATE bytes/s (--benchmark_write_rate_limit)
# on ext4, the plugin on zbd: and ZenFS, ROUNDS rounds, the targets' order rotating. Each:
# a fresh database (fillrandom, 30,000 x 1 KiB, rocksdb-bench's flags), then
# readwhilewriting on it. Prints: round target reads/s seconds keys-written-by-the-writer.
ROUNDS=${1:-3}
RATE=${2:-8000000}
PLUGIN=/work/main/target/release/libziob_rocksdb.so
FLAGS="--num=30000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --statistics --value_size=1024 --seed=1000"
MNT=/tmp/rww-ext4
mkdir -p $MNT /tmp/zenfs-aux-rww
prepare() {
  case $1 in
    ext4) umount $MNT 2>/dev/null; mkfs.ext4 -q -F /dev/nvme0n2 && mount -t ext4 /dev/nvme0n2 $MNT ;;
    ziob-zbd) echo none > /sys/block/nvme0n1/queue/scheduler 2>/dev/null; blkzone reset /dev/nvme0n1 ;;
    zenfs) echo mq-deadline > /sys/block/nvme0n1/queue/scheduler; rm -rf /tmp/zenfs-aux-rww; /opt/zenfs/bin/zenfs mkfs --zbd=nvme0n1 --aux_path=/tmp/zenfs-aux-rww --force >/dev/null ;;
  esac
}
bench() { # target benchmark existing extra
  case $1 in
    ext4) db_bench $FLAGS --db=$MNT/db --use_existing_db=$3 --benchmarks=$2 $4 ;;
    ziob-zbd) LD_PRELOAD=$PLUGIN db_bench $FLAGS --db=/rww --fs_uri="ziob://zbd:/dev/nvme0n1?prefault=auto" --use_existing_db=$3 --benchmarks=$2 $4 ;;
    zenfs) LD_PRELOAD=/opt/zenfs/lib/libzenfs.so db_bench $FLAGS --db=/rww --fs_uri=zenfs://dev:nvme0n1 --use_existing_db=$3 --benchmarks=$2 $4 ;;
  esac 2>&1
}
targets=(ext4 ziob-zbd zenfs)
for r in $(seq 1 "$ROUNDS"); do
  for i in 0 1 2; do
    t=${targets[$(( (i + r) % 3 ))]}
    prepare $t
    bench $t fillrandom,flush,waitforcompaction 0 >/dev/null
    out=$(bench $t readwhilewriting 1 --benchmark_write_rate_limit=$RATE)
    echo "$r $t $(echo "$out" | awk '$1=="readwhilewriting" && $2==":" {print $5, $7}') $(echo "$out" | awk '$1=="rocksdb.number.keys.written" {print $4}')"
  done
done
umount $MNT 2>/dev/null
