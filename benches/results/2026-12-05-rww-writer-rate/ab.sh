#!/bin/bash
# Host, 1 KiB (or VALUE bytes): per sample a fresh fillrandom (timed), then readwhilewriting on that database, with
# RocksDB's statistics of the readwhilewriting process; the modes rotate per round.
# Usage: [EXTRA=flags] [VALUE=bytes] ab.sh ROUNDS MODE...
#   MODE = local | tmpfs | NAME:PLUGIN_SO:ENV:SPEC_TAIL, e.g. pc:/var/tmp/plugin.so:X=1:,direct=0?prefault=auto
#   (ENV is passed to env, X=1 for none; SPEC_TAIL follows ziob://emu:/var/tmp/rww-ab.zns;
#   tmpfs: RocksDB's default file system in /dev/shm, no disk at all).
#   Needs target/debug/ziob of the repository at /work/main (ziob create).
# Prints per sample: fillrandom ops/s, reads/s, the writer's keys per second, the SST files whose
# bloom filter a get consulted and skipped (rocksdb.bloom.filter.useful per get: the LSM's depth
# as the reader meets it), table and MANIFEST sync latency (P50/P95), and the writer's stall time.
ROUNDS=$1; shift
F="--num=100000 --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=${VALUE:-1024} --seed=1000 --statistics $EXTRA"
trap 'rm -rf /var/tmp/rww-ab-db /dev/shm/rww-ab-db /var/tmp/rww-ab.zns' EXIT
for r in $(seq $ROUNDS); do
  n=$#; modes=("$@"); off=$(( (r-1) % n ))
  for i in $(seq 0 $((n-1))); do m=${modes[$(( (i+off) % n ))]}
    if [ "$m" = local ]; then rm -rf /var/tmp/rww-ab-db; T="--db=/var/tmp/rww-ab-db"; PRE=""; name=local
    elif [ "$m" = tmpfs ]; then rm -rf /dev/shm/rww-ab-db; T="--db=/dev/shm/rww-ab-db"; PRE=""; name=tmpfs
      [ "$(stat -f -c %T /dev/shm)" = tmpfs ] || { echo "/dev/shm is not a tmpfs" >&2; exit 1; }
      [ "$(df --output=avail -k /dev/shm | tail -1)" -gt 1048576 ] || { echo "/dev/shm has less than 1 GiB free" >&2; exit 1; }
    else IFS=: read -r name so envv q <<<"$m"; rm -f /var/tmp/rww-ab.zns
      /work/main/target/debug/ziob create emu:/var/tmp/rww-ab.zns --zones 256 --zone-size 16M --zone-capacity 12M --max-open 14 --max-active 14 >/dev/null \
        || { echo "ziob create failed" >&2; exit 1; }
      T="--db=/rdb --fs_uri=ziob://emu:/var/tmp/rww-ab.zns$q"; PRE="env LD_PRELOAD=$so $envv"; fi
    $PRE db_bench $F $T --benchmarks=fillrandom,flush,waitforcompaction > /tmp/rww-ab-fill.out 2>&1 \
      || { echo "$r $name: fillrandom failed, see /tmp/rww-ab-fill.out" >&2; exit 1; }
    $PRE db_bench $F $T --use_existing_db=1 --benchmarks=readwhilewriting > /tmp/rww-ab-rww.out 2>&1 \
      || { echo "$r $name: readwhilewriting failed, see /tmp/rww-ab-rww.out" >&2; exit 1; }
    python3 - /tmp/rww-ab-rww.out "$r $name" /tmp/rww-ab-fill.out <<'PY'
import sys,re
s=open(sys.argv[1]).read()
def c(n):
    m=re.search(re.escape(n)+r' COUNT : (\d+)',s); return int(m.group(1)) if m else -1
def h(n,p):
    m=re.search(re.escape(n)+r' P50 : ([\d.]+) P95 : ([\d.]+)',s); return float(m.group(p)) if m else -1
ops=float(re.search(r'^readwhilewriting\s*:\s*[\d.]+ micros/op (\d+)',s,re.M).group(1))
fill=re.search(r'^fillrandom\s*:\s*[\d.]+ micros/op (\d+)',open(sys.argv[3]).read(),re.M).group(1)
k=c('rocksdb.number.keys.written')
print("%-16s fillrandom=%6s reads/s=%6d writer_keys/s=%6.0f probes/get=%.2f table_sync_p50/p95=%.1f/%.1f ms manifest_sync_p50=%.2f ms stall=%d ms"%(sys.argv[2],fill,ops,k*ops/1e5,c('rocksdb.bloom.filter.useful')/1e5,h('rocksdb.table.sync.micros',1)/1e3,h('rocksdb.table.sync.micros',2)/1e3,h('rocksdb.manifest.file.sync.micros',1)/1e3,c('rocksdb.stall.micros')//1000),flush=True)
PY
    rm -rf /dev/shm/rww-ab-db # the tmpfs database holds RAM; the others stay until overwritten
  done
done
